"""Rejecting a set of submissions with one reason: every rejection with its reversal, or none.

Lives in payments because each rejection reverses an earning (`services.submission_reject`);
the annotation side (labels out of the consensus, the slot reopened) is the same call.
"""
import logging
from datetime import datetime

from django.db import transaction
from django.db.models import QuerySet

from annotation.models import Assignment, Project
from core.error_codes import ErrorCode
from core.errors import DomainError, NotFound
from experts.models import User
from payments import services

logger = logging.getLogger(__name__)

BATCH_MAX = 1000


def submissions_of_expert(project: Project, expert_id) -> QuerySet[Assignment]:
    """The expert's submitted (not yet rejected) work in `project`, in task order: what a batch rejects."""
    try:
        expert = int(expert_id)
    except (TypeError, ValueError):
        return Assignment.objects.none()
    return (Assignment.objects.filter(task__project=project, expert_id=expert, kind=Assignment.Kind.WORK,
                                      status=Assignment.Status.SUBMITTED).order_by("task_id", "pk"))


def submissions_reject_batch(*, actor: User, project: Project, assignment_ids: list[int], reason: str,
                             reason_code: str, now: datetime) -> int:
    """Reject each of `assignment_ids` (submissions in `project`) with one reason; returns how many.

    One transaction: the first refusal (not found, already rejected, not submitted work, no reason)
    undoes the rejections before it, so the set is rejected whole or not at all.
    """
    ids = list(dict.fromkeys(int(a) for a in assignment_ids))
    if not ids:
        raise DomainError("No submission matches.", code=ErrorCode.BATCH_REJECT_NONE)
    if len(ids) > BATCH_MAX:
        raise DomainError(f"At most {BATCH_MAX} submissions at once.", code=ErrorCode.INVALID)
    with transaction.atomic():
        for assignment_id in ids:
            if not Assignment.objects.filter(pk=assignment_id, task__project=project).exists():
                raise NotFound("No such submission.")
            services.submission_reject(actor=actor, assignment_id=assignment_id, reason=reason,
                                       reason_code=reason_code, now=now)
    logger.info("batch reject", extra={"project_id": project.pk, "by": actor.pk, "count": len(ids)})
    return len(ids)
