"""Rejecting a submission takes its labels out of the dataset and gives the slot to another expert."""
import json
import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from annotation.agreement.report import material_load
from annotation.agreement.selectors import quality_units_page
from annotation.assignment.services import assignment_claim_next
from annotation.exchange.export import ExportFilters
from annotation.exchange.export_formats import dataset_export
from annotation.models import Assignment, ItemConsensus, Label, Task
from annotation.selectors import rubric_items_for_task
from annotation.submission import rejection
from annotation.submission.rejection import submission_reject_labels
from annotation.submission.services import labels_submit
from core.errors import Conflict, DomainError
from payments.ledger import ledger_post_earning
from payments.models import LedgerEntry
from payments.services import submission_reject
from rubrics.models import RubricVersion
from tests.factories import PMFactory
from tests.payments.factories import make_expert, make_paid_project

T0 = timezone.now()


def _submit(expert, project, value, now=None):
    lease = assignment_claim_next(project=project, expert=expert, now=now or timezone.now())
    assert lease is not None
    labels = {i.item_key: value for i in rubric_items_for_task(lease.task)}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=now or timezone.now())
    return lease


@pytest.fixture
def sent(monkeypatch):
    calls = []
    monkeypatch.setattr(rejection, "task_send_on_commit", lambda name, **kw: calls.append((name, kw)))
    return calls


@pytest.mark.django_db
def test_a_spammer_rejected_mid_project_leaves_the_consensus_and_another_expert_fills_the_slot(sent):
    pm = PMFactory()
    honest = [make_expert() for _ in range(3)]
    spammer = make_expert()
    project = make_paid_project(experts=[*honest, spammer, pm], n_questions=1)
    _submit(honest[0], project, 1)
    spam = _submit(spammer, project, 0)
    _submit(honest[1], project, 1)
    task = Task.objects.get()
    assert task.status == "complete"
    assert set(ItemConsensus.objects.values_list("zone", flat=True)) == {"split"}
    ledger_post_earning(assignment_id=spam.pk, now=T0)

    reversal = submission_reject(actor=pm, assignment_id=spam.pk, reason="all misses in 3 s",
                                 reason_code="spam", now=T0)

    spam.refresh_from_db()
    task.refresh_from_db()
    assert (spam.status, spam.rejected_reason, spam.rejected_text, spam.rejected_by) == (
        "rejected", "spam", "all misses in 3 s", pm)
    assert reversal.amount < 0
    assert (task.status, task.submitted_count, task.live_count) == ("open", 2, 2)
    # The labels stay stored, but nothing that counts reads them.
    assert Label.objects.filter(assignment=spam).count() == 2
    assert Label.objects.counted().filter(assignment=spam).count() == 0
    assert {(c.hit_votes, c.total_votes, c.zone) for c in ItemConsensus.objects.all()} == {(2, 2, "unanimous")}
    assert ("annotation.agreement_report_request", {"project_id": project.pk}) in sent
    # The rejected expert never gets the task back; a new expert takes the freed slot.
    assert assignment_claim_next(project=project, expert=spammer, now=timezone.now()) is None
    replacement = _submit(honest[2], project, 1)
    assert replacement.slot == spam.slot
    task.refresh_from_db()
    assert (task.status, task.submitted_count) == ("complete", 3)
    assert {(c.hit_votes, c.total_votes, c.zone) for c in ItemConsensus.objects.all()} == {(3, 3, "unanimous")}
    units = material_load(project=project, version=RubricVersion.objects.get())
    assert units.labels.min() == 1  # the report never sees the spam misses
    _, rows = quality_units_page(project, run=None, filters={})
    assert all(value == 1 for row in rows for _, value in row.labels)


@pytest.mark.django_db
def test_rejecting_twice_changes_nothing(sent):
    pm = PMFactory()
    experts = [make_expert() for _ in range(3)]
    project = make_paid_project(experts=[*experts, pm], n_questions=1)
    leases = [_submit(e, project, 1) for e in experts]
    submission_reject(actor=pm, assignment_id=leases[0].pk, reason="copy", reason_code="copy_paste", now=T0)
    before = (Task.objects.values_list("status", "submitted_count", "live_count").get(),
              list(ItemConsensus.objects.values_list("hit_votes", "total_votes", "zone", "computed_at")))

    with pytest.raises(Conflict, match="already"):
        submission_reject(actor=pm, assignment_id=leases[0].pk, reason="again", reason_code="spam", now=T0)
    assert submission_reject_labels(assignment=leases[0], reason_code="spam", text="again", by=pm,
                                    now=T0 + timedelta(hours=1)) is False

    after = (Task.objects.values_list("status", "submitted_count", "live_count").get(),
             list(ItemConsensus.objects.values_list("hit_votes", "total_votes", "zone", "computed_at")))
    assert after == before
    leases[0].refresh_from_db()
    assert (leases[0].rejected_reason, leases[0].rejected_text) == ("copy_paste", "copy")
    assert LedgerEntry.objects.filter(kind="reversal").count() == 1


@pytest.mark.django_db
def test_an_unknown_reason_writes_nothing():
    pm = PMFactory()
    expert = make_expert()
    project = make_paid_project(experts=[expert, pm], n_questions=1)
    lease = _submit(expert, project, 1)

    with pytest.raises(DomainError) as err:
        submission_reject(actor=pm, assignment_id=lease.pk, reason="bad", reason_code="lazy", now=T0)

    assert err.value.code == "reject_reason_unknown"
    lease.refresh_from_db()
    assert lease.status == "submitted"
    assert not LedgerEntry.objects.filter(kind="reversal").exists()


