"""Batch operations: each one asked first with its counts, then done whole in one transaction, or not at all."""
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.assignment.manual import assignments_create_by_hand
from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, ItemConsensus, Task
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from annotation.workload import batch
from annotation.workload.batch import TaskFilter, batch_mark_golden, batch_raise_overlap
from core.errors import DomainError
from experts.models import ExpertProfile
from payments import services as payment_services
from payments.batch import submissions_reject_batch
from payments.ledger import ledger_post_earning
from payments.models import LedgerEntry
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


def _members(project, n, **profile):
    experts = [ExpertFactory() for _ in range(n)]
    for e in experts:
        project_add_member(project=project, user=e)
        if profile:
            ExpertProfile.objects.filter(user=e).update(**profile)
    return experts


def _submit(project, expert, now, value=1):
    lease = assignment_claim_next(project=project, expert=expert, now=now)
    labels = {i.item_key: value for i in rubric_items_for_task(lease.task)}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=now)
    ledger_post_earning(assignment_id=lease.pk, now=now)
    return lease


@pytest.fixture
def client(client):
    """The pages in English (the platform's default language is Chinese)."""
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = "en"
    return client


@pytest.fixture
def pm_project():
    pm = PMFactory()
    return pm, make_project_with_tasks(n_questions=5, pm=pm)


def test_marking_golden_asks_first_with_the_count_then_marks_the_filtered_tasks(client, pm_project):
    pm, project = pm_project
    client.force_login(pm)
    url = f"/projects/{project.pk}/batch/tasks/"

    asked = client.post(url, {"op": "golden"})
    done = client.post(url, {"op": "golden", "confirmed": "yes"}, follow=True)

    assert "5 tasks match the filter." in asked.content.decode()
    assert Task.objects.filter(is_golden=True).count() == 5
    assert "5 tasks changed" in done.content.decode()


def test_marking_golden_is_refused_for_tasks_with_regular_work_and_changes_nothing(pm_project):
    _pm, project = pm_project
    (expert,) = _members(project, 1)
    third = list(Task.objects.order_by("pk").values_list("pk", flat=True))[2]
    assignments_create_by_hand(project=project, task_ids=[third], experts=[expert], by=None, now=timezone.now())

    with pytest.raises(DomainError) as refused:
        batch_mark_golden(project=project, task_filter=TaskFilter(), by=None)

    assert refused.value.code == "batch_golden_has_work"
    assert not Task.objects.filter(is_golden=True).exists()


def test_raising_overlap_on_split_items_of_one_dimension_reopens_only_those_tasks():
    project = make_project_with_tasks(n_questions=3, items_per_question=2, overlap=3)
    experts = _members(project, 3)
    now = timezone.now()
    for n, e in enumerate(experts):
        for _ in range(3):
            _submit(project, e, now, value=1 if n < 2 else 0)
    split_task = Task.objects.order_by("pk").first()
    ItemConsensus.objects.exclude(task=split_task).update(zone="unanimous")
    dim = ItemConsensus.objects.filter(task=split_task, zone="split").first().rubric_item.dimension

    changed = batch_raise_overlap(project=project, task_filter=TaskFilter(split_dimension=dim.code), overlap=4,
                                  by=None)

    assert changed == 1
    split_task.refresh_from_db()
    assert (split_task.overlap, split_task.status) == (4, "open")
    assert set(Task.objects.exclude(pk=split_task.pk).values_list("overlap", "status")) == {(3, "complete")}


def test_pausing_five_experts_where_the_third_fails_pauses_none(pm_project, monkeypatch):
    _pm, project = pm_project
    experts = _members(project, 5)
    real = batch.expert_profile_lock
    calls = []

    def fail_on_the_third(user_id):
        calls.append(user_id)
        if len(calls) == 3:
            raise DomainError("refused")
        return real(user_id)

    monkeypatch.setattr(batch, "expert_profile_lock", fail_on_the_third)

    with pytest.raises(DomainError):
        batch.batch_experts_pause(project=project, user_ids=[e.pk for e in experts], pause=True, by=PMFactory(),
                                  now=timezone.now())

    assert len(calls) == 3
    assert not ExpertProfile.objects.filter(status="paused").exists()


def test_rejecting_five_submissions_where_the_third_fails_rejects_none():
    project = make_project_with_tasks(n_questions=5, items_per_question=2)
    (expert,) = _members(project, 1)
    pm = PMFactory()
    project_add_member(project=project, user=pm)
    now = timezone.now()
    leases = [_submit(project, expert, now + timedelta(minutes=n)) for n in range(5)]
    # The third is already rejected on its own: rejecting it again is refused.
    payment_services.submission_reject(actor=pm, assignment_id=leases[2].pk, reason="copy", now=now)
    entries = LedgerEntry.objects.count()

    with pytest.raises(DomainError):
        submissions_reject_batch(actor=pm, project=project, assignment_ids=[a.pk for a in leases], reason="spam",
                                 reason_code="spam", now=now)

    assert Assignment.objects.filter(status="rejected").count() == 1
    assert LedgerEntry.objects.count() == entries


