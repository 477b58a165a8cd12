"""Writes of the reveal: the one revision round of a submitted assignment, and consensus rewrites.

Locks follow `annotation.lock_objects`: the task, then the assignment (as a submission does), so a
revision and a rejection or a late submission of the same task never deadlock. "Once" is the
database's: `RevealRound` is one-to-one with the assignment, checked under the assignment's lock;
a repeat of the same request returns the recorded round unchanged, a different one is refused.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from annotation.lock_objects import assignment_lock, task_lock
from annotation.models import (
    Assignment,
    ConsensusLabels,
    ItemConsensus,
    LabelRevision,
    Project,
    RevealRound,
    Task,
)
from annotation.models.reveal import REASON_MAX
from annotation.projects.rules import project_check_writable
from annotation.reveal.selectors import Reveal, reveal_get_for_expert
from annotation.submission.consensus import consensus_compute
from core.after_commit import task_send_on_commit
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError
from experts.models import User

logger = logging.getLogger(__name__)

RECOMPUTE_CHUNK = 200


@dataclass(frozen=True)
class ReviseResult:
    round: RevealRound
    created: bool  # False: the same request had already been recorded
    revised: int


def _field_error(key: str, code: str, **params: Any) -> dict[str, Any]:
    return {"field": f"reasons.{key}", "code": code, "params": params,
            "message": str(ErrorCode(code).label) % params if params else str(ErrorCode(code).label)}


def revisions_clean(*, reveal: Reveal, changes: Mapping[str, Any]) -> dict[str, str]:
    """{item key: reason} of the items to change, or a DomainError naming each bad one (nothing written).

    Only items where the first label differs from the judge's can change; each needs a reason
    (at most REASON_MAX characters).
    """
    differing = {row.item.item_key for row in reveal.rows}
    errors: list[dict[str, Any]] = []
    clean: dict[str, str] = {}
    for key, raw in changes.items():
        reason = raw.strip() if isinstance(raw, str) else ""
        if key not in differing:
            errors.append(_field_error(key, ErrorCode.REVISION_ITEM_UNKNOWN))
        elif not reason:
            errors.append(_field_error(key, ErrorCode.REVISION_REASON_REQUIRED))
        elif len(reason) > REASON_MAX:
            errors.append(_field_error(key, ErrorCode.REVISION_REASON_TOO_LONG, max=REASON_MAX))
        else:
            clean[key] = reason
    if errors:
        raise DomainError(f"{len(errors)} change(s) need attention; nothing was saved.",
                          code=ErrorCode.REVEAL_INVALID, errors=errors, params={"count": len(errors)})
    return clean


def _recorded(round_: RevealRound) -> dict[str, str]:
    return dict(LabelRevision.objects.filter(round=round_).values_list("label__rubric_item__item_key", "reason"))


def reveal_revise(*, expert: User, assignment_id: object, changes: Mapping[str, Any], now: datetime) -> ReviseResult:
    """Close the expert's one revision round: each item of `changes` takes the judge's label, with its reason.

    `changes` maps item keys to reasons; an empty mapping keeps every first label and still closes
    the round. The first labels (`Label.value`) never change. Where the project's consensus reads
    revised labels, the task's consensus is rewritten in the same transaction; the agreement report
    (whose before/after figures change either way) is asked for a recompute after the commit.
    """
    reveal = reveal_get_for_expert(expert=expert, assignment_id=assignment_id)
    project_check_writable(reveal.project)
    if reveal.run is None:
        raise Conflict("The judge has not judged this task yet.", code=ErrorCode.REVEAL_NO_JUDGE)
    clean = revisions_clean(reveal=reveal, changes=changes)
    rows = {row.item.item_key: row for row in reveal.rows}
    with transaction.atomic():
        task = task_lock(reveal.task.pk)
        assignment = assignment_lock(reveal.assignment.pk)
        if assignment.status != Assignment.Status.SUBMITTED:
            # Rejected between the page and the post.
            raise Conflict("This submission was rejected.", code=ErrorCode.REVEAL_REJECTED)
        existing = RevealRound.objects.filter(assignment=assignment).first()
        if existing is not None:
            if _recorded(existing) == clean:
                return ReviseResult(round=existing, created=False, revised=len(clean))
            raise Conflict("This task was already revised once.", code=ErrorCode.REVEAL_ALREADY_REVISED)
        round_ = RevealRound.objects.create(assignment=assignment, judge_run=reveal.run,
                                            items_differing=len(reveal.rows), revised_at=now)
        LabelRevision.objects.bulk_create(
            LabelRevision(label=rows[key].label, round=round_, value=rows[key].judge, reason=reason,
                          judge_run=reveal.run, judge_value=rows[key].judge, revised_at=now)
            for key, reason in clean.items())
        if clean:
            if (reveal.project.consensus_labels == ConsensusLabels.REVISED
                    and ItemConsensus.objects.filter(task=task).exists()):
                consensus_compute(task=task, now=now)
            # The report's before/after figures change whichever labels consensus reads.
            task_send_on_commit("annotation.agreement_report_request", project_id=task.project_id)
    logger.info("reveal round closed", extra={"assignment_id": assignment.pk, "revised": len(clean),
                                              "differing": len(reveal.rows)})
    return ReviseResult(round=round_, created=True, revised=len(clean))


def consensus_recompute_project(*, project_id: int, now: datetime) -> int:
    """Rewrite the consensus of every regular task of the project that has one (after its
    `consensus_labels` changed); returns how many tasks were rewritten. Idempotent: a second run
    writes the same rows. Each chunk of tasks is one short transaction, tasks locked one by one in pk order."""
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return 0
    ids = list(Task.objects.filter(project=project, is_golden=False, consensus__isnull=False)
               .distinct().order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), RECOMPUTE_CHUNK):
        with transaction.atomic():
            for task_id in ids[start:start + RECOMPUTE_CHUNK]:
                consensus_compute(task=task_lock(task_id), now=now)
    if ids:
        task_send_on_commit("annotation.agreement_report_request", project_id=project.pk)
    logger.info("consensus recomputed", extra={"project_id": project.pk, "tasks": len(ids),
                                               "labels": project.consensus_labels})
    return len(ids)
