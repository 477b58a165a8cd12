"""The PM's decisions on flagged submissions: accept, return to the expert with a comment, reject.

Every action takes the project the PM reached through `project_get_for_user(..., manage=True)`
and finds the submission among that project's flags, so another project's ids are NotFound.
Each decides all open flags of one submission at once; a second decision on the same
submission changes nothing and says so (`review_done`).
"""
import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.urls import reverse

from annotation.audit.services import audit_record
from annotation.lock_objects import assignment_lock, task_lock
from annotation.models import Assignment, AuditAction, Draft, Label, Project, ReviewFlag, SubmissionReturn, Task
from annotation.projects.rules import project_check_writable
from annotation.quality.golden_tally import golden_tally_rebuild
from annotation.quality.peer_tally import peer_tally_refresh
from annotation.review.rejecting import review_rejecter
from annotation.selectors import rubric_items_for_task
from annotation.submission.consensus import consensus_compute, tie_slot_add
from core.after_commit import task_send_on_commit
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, NotFound
from experts.models import User
from experts.notifications import notification_send

logger = logging.getLogger(__name__)
COMMENT_MAX = 1000


def flagged_assignment(project: Project, assignment_id) -> Assignment:
    """The flagged submission of `project`, or NotFound (also another project's)."""
    try:
        pk = int(assignment_id)
    except (TypeError, ValueError):
        raise NotFound("No such flagged submission.") from None
    assignment = (Assignment.objects.select_related("task__project", "task__response__question")
                  .filter(pk=pk, review_flags__project=project).distinct().first())
    if assignment is None:
        raise NotFound("No such flagged submission.")
    return assignment


def _open_flags(assignment: Assignment):
    return ReviewFlag.objects.filter(assignment=assignment, status=ReviewFlag.Status.OPEN)


def _close(assignment: Assignment, *, status: str, by: User, now: datetime) -> int:
    return _open_flags(assignment).update(status=status, resolved_at=now, resolved_by=by)


def _require_open(assignment: Assignment) -> None:
    if not _open_flags(assignment).exists():
        raise Conflict(str(ErrorCode.REVIEW_DONE.label), code=ErrorCode.REVIEW_DONE)


def review_accept(*, actor: User, project: Project, assignment_id, now: datetime) -> int:
    """The PM found nothing wrong: the submission's open flags close; returns how many."""
    assignment = flagged_assignment(project, assignment_id)
    with transaction.atomic():
        task_lock(assignment.task_id)
        assignment_lock(assignment.pk)
        _require_open(assignment)
        closed = _close(assignment, status=ReviewFlag.Status.ACCEPTED, by=actor, now=now)
        audit_record(actor=actor, action=AuditAction.REVIEW_ACCEPT, project_id=project.pk, objects=[assignment],
                     now=now, details={"task_id": assignment.task_id, "flags": closed})
    logger.info("review accepted", extra={"assignment_id": assignment.pk, "flags": closed})
    return closed


def _clean_comment(comment) -> str:
    text = str(comment or "").strip()
    if not text:
        message = str(ErrorCode.REVIEW_COMMENT_REQUIRED.label)
        raise DomainError(message, code=ErrorCode.REVIEW_COMMENT_REQUIRED,
                          errors=[{"field": "comment", "code": ErrorCode.REVIEW_COMMENT_REQUIRED, "message": message}])
    return text[:COMMENT_MAX]


def submission_return(*, actor: User, project: Project, assignment_id, comment, now: datetime) -> SubmissionReturn:
    """Send a flagged submission back to its expert to fix, once.

    In one transaction (task, then assignment: the annotation lock order): the submitted labels
    and notes are kept on the return and become the expert's draft; the labels leave the
    consensus; the assignment is a lease again, for a full timeout from `now`, in the same slot.
    The expert is told with the PM's comment. When they submit again, the task's consensus is
    written again as for any submission and the earning already posted stands (it is keyed by
    the assignment, so it is never paid twice). When the lease runs out unsubmitted, the first
    submission is put back (`submission_returns_lapse`).
    """
    text = _clean_comment(comment)
    assignment = flagged_assignment(project, assignment_id)
    # A closed project is read-only: nobody could fix the task there.
    project_check_writable(project)
    with transaction.atomic():
        task = task_lock(assignment.task_id)
        locked = assignment_lock(assignment.pk)
        _require_open(locked)
        if SubmissionReturn.objects.filter(assignment=locked).exists():
            raise Conflict(str(ErrorCode.RETURN_ONCE.label), code=ErrorCode.RETURN_ONCE)
        if locked.status != Assignment.Status.SUBMITTED or locked.submitted_at is None:
            raise Conflict(str(ErrorCode.RETURN_NOT_SUBMITTED.label), code=ErrorCode.RETURN_NOT_SUBMITTED)
        rows = list(Label.objects.filter(assignment=locked).values_list("rubric_item__item_key", "value", "note"))
        labels = {key: value for key, value, _ in rows}
        notes = {key: note for key, _, note in rows if note}
        returned = SubmissionReturn.objects.create(
            assignment=locked, comment=text, returned_by=actor, returned_at=now,
            original_submitted_at=locked.submitted_at, original_labels=labels, original_notes=notes)
        Draft.objects.update_or_create(assignment=locked, defaults={"labels": labels, "notes": notes})
        Label.objects.filter(assignment=locked).delete()
        locked.status = Assignment.Status.LEASED
        locked.submitted_at = None
        locked.leased_at = now
        locked.expires_at = now + timedelta(seconds=task.project.lease_timeout_s)
        locked.save(update_fields=["status", "submitted_at", "leased_at", "expires_at"])
        # The slot stays this expert's: live_count does not change, the task is no longer complete.
        task.submitted_count -= 1
        task.status = Task.Status.FULL if task.live_count >= task.overlap else Task.Status.OPEN
        task.completed_at = None
        task.save(update_fields=["submitted_count", "status", "completed_at"])
        if task.is_golden:
            # A control task's labels left: its golden evidence leaves the expert's tally too.
            golden_tally_rebuild(project_id=task.project_id, expert_ids=[locked.expert_id])
        else:
            consensus_compute(task=task, now=now)
            peer_tally_refresh(task_id=task.pk, labels_removed=True)
            task_send_on_commit("annotation.agreement_report_request", project_id=task.project_id)
        closed = _close(locked, status=ReviewFlag.Status.RETURNED, by=actor, now=now)
        audit_record(actor=actor, action=AuditAction.REVIEW_RETURN, project_id=project.pk, objects=[locked],
                     now=now, details={"task_id": locked.task_id, "flags": closed, "comment": text})
        notification_send(users=[locked.expert], kind="submission_returned", now=now,
                          link=reverse("annotate", args=[locked.pk]),
                          params={"project": project.name, "question": assignment.task.response.question.external_id,
                                  "text": text})
    logger.info("submission returned", extra={"assignment_id": assignment.pk, "task_id": assignment.task_id})
    return returned


