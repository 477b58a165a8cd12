"""Rejecting the submissions of a filtered set of tasks with one reason: a preview (how many, whose, the
earnings reversed), then every rejection through the one rejection of a submission, whole or not at all,
applied once per confirmation, in the request or by a worker for a large set."""
import re
from decimal import Decimal

import pytest
from django.utils import timezone

from annotation.models import Assignment, AuditEntry, BatchJob, Task
from annotation.workload.batch import TaskFilter, batch_reject
from core.errors import DomainError
from experts.models import Notification
from payments.appeals import appeal_create_for_rejection, appeal_decide
from payments.models import LedgerEntry
from payments.reconciliation import ledger_reconcile
from payments.services import submission_reject
from tests.factories import PMFactory, make_project_with_tasks
from tests.payments.factories import make_expert, make_paid_project
from tests.payments.test_appeals import T0, _second_pm, _submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(client):
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = "en"
    return client


@pytest.fixture
def worked(settings):
    """Three tasks each submitted by the same three experts; the last task is then a golden one (a silent
    control): its three submissions are never part of a batch rejection."""
    settings.BATCH_SYNC_MAX_TASKS = 100
    pm = PMFactory()
    experts = [make_expert() for _ in range(3)]
    project = make_paid_project(experts=[*experts, pm], n_questions=3)
    for expert in experts:
        for _ in range(3):
            _submit(expert, project, 1)
    control = Task.objects.filter(project=project).order_by("pk").last()
    Task.objects.filter(pk=control.pk).update(is_golden=True)
    return project, pm, experts, control


def _url(project):
    return f"/projects/{project.pk}/batch/tasks/"


def _token(page) -> str:
    found = re.search(r'name="token" value="([0-9a-f]{32})"', page.content.decode())
    assert found, "the confirmation carries a token"
    return found.group(1)


def _regular(project):
    return Assignment.objects.filter(task__project=project, task__is_golden=False)


def _earned(assignments) -> Decimal:
    return sum(LedgerEntry.objects.filter(assignment__in=assignments, kind="earning").values_list("amount", flat=True),
               Decimal(0))


def test_the_preview_counts_the_submissions_names_their_experts_and_the_earnings_reversed(client, worked):
    project, pm, experts, _control = worked
    client.force_login(pm)
    one = experts[0]

    every = client.post(_url(project), {"op": "reject", "value": "copied replies", "reason_code": "spam"})
    theirs = client.post(_url(project), {"op": "reject", "value": "copied replies", "reason_code": "spam",
                                         "experts": str(one.pk)})

    page = every.content.decode()
    assert "Reject 6 submissions?" in page and "2 tasks match the filter." in page
    assert ", ".join(f"{e.username} (2)" for e in sorted(experts, key=lambda e: e.username)) in page
    amount = _earned(_regular(project))
    assert amount > 0 and f"Earnings reversed: {amount} " in page
    assert "“copied replies”" in page
    mine = theirs.content.decode()
    assert "Reject 2 submissions?" in mine and f"Submissions of: {one.username} (2)." in mine
    assert f"Earnings reversed: {_earned(_regular(project).filter(expert=one))} " in mine
    # Asking changes nothing.
    assert not Assignment.objects.filter(status="rejected").exists() and not BatchJob.objects.exists()


def test_confirming_rejects_the_set_once_even_when_confirmed_twice(client, worked):
    project, pm, experts, control = worked
    client.force_login(pm)
    token = _token(client.post(_url(project), {"op": "reject", "value": "copied replies", "reason_code": "spam"}))
    form = {"op": "reject", "value": "copied replies", "reason_code": "spam", "confirmed": "yes", "token": token}
    entries_before = LedgerEntry.objects.count()

    first = client.post(_url(project), form, follow=True)
    second = client.post(_url(project), form, follow=True)

    assert "Done: 6 submissions rejected." in first.content.decode()
    assert "already applied; nothing more was changed" in second.content.decode()
    rejected = _regular(project)
    assert set(rejected.values_list("status", "rejected_reason", "rejected_text")) == {
        ("rejected", "spam", "copied replies")}
    assert set(Assignment.objects.filter(task=control).values_list("status", flat=True)) == {"submitted"}
    # One reversal per rejection, each the negative of its earning; the ledger still balances.
    assert LedgerEntry.objects.count() == entries_before + 6
    assert _earned(rejected) + sum(LedgerEntry.objects.filter(kind="reversal").values_list("amount", flat=True)) == 0
    assert ledger_reconcile() == []
    assert set(Task.objects.filter(project=project, is_golden=False).values_list("status", "submitted_count")) == {
        ("open", 0)}
    assert Notification.objects.filter(kind="submission_rejected").count() == 6
    batch_entry = AuditEntry.objects.get(action="batch.reject")
    assert (batch_entry.actor_id, batch_entry.project_id, batch_entry.object_ids) == (
        pm.pk, project.pk, sorted(rejected.values_list("pk", flat=True)))
    assert AuditEntry.objects.filter(action="submission.reject").count() == 6
    assert (BatchJob.objects.get().op, BatchJob.objects.get().changed) == ("reject", 6)


