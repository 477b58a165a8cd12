"""Assignment modes besides the random pull: by hand, priority, hand-over; every rule of the pull still holds."""
import random
import threading

import pytest
from django.db import connection, connections
from django.db.models import Count
from django.utils import timezone
from django.utils.translation import override

from annotation.assignment.manual import assignments_create_by_hand, leases_hand_over, tasks_set_priority
from annotation.assignment.services import RING_SIZE, assignment_claim_next
from annotation.models import Assignment, Draft, Question, Task
from annotation.services import project_add_member
from core.errors import DomainError, NotFound, error_message
from experts.models import ExpertProfile
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


def _experts(project, n, **profile):
    experts = [ExpertFactory() for _ in range(n)]
    for e in experts:
        project_add_member(project=project, user=e)
        if profile:
            ExpertProfile.objects.filter(user=e).update(**profile)
    return experts


def _task_ids(project):
    return list(Task.objects.filter(project=project).order_by("pk").values_list("pk", flat=True))


def test_a_pm_assigns_one_urgent_task_to_a_named_expert_who_then_gets_it_first():
    project = make_project_with_tasks(n_questions=5)
    (expert,) = _experts(project, 1)
    urgent = _task_ids(project)[3]
    now = timezone.now()

    result = assignments_create_by_hand(project=project, task_ids=[urgent], experts=[expert], by=None, now=now)
    lease = assignment_claim_next(project=project, expert=expert, now=now)

    assert [a.task_id for a in result.assignments] == [urgent]
    assert lease.pk == result.assignments[0].pk
    task = Task.objects.get(pk=urgent)
    assert (task.live_count, task.status) == (1, "open")


def test_assigning_a_set_to_several_experts_fills_slots_and_marks_full_tasks():
    project = make_project_with_tasks(n_questions=2)
    experts = _experts(project, 3, max_concurrent_leases=5)

    result = assignments_create_by_hand(project=project, task_ids=_task_ids(project), experts=experts, by=None,
                                        now=timezone.now())

    assert len(result.assignments) == 6
    assert set(Task.objects.values_list("status", "live_count")) == {("full", 3)}
    assert {sorted(Assignment.objects.filter(task_id=t).values_list("slot", flat=True)) == [1, 2, 3]
            for t in _task_ids(project)} == {True}


def test_a_fourth_expert_on_a_full_task_is_refused_and_nothing_is_written():
    project = make_project_with_tasks(n_questions=2)
    *three, fourth = _experts(project, 4, max_concurrent_leases=5)
    first, second = _task_ids(project)
    assignments_create_by_hand(project=project, task_ids=[first], experts=three, by=None, now=timezone.now())

    with pytest.raises(DomainError) as refused:
        assignments_create_by_hand(project=project, task_ids=[second, first], experts=[fourth], by=None,
                                   now=timezone.now())

    assert refused.value.code == "assign_task_full"
    assert not Assignment.objects.filter(expert=fourth).exists()
    assert Task.objects.get(pk=second).live_count == 0


@pytest.mark.parametrize(("setup", "code"), [
    ("paused", "assign_paused"),
    ("not_member", "assign_not_member"),
    ("lease_limit", "assign_lease_limit"),
    ("capacity", "assign_weekly_capacity"),
    ("tier", "assign_tier"),
    ("held_before", "assign_held_before"),
    ("golden", "assign_task_not_open"),
])
def test_an_ineligible_named_expert_is_refused_with_the_reason(setup, code):
    project = make_project_with_tasks(n_questions=3)
    (expert,) = _experts(project, 1)
    task_id = _task_ids(project)[0]
    now = timezone.now()
    if setup == "paused":
        ExpertProfile.objects.filter(user=expert).update(status="paused")
    elif setup == "not_member":
        expert = ExpertFactory()
    elif setup == "lease_limit":
        assignments_create_by_hand(project=project, task_ids=[_task_ids(project)[1]], experts=[expert], by=None,
                                   now=now)
    elif setup == "capacity":
        ExpertProfile.objects.filter(user=expert).update(weekly_capacity=0)
    elif setup == "tier":
        Question.objects.filter(project=project).update(difficulty="hard")
    elif setup == "held_before":
        lease = assignments_create_by_hand(project=project, task_ids=[task_id], experts=[expert], by=None,
                                           now=now).assignments[0]
        Assignment.objects.filter(pk=lease.pk).update(status="released")
        Task.objects.filter(pk=task_id).update(live_count=0)
    elif setup == "golden":
        Task.objects.filter(pk=task_id).update(is_golden=True)
    before = Assignment.objects.count()

    with pytest.raises(DomainError) as refused:
        assignments_create_by_hand(project=project, task_ids=[task_id], experts=[expert], by=None, now=now)

    assert refused.value.code == code
    assert Assignment.objects.count() == before
    with override("zh-hans"):
        chinese = error_message(refused.value)
    assert expert.username in chinese or str(task_id) in chinese
    assert chinese != str(refused.value)


