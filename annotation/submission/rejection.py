"""Rejecting a submission: its labels stop counting and its slot goes to another expert;
and undoing that when an appeal against the rejection is accepted.

Payments calls these inside its own transaction (the earning's reversal, the appeal's
correction), so the dataset and the pay change together or not at all.
"""
import logging
from datetime import datetime

from django.db import transaction
from django.urls import reverse
from django.utils import translation

from annotation.lock_objects import assignment_lock, task_lock
from annotation.models import Assignment, Task
from annotation.models.work import LIVE_ASSIGNMENT_STATUSES
from annotation.quality.peer_tally import peer_tally_refresh
from annotation.submission.consensus import consensus_compute, tie_slot_add
from core.after_commit import task_send_on_commit
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError
from experts.models import User
from experts.notifications import notification_send

logger = logging.getLogger(__name__)
REASON_TEXT_MAX = 500


def submission_reject_labels(*, assignment: Assignment, reason_code: str, text: str, by: User | None,
                             now: datetime) -> bool:
    """Mark a submitted work assignment rejected and take its labels out of the consensus.

    In the caller's transaction (or its own): locks the task, then the assignment (the
    annotation lock order), marks the assignment rejected with the reason, frees its slot
    (the task reopens; the rejected expert can never lease it again, the one-per-expert
    constraint holds their row), recomputes the task's consensus from the labels that
    still count, and asks for a report recompute on commit. The labels stay stored.
    Returns False, changing nothing, when the assignment is already rejected.
    """
    if reason_code not in Assignment.RejectReason.values:
        raise DomainError(str(ErrorCode.REJECT_REASON_UNKNOWN.label), code=ErrorCode.REJECT_REASON_UNKNOWN,
                          errors=[{"field": "reason_code", "message": str(ErrorCode.REJECT_REASON_UNKNOWN.label)}])
    with transaction.atomic():
        return _reject(assignment=assignment, reason_code=reason_code, text=text, by=by, now=now)


def _rejection_notify(*, assignment: Assignment, task: Task, now: datetime) -> None:
    """Tell the expert: the project, the question, the reason (its label, shown in their language),
    the PM's words; the link is their history, where the rejection is listed."""
    question, project = (Task.objects.filter(pk=task.pk)
                         .values_list("response__question__external_id", "project__name").get())
    # Stored in English (the label's msgid): notifications translate `reason_label` when shown.
    with translation.override("en"):
        reason_label = str(Assignment.RejectReason(assignment.rejected_reason).label)
    notification_send(users=[assignment.expert], kind="submission_rejected", now=now, link=reverse("my_history"),
                      params={"project": project, "question": question, "reason_label": reason_label,
                              "text": assignment.rejected_text or "—"})


def _reject(*, assignment: Assignment, reason_code: str, text: str, by: User | None, now: datetime) -> bool:
    task = task_lock(assignment.task_id)
    assignment = assignment_lock(assignment.pk)
    if assignment.status == Assignment.Status.REJECTED:
        return False
    if assignment.status != Assignment.Status.SUBMITTED or assignment.kind != Assignment.Kind.WORK:
        raise Conflict("Only submitted work can be rejected.", code="not_payable")
    assignment.status = Assignment.Status.REJECTED
    assignment.rejected_at = now
    assignment.rejected_reason = reason_code
    assignment.rejected_text = (text or "").strip()[:REASON_TEXT_MAX]
    assignment.rejected_by = by
    assignment.save(update_fields=["status", "rejected_at", "rejected_reason", "rejected_text", "rejected_by"])
    task.submitted_count -= 1
    task.live_count -= 1
    task.status = Task.Status.OPEN
    task.completed_at = None
    task.save(update_fields=["submitted_count", "live_count", "status", "completed_at"])
    if not task.is_golden:
        consensus_compute(task=task, now=now)
        peer_tally_refresh(task_id=task.pk)
        task_send_on_commit("annotation.agreement_report_request", project_id=task.project_id)
    _rejection_notify(assignment=assignment, task=task, now=now)
    logger.info("submission rejected", extra={"assignment_id": assignment.pk, "task_id": task.pk,
                                              "reason": reason_code})
    return True


def submission_restore_labels(*, assignment_id: int, now: datetime) -> bool:
    """Undo a rejection: the assignment is submitted again and its labels count in the consensus.

    In the caller's transaction (payments' appeal decision), under the annotation lock order
    (task, then assignment). The rejection fields are cleared on the assignment (the schema
    ties them to the `rejected` status); the appeal row keeps them on record.

    Where the labels go back in: when the task has a free slot (the re-opened one, still
    unclaimed), the assignment takes it again, so the task does not grow and nobody new is
    drawn for it. When every slot is live (another expert already took the re-opened one,
    leased or submitted), the task keeps that expert and gains one slot: its panel has one
    more counted member (the restored one), and its overlap says so. Returns False,
    changing nothing, when the assignment is not rejected.
    """
    task_id = Assignment.objects.filter(pk=assignment_id).values_list("task_id", flat=True).first()
    if task_id is None:
        return False
    with transaction.atomic():
        task = task_lock(task_id)
        assignment = assignment_lock(assignment_id)
        if assignment.status != Assignment.Status.REJECTED:
            return False
        slot = _slot_for_restore(task=task, preferred=assignment.slot)
        if slot is None:
            task.overlap += 1
            slot = task.overlap
            # The overlap first: the slot guard compares the slot with the task's overlap.
            task.save(update_fields=["overlap"])
        assignment.status = Assignment.Status.SUBMITTED
        assignment.slot = slot
        assignment.rejected_at = None
        assignment.rejected_reason = ""
        assignment.rejected_text = ""
        assignment.rejected_by = None
        assignment.save(update_fields=["status", "slot", "rejected_at", "rejected_reason", "rejected_text",
                                       "rejected_by"])
        task.live_count += 1
        task.submitted_count += 1
        complete = False
        if task.status != Task.Status.SUPERSEDED:
            complete = task.submitted_count >= task.overlap
            if complete:
                task.status = Task.Status.COMPLETE
                task.completed_at = now
            elif task.live_count >= task.overlap:
                task.status = Task.Status.FULL
        task.save(update_fields=["live_count", "submitted_count", "status", "completed_at"])
        if not task.is_golden:
            records = consensus_compute(task=task, now=now)
            peer_tally_refresh(task_id=task.pk)
            if complete:
                tie_slot_add(task=task, records=records)
            task_send_on_commit("annotation.agreement_report_request", project_id=task.project_id)
    logger.info("submission restored", extra={"assignment_id": assignment_id, "task_id": task_id, "slot": slot})
    return True


def _slot_for_restore(*, task: Task, preferred: int) -> int | None:
    """A free slot of the locked task, the assignment's own first; None when all are live."""
    if task.live_count >= task.overlap:
        return None
    taken = set(Assignment.objects.filter(task=task, status__in=LIVE_ASSIGNMENT_STATUSES)
                .values_list("slot", flat=True))
    if preferred not in taken and preferred <= task.overlap:
        return preferred
    return next((n for n in range(1, task.overlap + 1) if n not in taken), None)
