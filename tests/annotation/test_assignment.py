"""Leasing: random, distinct, at most `overlap` live experts per task, expiring leases."""
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next, leases_expire
from annotation.models import Assignment, FillOrder, Project, Task
from annotation.services import project_add_member
from core.errors import Forbidden
from experts.models import ExpertProfile
from tests.factories import ExpertFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


def _experts(project, n):
    experts = [ExpertFactory() for _ in range(n)]
    for e in experts:
        project_add_member(project=project, user=e)
    return experts


def test_a_task_reaches_overlap_distinct_experts_then_leaves_the_pool():
    project = make_project_with_tasks(n_questions=1, items_per_question=2)
    experts = _experts(project, 4)
    now = timezone.now()

    leases = [assignment_claim_next(project=project, expert=e, now=now) for e in experts]

    assert [a is not None for a in leases] == [True, True, True, False]
    assert len({a.expert_id for a in leases[:3]}) == 3
    assert sorted(a.slot for a in leases[:3]) == [1, 2, 3]
    task = Task.objects.get()
    assert (task.live_count, task.status) == (3, "full")


def test_asking_again_returns_the_lease_already_held():
    project = make_project_with_tasks(n_questions=3)
    (expert,) = _experts(project, 1)
    now = timezone.now()

    first = assignment_claim_next(project=project, expert=expert, now=now)
    second = assignment_claim_next(project=project, expert=expert, now=now)

    assert first.pk == second.pk
    assert Assignment.objects.filter(expert=expert).count() == 1


def test_an_expired_lease_returns_its_slot_and_never_goes_back_to_the_same_expert():
    project = make_project_with_tasks(n_questions=1)
    slow, *others = _experts(project, 4)
    now = timezone.now()
    lease = assignment_claim_next(project=project, expert=slow, now=now)
    later = now + timedelta(seconds=project.lease_timeout_s + 1)

    expired = leases_expire(now=later)
    again = assignment_claim_next(project=project, expert=slow, now=later)
    taken = [assignment_claim_next(project=project, expert=e, now=later) for e in others]

    assert expired == 1
    lease.refresh_from_db()
    assert lease.status == "expired"
    assert again is None
    assert all(a is not None for a in taken)
    assert Task.objects.get().live_count == 3


def test_non_members_and_paused_experts_get_a_reason_not_a_task():
    project = make_project_with_tasks(n_questions=1)
    outsider = ExpertFactory()
    (paused,) = _experts(project, 1)
    ExpertProfile.objects.filter(user=paused).update(status="paused")

    with pytest.raises(Forbidden, match="not an annotator"):
        assignment_claim_next(project=project, expert=outsider, now=timezone.now())
    with pytest.raises(Forbidden, match="paused"):
        assignment_claim_next(project=project, expert=paused, now=timezone.now())
    assert Assignment.objects.count() == 0


def test_spread_evenly_draws_are_spread_over_the_tasks():
    project = make_project_with_tasks(n_questions=40, items_per_question=1)
    Project.objects.filter(pk=project.pk).update(fill_order=FillOrder.SPREAD_EVENLY)
    project.refresh_from_db()
    experts = _experts(project, 30)
    now = timezone.now()

    picked = [assignment_claim_next(project=project, expert=e, now=now).task_id for e in experts]

    assert len(set(picked)) >= 12


def test_by_default_started_tasks_fill_up_before_new_ones_are_begun():
    project = make_project_with_tasks(n_questions=40, items_per_question=1)
    experts = _experts(project, 30)
    now = timezone.now()

    picked = [assignment_claim_next(project=project, expert=e, now=now).task_id for e in experts]

    assert len(set(picked)) == 10
    assert Task.objects.filter(project=project, status="full").count() == 10


def test_the_database_refuses_a_second_assignment_of_one_expert_on_one_task():
    project = make_project_with_tasks(n_questions=1)
    (expert,) = _experts(project, 1)
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())

    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(task=lease.task, expert=expert, slot=2, leased_at=lease.leased_at,
                                  expires_at=lease.expires_at)


def test_the_database_refuses_two_live_assignments_on_one_slot():
    project = make_project_with_tasks(n_questions=1)
    first, second = _experts(project, 2)
    lease = assignment_claim_next(project=project, expert=first, now=timezone.now())

    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(task=lease.task, expert=second, slot=lease.slot, leased_at=lease.leased_at,
                                  expires_at=lease.expires_at)


def test_the_database_refuses_a_slot_beyond_the_overlap():
    project = make_project_with_tasks(n_questions=1)
    (expert,) = _experts(project, 1)
    task = Task.objects.get()

    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(task=task, expert=expert, slot=4, leased_at=timezone.now(),
                                  expires_at=timezone.now())


def test_the_database_refuses_a_live_count_above_the_overlap():
    make_project_with_tasks(n_questions=1)

    with pytest.raises(IntegrityError), transaction.atomic():
        Task.objects.update(live_count=4)