def review_reject(*, actor: User, project: Project, assignment_id, reason_code: str, reason, now: datetime) -> int:
    """Reject a flagged submission with a reason: payments' rejection (its labels stop counting,
    the earning is reversed, the expert is told), and its open flags close, together or not at all.
    Returns how many flags closed."""
    rejecter = review_rejecter()
    if rejecter is None:
        raise Conflict("Rejections are not available here.", code=ErrorCode.CONFLICT)
    assignment = flagged_assignment(project, assignment_id)
    with transaction.atomic():
        # The payments service locks task and assignment itself, in the same order, inside this
        # transaction; the flags are written after it, so nothing here holds a lock it takes later.
        _require_open(assignment)
        rejecter(actor, assignment.pk, reason_code, str(reason or ""), now)
        closed = _close(assignment, status=ReviewFlag.Status.REJECTED, by=actor, now=now)
    logger.info("review rejected", extra={"assignment_id": assignment.pk, "flags": closed})
    return closed


def submission_returns_lapse(*, now: datetime) -> int:
    """Put back the first submission of each returned task whose lease ran out unsubmitted.

    The labels and notes kept on the return are written again, the assignment is submitted
    with its first submission time, and the task's consensus is written again; the draft
    the expert left goes. Returns how many were put back.
    """
    due = (SubmissionReturn.objects.filter(resubmitted_at__isnull=True, lapsed_at__isnull=True,
                                           assignment__status=Assignment.Status.LEASED,
                                           assignment__expires_at__lte=now)
           .order_by("assignment__task_id").values_list("pk", "assignment_id", "assignment__task_id"))
    restored = 0
    for return_id, assignment_id, task_id in list(due[:500]):
        with transaction.atomic():
            task = task_lock(task_id)
            assignment = assignment_lock(assignment_id)
            returned = SubmissionReturn.objects.get(pk=return_id)
            if (returned.resubmitted_at is not None or returned.lapsed_at is not None
                    or assignment.status != Assignment.Status.LEASED or assignment.expires_at > now):
                continue
            items = {i.item_key: i for i in rubric_items_for_task(task)}
            Label.objects.bulk_create(
                Label(assignment=assignment, task=task, rubric_item=items[key], value=value,
                      note=returned.original_notes.get(key, ""))
                for key, value in returned.original_labels.items() if key in items)
            assignment.status = Assignment.Status.SUBMITTED
            assignment.submitted_at = returned.original_submitted_at
            assignment.save(update_fields=["status", "submitted_at"])
            Draft.objects.filter(assignment=assignment).delete()
            returned.lapsed_at = now
            returned.save(update_fields=["lapsed_at"])
            task.submitted_count += 1
            complete = task.submitted_count >= task.overlap
            if complete and task.status != Task.Status.SUPERSEDED:
                task.status = Task.Status.COMPLETE
                task.completed_at = now
            task.save(update_fields=["submitted_count", "status", "completed_at"])
            if task.is_golden:
                golden_tally_rebuild(project_id=task.project_id, expert_ids=[assignment.expert_id])
            else:
                records = consensus_compute(task=task, now=now)
                peer_tally_refresh(task_id=task.pk)
                if complete:
                    tie_slot_add(task=task, records=records)
                task_send_on_commit("annotation.agreement_report_request", project_id=task.project_id)
            restored += 1
    if restored:
        logger.info("returned submissions put back", extra={"count": restored})
    return restored