def test_a_large_set_runs_as_a_job_and_one_refusal_in_it_rejects_none(client, worked, settings,
                                                                       django_capture_on_commit_callbacks):
    project, pm, experts, _control = worked
    settings.BATCH_SYNC_MAX_TASKS = 2
    # One submission was rejected before and restored on appeal: it may not be rejected again.
    restored = _regular(project).order_by("task_id", "pk").last()  # the last one the batch reaches
    submission_reject(actor=pm, assignment_id=restored.pk, reason="too fast", now=T0)
    appeal = appeal_create_for_rejection(expert=restored.expert, assignment_id=restored.pk, reason="no", now=T0)
    appeal_decide(actor=_second_pm(project), appeal_id=appeal.pk, outcome="accept", reason="fine", now=T0)
    before = (list(_regular(project).order_by("pk").values_list("pk", "status")), LedgerEntry.objects.count(),
              AuditEntry.objects.count())
    client.force_login(pm)
    asked = client.post(_url(project), {"op": "reject", "value": "copied replies", "reason_code": "spam"})
    assert "applied in the background" in asked.content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        confirmed = client.post(_url(project), {"op": "reject", "value": "copied replies", "reason_code": "spam",
                                                "confirmed": "yes", "token": _token(asked)})

    job = BatchJob.objects.get()
    assert confirmed.url == f"/projects/{project.pk}/batch/jobs/{job.pk}/"
    assert (job.op, job.status, job.total, job.error_code) == ("reject", "failed", 6, "restored_on_appeal")
    # The rejections made before the refused one were rolled back with it: no status, entry or log line moved.
    assert (list(_regular(project).order_by("pk").values_list("pk", "status")), LedgerEntry.objects.count(),
            AuditEntry.objects.count()) == before
    assert "Nothing was changed" in client.get(confirmed.url).content.decode()


def test_a_large_set_that_passes_is_rejected_by_the_worker_with_its_summary(client, worked, settings,
                                                                           django_capture_on_commit_callbacks):
    project, pm, experts, _control = worked
    settings.BATCH_SYNC_MAX_TASKS = 1
    client.force_login(pm)
    form = {"op": "reject", "value": "copied replies", "reason_code": "copy_paste", "experts": str(experts[1].pk)}
    token = _token(client.post(_url(project), form))

    with django_capture_on_commit_callbacks(execute=True):
        confirmed = client.post(_url(project), {**form, "confirmed": "yes", "token": token})

    job = BatchJob.objects.get()
    assert (job.status, job.total, job.changed) == ("done", 2, 2)
    assert set(_regular(project).filter(status="rejected").values_list("expert_id", "rejected_reason")) == {
        (experts[1].pk, "copy_paste")}
    assert _regular(project).filter(status="submitted").count() == 4
    assert "Done: 2 submissions rejected." in client.get(confirmed.url).content.decode()


def test_control_tasks_are_never_in_the_set_even_when_the_filter_asks_for_golden_ones(client, worked):
    project, pm, _experts, control = worked
    client.force_login(pm)

    refused = client.post(_url(project), {"op": "reject", "value": "x", "reason_code": "spam", "golden": "yes"},
                          follow=True)
    with pytest.raises(DomainError) as caught:
        batch_reject(project=project, task_filter=TaskFilter(task=str(control.pk)), reason_code="spam", reason="x",
                     by=pm, now=timezone.now())

    assert "No submission matches; nothing was rejected." in refused.content.decode()
    assert caught.value.code == "batch_reject_none"
    assert not Assignment.objects.filter(status="rejected").exists()


def test_another_projects_task_or_expert_is_refused_and_nothing_is_rejected(client, worked):
    project, pm, _experts, _control = worked
    other_pm = PMFactory()
    other = make_project_with_tasks(n_questions=1, pm=other_pm)
    stranger = make_expert()
    from annotation.services import project_add_member

    project_add_member(project=other, user=stranger)
    foreign_task = Task.objects.filter(project=other).first()
    client.force_login(pm)

    by_task = client.post(_url(project), {"op": "reject", "value": "x", "reason_code": "spam",
                                          "task": str(foreign_task.pk), "confirmed": "yes"}, follow=True)
    by_expert = client.post(_url(project), {"op": "reject", "value": "x", "reason_code": "spam",
                                            "experts": str(stranger.pk), "confirmed": "yes"})
    client.force_login(other_pm)
    not_theirs = client.post(_url(project), {"op": "reject", "value": "x", "reason_code": "spam",
                                             "confirmed": "yes"})

    assert "No submission matches; nothing was rejected." in by_task.content.decode()
    assert (by_expert.status_code, not_theirs.status_code) == (404, 404)
    assert not Assignment.objects.filter(status="rejected").exists()
    assert not BatchJob.objects.exists() and not AuditEntry.objects.filter(action__contains="reject").exists()
