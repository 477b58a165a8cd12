"""Ending a lease early (give back, skip, leave the project): the slot returns at once, the
draft stays, the task never comes back to that expert and can no longer be submitted."""
import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from annotation.assignment.selectors import assignment_state
from annotation.assignment.services import (
    assignment_claim_next,
    lease_end,
    leases_end_for_expert,
    leases_expire,
)
from annotation.models import Assignment, Draft, Task
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import draft_save, labels_submit
from core.errors import Conflict
from experts.models import ExpertProfile
from tests.factories import ExpertFactory, make_project_with_tasks


def _experts(project, n):
    experts = [ExpertFactory() for _ in range(n)]
    for e in experts:
        project_add_member(project=project, user=e)
    return experts


def _labels(assignment):
    return {i.item_key: 1 for i in rubric_items_for_task(assignment.task)}


@pytest.mark.django_db
def test_a_given_back_lease_frees_its_slot_keeps_the_draft_and_cannot_be_submitted():
    project = make_project_with_tasks(n_questions=1, items_per_question=2)
    leaver, *others = _experts(project, 4)
    now = timezone.now()
    lease = assignment_claim_next(project=project, expert=leaver, now=now)
    [assignment_claim_next(project=project, expert=e, now=now) for e in others[:2]]
    draft_save(expert=leaver, assignment_id=lease.pk, labels={next(iter(_labels(lease))): 1}, now=now)
    assert Task.objects.get().status == "full"

    assert lease_end(assignment=lease) is True

    task = Task.objects.get()
    assert (task.live_count, task.status) == (2, "open")
    assert Draft.objects.filter(assignment=lease).exists()
    lease.refresh_from_db()
    assert assignment_state(lease, now=now) == "released"
    with pytest.raises(Conflict) as refused:
        labels_submit(expert=leaver, assignment_id=lease.pk, labels=_labels(lease), now=now)
    assert refused.value.code == "lease_released"
    with pytest.raises(Conflict):
        draft_save(expert=leaver, assignment_id=lease.pk, labels={}, now=now)
    # The freed slot goes to the fourth expert, never back to the one who gave it up.
    assert assignment_claim_next(project=project, expert=leaver, now=now) is None
    fourth = assignment_claim_next(project=project, expert=others[2], now=now)
    assert fourth is not None and fourth.task_id == task.pk and fourth.slot == lease.slot
    assert lease_end(assignment=lease) is False  # ending twice changes nothing


@pytest.mark.django_db
def test_a_swept_expired_lease_can_be_released_without_returning_its_slot_twice():
    project = make_project_with_tasks(n_questions=1)
    (expert,) = _experts(project, 1)
    now = timezone.now()
    lease = assignment_claim_next(project=project, expert=expert, now=now)
    leases_expire(now=now + timedelta(seconds=project.lease_timeout_s + 1))
    assert Task.objects.get().live_count == 0

    assert lease_end(assignment=lease) is True

    assert Task.objects.get().live_count == 0
    assert Assignment.objects.get().status == "released"


@pytest.mark.django_db
def test_leaving_a_project_ends_only_that_projects_leases_and_keeps_submitted_work():
    project = make_project_with_tasks(n_questions=3)
    other_project = make_project_with_tasks(n_questions=1)
    (expert,) = _experts(project, 1)
    project_add_member(project=other_project, user=expert)
    ExpertProfile.objects.filter(user=expert).update(max_concurrent_leases=2)
    now = timezone.now()
    done = assignment_claim_next(project=project, expert=expert, now=now)
    labels_submit(expert=expert, assignment_id=done.pk, labels=_labels(done), now=now)
    open_lease = assignment_claim_next(project=project, expert=expert, now=now)
    elsewhere = assignment_claim_next(project=other_project, expert=expert, now=now)

    assert leases_end_for_expert(project=project, expert=expert) == 1

    statuses = dict(Assignment.objects.values_list("pk", "status"))
    assert statuses == {done.pk: "submitted", open_lease.pk: "released", elsewhere.pk: "leased"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_a_release_racing_the_same_leases_submission_leaves_one_consistent_outcome():
    assert connection.vendor == "postgresql"
    for _round in range(5):
        project = make_project_with_tasks(n_questions=1)
        (expert,) = _experts(project, 1)
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
        labels = _labels(lease)
        outcomes: list[str] = []
        barrier = threading.Barrier(2)

        def submit(lease=lease, labels=labels, expert=expert, outcomes=outcomes, barrier=barrier):
            try:
                barrier.wait()
                labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
                outcomes.append("submitted")
            except Conflict as exc:
                outcomes.append(exc.code)
            finally:
                connections.close_all()

        def release(lease=lease, outcomes=outcomes, barrier=barrier):
            try:
                barrier.wait()
                outcomes.append("released" if lease_end(assignment=lease) else "not-released")
            finally:
                connections.close_all()

        threads = [threading.Thread(target=submit), threading.Thread(target=release)]
        [t.start() for t in threads]
        [t.join() for t in threads]

        task = Task.objects.get(project=project)
        status = Assignment.objects.get(pk=lease.pk).status
        assert sorted(outcomes) in (["not-released", "submitted"], ["lease_released", "released"])
        if status == "submitted":
            assert (task.submitted_count, task.live_count) == (1, 1)
        else:
            assert status == "released" and (task.submitted_count, task.live_count) == (0, 0)