def test_rejecting_every_submission_of_an_expert_with_one_reason(client):
    project = make_project_with_tasks(n_questions=3, items_per_question=2)
    (expert,) = _members(project, 1)
    pm = PMFactory()
    project_add_member(project=project, user=pm)
    for n in range(3):
        _submit(project, expert, timezone.now() + timedelta(minutes=n))
    client.force_login(pm)
    url = f"/payments/costs/{project.pk}/batch-reject/"
    form = {"expert": expert.pk, "reason_code": "spam", "reason": "随机点击"}

    asked = client.post(url, form)
    done = client.post(url, {**form, "confirmed": "yes"}, follow=True)

    assert "Reject 3 submissions?" in asked.content.decode()
    assert set(Assignment.objects.filter(expert=expert).values_list("status", "rejected_text")) == {
        ("rejected", "随机点击")}
    assert "3 submissions rejected" in done.content.decode()


def test_pausing_and_resuming_a_set_of_experts(client, pm_project):
    pm, project = pm_project
    first, second, third = _members(project, 3)
    client.force_login(pm)
    url = f"/projects/{project.pk}/batch/experts/"

    asked = client.post(url, {"op": "pause", "experts": [first.pk, second.pk]})
    client.post(url, {"op": "pause", "experts": f"{first.pk},{second.pk}", "confirmed": "yes"})
    paused = set(ExpertProfile.objects.filter(status="paused").values_list("user_id", flat=True))
    client.post(url, {"op": "resume", "experts": f"{first.pk}", "confirmed": "yes"})

    assert "Pause 2 experts?" in asked.content.decode()
    assert paused == {first.pk, second.pk}
    assert set(ExpertProfile.objects.filter(status="paused").values_list("user_id", flat=True)) == {second.pk}


def test_handing_over_a_paused_experts_leases_through_the_page(client, pm_project):
    pm, project = pm_project
    leaving, taker = _members(project, 2, max_concurrent_leases=3)
    now = timezone.now()
    ids = list(Task.objects.order_by("pk").values_list("pk", flat=True))[:2]
    assignments_create_by_hand(project=project, task_ids=ids, experts=[leaving], by=None, now=now)
    ExpertProfile.objects.filter(user=leaving).update(status="paused")
    client.force_login(pm)
    url = f"/projects/{project.pk}/batch/experts/"
    form = {"op": "handover", "from": leaving.pk, "experts": taker.pk}

    asked = client.post(url, form)
    client.post(url, {**form, "confirmed": "yes"})

    assert "2 open leases move" in asked.content.decode()
    assert set(Assignment.objects.filter(status="leased").values_list("expert_id", flat=True)) == {taker.pk}


def test_another_projects_pm_gets_404_and_nothing_changes(client, pm_project):
    _pm, project = pm_project
    (expert,) = _members(project, 1)
    client.force_login(PMFactory())

    answers = [
        client.get(f"/projects/{project.pk}/batch/"),
        client.post(f"/projects/{project.pk}/batch/tasks/", {"op": "golden", "confirmed": "yes"}),
        client.post(f"/projects/{project.pk}/batch/experts/", {"op": "pause", "experts": expert.pk,
                                                               "confirmed": "yes"}),
        client.post(f"/payments/costs/{project.pk}/batch-reject/", {"expert": expert.pk, "reason": "x",
                                                                     "confirmed": "yes"}),
    ]

    assert [a.status_code for a in answers] == [404, 404, 404, 404]
    assert not Task.objects.filter(is_golden=True).exists()
    assert not ExpertProfile.objects.filter(status="paused").exists()


def test_an_expert_of_another_project_is_not_found_in_a_batch(pm_project):
    _pm, project = pm_project
    other = make_project_with_tasks(n_questions=1)
    (stranger,) = _members(other, 1)

    with pytest.raises(DomainError):
        batch.batch_experts_pause(project=project, user_ids=[stranger.pk], pause=True, by=PMFactory(),
                                  now=timezone.now())

    assert not ExpertProfile.objects.filter(status="paused").exists()


def test_the_batch_page_renders_in_chinese_with_the_filter_count(client, pm_project):
    pm, project = pm_project
    client.force_login(pm)

    page = client.get(f"/projects/{project.pk}/batch/?status=open", HTTP_ACCEPT_LANGUAGE="zh-hans")
    fragment = client.get(f"/projects/{project.pk}/batch/", HTTP_HX_REQUEST="true")

    assert page.status_code == 200 and "批量操作" in page.content.decode()
    assert 'id="batch"' in fragment.content.decode() and "<html" not in fragment.content.decode()


def test_a_pm_assigns_one_urgent_task_by_hand_from_the_batch_page(client, pm_project):
    pm, project = pm_project
    (expert,) = _members(project, 1)
    urgent = list(Task.objects.order_by("pk").values_list("pk", flat=True))[3]
    client.force_login(pm)
    url = f"/projects/{project.pk}/batch/tasks/"
    form = {"op": "assign", "task": urgent, "experts": expert.pk}

    asked = client.post(url, form)
    done = client.post(url, {**form, "confirmed": "yes"}, follow=True)

    assert "1 lease is created" in asked.content.decode()
    assert "1 lease created" in done.content.decode()
    assert assignment_claim_next(project=project, expert=expert, now=timezone.now()).task_id == urgent


def test_assigning_by_hand_to_a_paused_expert_from_the_page_is_refused_with_the_reason(client, pm_project):
    pm, project = pm_project
    (expert,) = _members(project, 1)
    ExpertProfile.objects.filter(user=expert).update(status="paused")
    client.force_login(pm)

    done = client.post(f"/projects/{project.pk}/batch/tasks/", {"op": "assign", "experts": expert.pk,
                                                                 "confirmed": "yes"}, follow=True)

    assert f"{expert.username} is paused" in done.content.decode()
    assert not Assignment.objects.exists()
