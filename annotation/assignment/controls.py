"""The expert's own controls on a lease: keep working (extend), give back (release), skip with a reason.

Each takes the expert and an assignment id, so another expert's id is NotFound, and each
is safe to repeat: a second release or skip of the same lease finds it already ended and
changes nothing. A submitted task is final and can be neither released nor skipped.
"""
import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction

from annotation.assignment.selectors import assignment_state
from annotation.assignment.services import lease_end, lease_extend
from annotation.lock_objects import assignment_lock, task_lock
from annotation.models import Assignment, SubmissionReturn, TaskSkip
from annotation.models.skips import MAX_SKIP_TEXT
from annotation.selectors import assignment_get_for_expert
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError
from experts.models import User

logger = logging.getLogger(__name__)


def _require_not_submitted(assignment: Assignment) -> None:
    if assignment.status == Assignment.Status.SUBMITTED:
        raise Conflict("This task is already submitted; it can no longer be given back or skipped.",
                       code=ErrorCode.SUBMITTED_FINAL)


def _require_not_returned(assignment: Assignment) -> None:
    # A returned submission's lease is the expert's one chance to fix it; giving it back would
    # drop a paid submission, so it runs out instead and the first submission stands.
    if SubmissionReturn.objects.filter(assignment=assignment, resubmitted_at__isnull=True,
                                       lapsed_at__isnull=True).exists():
        raise Conflict(str(ErrorCode.RETURNED_TO_FIX.label), code=ErrorCode.RETURNED_TO_FIX)


def assignment_extend(*, expert: User, assignment_id, now: datetime) -> Assignment:
    """Keep working: the lease runs a full timeout from `now`. Only a live lease can be extended;
    an expired one keeps the late-submission rule (`assignment_revive`)."""
    assignment = assignment_get_for_expert(expert, assignment_id)
    state = assignment_state(assignment, now=now)
    if state == "submitted":
        raise Conflict("This task is already submitted.", code=ErrorCode.ALREADY_SUBMITTED)
    if state == "released":
        raise Conflict("This task was given back.", code=ErrorCode.LEASE_RELEASED)
    if state == "expired":
        raise Conflict("The lease has run out and cannot be extended.", code=ErrorCode.LEASE_EXPIRED)
    lease_extend(assignment=assignment, now=now)
    assignment.refresh_from_db(fields=["expires_at", "status"])
    return assignment


def assignment_release(*, expert: User, assignment_id) -> Assignment:
    """Give the task back: its slot returns to the pool at once and the task is not offered
    to this expert again. Releasing an already released lease changes nothing."""
    assignment = assignment_get_for_expert(expert, assignment_id)
    _require_not_submitted(assignment)
    _require_not_returned(assignment)
    if lease_end(assignment=assignment):
        logger.info("lease given back", extra={"assignment_id": assignment.pk})
    assignment.refresh_from_db(fields=["status"])
    _require_not_submitted(assignment)  # a submission that landed first stays final
    return assignment


def _clean_skip(reason, text) -> tuple[str, str]:
    reason = str(reason or "").strip()
    text = str(text or "").strip()
    if reason not in TaskSkip.Reason.values:
        raise DomainError(f"Unknown skip reason {reason!r}.", code=ErrorCode.SKIP_REASON_INVALID,
                          errors=[{"field": "reason", "code": ErrorCode.SKIP_REASON_INVALID,
                                   "message": "choose one of the reasons"}])
    if reason == TaskSkip.Reason.OTHER and not text:
        raise DomainError('A skip with reason "other" needs a few words of explanation.',
                          code=ErrorCode.SKIP_TEXT_REQUIRED,
                          errors=[{"field": "text", "code": ErrorCode.SKIP_TEXT_REQUIRED,
                                   "message": "required for the reason other"}])
    if len(text) > MAX_SKIP_TEXT:
        raise DomainError("The skip explanation is too long.", code=ErrorCode.SKIP_TEXT_TOO_LONG,
                          params={"max": MAX_SKIP_TEXT},
                          errors=[{"field": "text", "code": ErrorCode.TOO_LONG, "message": "too long"}])
    return reason, text


@dataclass(frozen=True)
class SkipResult:
    skip: TaskSkip
    created: bool  # False when this lease had already been skipped (a repeated request)


def assignment_skip(*, expert: User, assignment_id, reason, text="", now: datetime) -> SkipResult:
    """Skip the task with a reason the PM reads: records a TaskSkip and ends the lease
    (`lease_end`), both or neither. A repeated skip of the same lease returns the first one."""
    assignment = assignment_get_for_expert(expert, assignment_id)
    reason, text = _clean_skip(reason, text)
    existing = TaskSkip.objects.filter(assignment=assignment).first()
    if existing is not None:
        return SkipResult(skip=existing, created=False)
    _require_not_submitted(assignment)
    _require_not_returned(assignment)
    try:
        with transaction.atomic():
            task_lock(assignment.task_id)
            status = assignment_lock(assignment.pk).status
            existing = TaskSkip.objects.filter(assignment=assignment).first()
            if existing is not None:  # a concurrent request of the same skip got the lock first
                return SkipResult(skip=existing, created=False)
            if status == Assignment.Status.SUBMITTED:
                _require_not_submitted(Assignment(status=status))
            if status == Assignment.Status.RELEASED:
                raise Conflict("This task was given back already.", code=ErrorCode.LEASE_RELEASED)
            skip = TaskSkip.objects.create(assignment=assignment, project_id=assignment.task.project_id,
                                           task_id=assignment.task_id, expert=expert, reason=reason, text=text,
                                           created_at=now)
            lease_end(assignment=assignment)  # joins this transaction; the task row is already locked
    except IntegrityError:
        # A concurrent request of the same skip won the race: it is the one recorded.
        return SkipResult(skip=TaskSkip.objects.get(assignment=assignment), created=False)
    logger.info("task skipped", extra={"assignment_id": assignment.pk, "reason": reason})
    return SkipResult(skip=skip, created=True)