@pytest.mark.django_db
def test_a_rejected_expert_cannot_submit_the_task_again():
    pm = PMFactory()
    expert = make_expert()
    project = make_paid_project(experts=[expert, pm], n_questions=1)
    lease = _submit(expert, project, 1)
    submission_reject(actor=pm, assignment_id=lease.pk, reason="spam", reason_code="spam", now=T0)
    labels = {i.item_key: 1 for i in rubric_items_for_task(lease.task)}

    with pytest.raises(Conflict) as err:
        labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())

    assert err.value.code == "submission_rejected"
    assert Task.objects.get().submitted_count == 0


@pytest.mark.django_db
def test_the_history_page_tells_the_expert_that_and_why(client):
    pm = PMFactory()
    expert = make_expert()
    expert.set_password("pw")
    expert.save()
    project = make_paid_project(experts=[expert, pm], n_questions=1)
    lease = _submit(expert, project, 1)
    submission_reject(actor=pm, assignment_id=lease.pk, reason="pasted the same text everywhere",
                      reason_code="copy_paste", now=T0)
    client.force_login(expert)

    page = client.get("/me/history/", HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert "Rejected" in page
    assert "Copy-paste" in page
    assert "pasted the same text everywhere" in page


@pytest.mark.django_db
def test_the_costs_page_rejects_with_the_chosen_reason_after_confirming(client):
    pm = PMFactory()
    expert = make_expert()
    project = make_paid_project(experts=[expert, pm], n_questions=1)
    lease = _submit(expert, project, 1)
    ledger_post_earning(assignment_id=lease.pk, now=T0)
    client.force_login(pm)
    url = f"/payments/costs/{project.pk}/assignments/{lease.pk}/reject/"

    assert 'name="reason_code"' in client.get(f"/payments/costs/{project.pk}/").content.decode()
    asked = client.post(url, {"reason": "rules ignored", "reason_code": "guidelines"})
    lease.refresh_from_db()
    assert asked.status_code == 200 and lease.status == "submitted"
    client.post(url, {"reason": "rules ignored", "reason_code": "guidelines", "confirmed": "yes"})

    lease.refresh_from_db()
    assert (lease.status, lease.rejected_reason) == ("rejected", "guidelines")


def _race_submit(expert, assignment_id, labels, barrier, errors):
    try:
        barrier.wait()
        labels_submit(expert=expert, assignment_id=assignment_id, labels=labels, now=timezone.now())
    except Exception as exc:  # asserted in the main thread
        errors.append(exc)
    finally:
        connections.close_all()


def _race_reject(pm, assignment_id, barrier, errors):
    try:
        barrier.wait()
        submission_reject(actor=pm, assignment_id=assignment_id, reason="spam", reason_code="spam",
                          now=timezone.now())
    except Exception as exc:  # asserted in the main thread
        errors.append(exc)
    finally:
        connections.close_all()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_rejection_racing_a_new_submission_keeps_the_counters_exact():
    assert connection.vendor == "postgresql"
    for _ in range(4):
        pm = PMFactory()
        experts = [make_expert() for _ in range(4)]
        project = make_paid_project(experts=[*experts, pm], n_questions=1)
        first = _submit(experts[0], project, 0)
        _submit(experts[1], project, 1)
        third = assignment_claim_next(project=project, expert=experts[2], now=timezone.now())
        labels = {i.item_key: 1 for i in rubric_items_for_task(third.task)}
        errors: list[Exception] = []
        barrier = threading.Barrier(2)
        threads = [threading.Thread(target=_race_submit, args=(experts[2], third.pk, labels, barrier, errors)),
                   threading.Thread(target=_race_reject, args=(pm, first.pk, barrier, errors))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        assert errors == []
        task = Task.objects.get(pk=third.task_id)
        assert (task.live_count, task.submitted_count, task.status) == (2, 2, "open")
        assert Assignment.objects.filter(task=task, status="submitted").count() == 2
        # Whichever landed first, the consensus counts exactly the two labels that still count.
        assert {(c.hit_votes, c.total_votes) for c in ItemConsensus.objects.filter(task=task)} == {(2, 2)}
        last = _submit(experts[3], project, 1)
        task.refresh_from_db()
        assert (last.slot, task.status, task.submitted_count) == (first.slot, "complete", 3)


@pytest.mark.django_db
def test_rejected_labels_appear_only_in_the_audit_export(sent):
    pm = PMFactory()
    honest = [make_expert() for _ in range(2)]
    spammer = make_expert()
    project = make_paid_project(experts=[*honest, spammer, pm], n_questions=1)
    _submit(honest[0], project, 1)
    spam = _submit(spammer, project, 0)
    _submit(honest[1], project, 1)
    submission_reject(actor=pm, assignment_id=spam.pk, reason="copied the same marks everywhere",
                      reason_code="copy_paste", now=T0)
    pseudonym = spammer.expert_profile.pseudonym

    def export(fmt):
        chunks = dataset_export(project=project, filters=ExportFilters(completion="all"), fmt=fmt, snapshot_id="s")
        return [json.loads(line) for line in b"".join(chunks).decode().splitlines()]

    dataset = export("jsonl")
    audit = export("audit")

    assert dataset and all(label["expert"] != pseudonym for row in dataset for label in row["labels"])
    assert len(audit) == 2 and {row["expert"] for row in audit} == {pseudonym}
    assert {(row["label"], row["rejected_reason"], row["rejected_text"], row["rejected_by"]) for row in audit} == {
        (0, "copy_paste", "copied the same marks everywhere", pm.username)}
    assert all(row["rejected_at"] and row["submitted_at"] for row in audit)
    # Filters apply to the audit too: another model's rows leave it empty.
    other = dataset_export(project=project, filters=ExportFilters(model="no-such-model", completion="all"),
                           fmt="audit", snapshot_id="s")
    assert b"".join(other) == b""