def test_a_task_of_another_project_is_not_found_and_nothing_changes():
    project = make_project_with_tasks(n_questions=1)
    other = make_project_with_tasks(n_questions=1)
    (expert,) = _experts(project, 1)

    with pytest.raises(NotFound):
        assignments_create_by_hand(project=project, task_ids=_task_ids(other), experts=[expert], by=None,
                                   now=timezone.now())

    assert not Assignment.objects.exists()


def test_priority_tasks_are_drawn_first_and_at_random_among_equals():
    project = make_project_with_tasks(n_questions=10)
    ids = _task_ids(project)
    urgent = ids[2:5]
    tasks_set_priority(project=project, task_ids=urgent, priority=5, by=None)
    experts = _experts(project, 6)
    now = timezone.now()

    first_three = [assignment_claim_next(project=project, expert=e, now=now, rng=random.Random(n)).task_id
                   for n, e in enumerate(experts[:3])]

    assert set(first_three) <= set(urgent)


def test_every_task_of_the_top_priority_has_a_chance():
    project = make_project_with_tasks(n_questions=6)
    ids = _task_ids(project)
    tasks_set_priority(project=project, task_ids=ids[:3], priority=2, by=None)
    # Evenly spaced on the ring, so each has a third of the draws (the ring gives a task the gap before it).
    for n, task_id in enumerate(ids[:3]):
        Task.objects.filter(pk=task_id).update(shuffle_key=n * (RING_SIZE // 3))
    seen = set()
    for seed in range(60):
        (expert,) = _experts(project, 1)
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now(), rng=random.Random(seed))
        seen.add(lease.task_id)
        Assignment.objects.filter(pk=lease.pk).delete()
        Task.objects.filter(pk=lease.task_id).update(live_count=0, status="open")

    assert seen == set(ids[:3])


def test_a_priority_out_of_range_is_refused():
    project = make_project_with_tasks(n_questions=1)

    with pytest.raises(DomainError) as refused:
        tasks_set_priority(project=project, task_ids=_task_ids(project), priority=101, by=None)

    assert refused.value.code == "priority_range"
    assert set(Task.objects.values_list("priority", flat=True)) == {0}


def test_hand_over_moves_open_leases_with_their_drafts_to_eligible_experts():
    project = make_project_with_tasks(n_questions=3)
    leaving, first, second = _experts(project, 3, max_concurrent_leases=3)
    now = timezone.now()
    leases = assignments_create_by_hand(project=project, task_ids=_task_ids(project), experts=[leaving], by=None,
                                        now=now).assignments
    Draft.objects.create(assignment=leases[0], labels={"q0:1": 1}, notes={"q0:1": "温暖"})

    result = leases_hand_over(project=project, expert=leaving, to=[first, second], by=None, now=now)

    assert len(result.moved) == 3 and result.returned == []
    assert {a.expert_id for a in result.moved} == {first.pk, second.pk}
    moved_draft = Draft.objects.get(assignment__task_id=leases[0].task_id, assignment__status="leased")
    assert (moved_draft.labels, moved_draft.notes) == ({"q0:1": 1}, {"q0:1": "温暖"})
    assert set(Assignment.objects.filter(expert=leaving).values_list("status", flat=True)) == {"released"}
    assert set(Task.objects.values_list("live_count", flat=True)) == {1}


def test_a_lease_no_named_expert_may_take_returns_to_the_pool():
    project = make_project_with_tasks(n_questions=1)
    leaving, paused = _experts(project, 2)
    now = timezone.now()
    assignments_create_by_hand(project=project, task_ids=_task_ids(project), experts=[leaving], by=None, now=now)
    ExpertProfile.objects.filter(user=paused).update(status="paused")

    result = leases_hand_over(project=project, expert=leaving, to=[paused], by=None, now=now)

    assert result.moved == [] and len(result.returned) == 1
    assert Task.objects.get().live_count == 0
    assert not Assignment.objects.filter(expert=paused).exists()


def _race(targets):
    barrier = threading.Barrier(len(targets))
    errors: list[Exception] = []

    def run(target):
        try:
            barrier.wait(timeout=10)
            target()
        except DomainError:
            pass  # a refusal (task full) is an allowed outcome of the race
        except Exception as exc:  # collected and asserted on in the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return errors


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_assigning_by_hand_racing_random_claims_never_over_assigns():
    assert connection.vendor == "postgresql"
    project = make_project_with_tasks(n_questions=2, overlap=2)
    ids = _task_ids(project)
    named = _experts(project, 2, max_concurrent_leases=5)
    pullers = _experts(project, 6)
    now = timezone.now()

    def by_hand():
        assignments_create_by_hand(project=project, task_ids=ids, experts=named, by=None, now=now)

    def pull(expert):
        return lambda: assignment_claim_next(project=project, expert=expert, now=now)

    errors = _race([by_hand, *[pull(e) for e in pullers]])

    assert errors == []
    per_task = dict(Assignment.objects.filter(status__in=["leased", "submitted"]).values("task")
                    .annotate(n=Count("id")).values_list("task", "n"))
    assert per_task == {ids[0]: 2, ids[1]: 2}
    assert not Assignment.objects.values("task", "expert").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert set(Task.objects.values_list("live_count", "status")) == {(2, "full")}


def test_a_pm_of_another_project_gets_404_from_the_api_and_nothing_changes(api):
    project = make_project_with_tasks(n_questions=1)
    (expert,) = _experts(project, 1)
    stranger = PMFactory()
    make_project_with_tasks(n_questions=1, pm=stranger)
    api.force_authenticate(stranger)

    answers = [
        api.post(f"/api/v1/projects/{project.pk}/assign/", {"tasks": _task_ids(project), "experts": [expert.username]},
                 format="json"),
        api.post(f"/api/v1/projects/{project.pk}/priority/", {"tasks": _task_ids(project), "priority": 3},
                 format="json"),
        api.post(f"/api/v1/projects/{project.pk}/hand-over/", {"expert": expert.username, "to": []}, format="json"),
    ]

    assert [a.status_code for a in answers] == [404, 404, 404]
    assert not Assignment.objects.exists()
    assert set(Task.objects.values_list("priority", flat=True)) == {0}


def test_the_api_assigns_sets_priority_and_hands_over(api):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=2, pm=pm)
    leaving, other = _experts(project, 2, max_concurrent_leases=3)
    ids = _task_ids(project)
    api.force_authenticate(pm)

    assigned = api.post(f"/api/v1/projects/{project.pk}/assign/", {"tasks": ids, "experts": [leaving.username]},
                        format="json")
    priority = api.post(f"/api/v1/projects/{project.pk}/priority/", {"tasks": ids[:1], "priority": 7},
                        format="json")
    moved = api.post(f"/api/v1/projects/{project.pk}/hand-over/", {"expert": leaving.username,
                                                                   "to": [other.username]}, format="json")

    assert assigned.status_code == 201 and len(assigned.json()["assignments"]) == 2
    assert priority.json() == {"changed": 1, "priority": 7}
    assert moved.json()["moved"] == 2 and moved.json()["returned"] == 0
    assert Task.objects.get(pk=ids[0]).priority == 7


def test_the_api_refuses_an_ineligible_expert_with_a_translated_code(api):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    (expert,) = _experts(project, 1)
    ExpertProfile.objects.filter(user=expert).update(status="paused")
    api.force_authenticate(pm)

    answer = api.post(f"/api/v1/projects/{project.pk}/assign/", {"tasks": _task_ids(project),
                                                                 "experts": [expert.username]},
                      format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert answer.status_code == 409
    assert answer.json()["code"] == "assign_paused"
    assert not Assignment.objects.exists()
