"""The rules that flag a submission for the PM's review, run once per submission after it commits.

Control (golden) tasks are never flagged: the queue and everything the expert later sees of it
(a return, a rejection) would otherwise single out which of their tasks were controls. Each
rule writes at most one flag per submission (`review_flag_once_per_rule`), so the check can run
again (a retried task, a resubmission after a return) without flagging twice.
"""
import logging
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet, Subquery

from annotation.models import Assignment, Label, ReviewFlag, SubmissionReturn
from core.prepared import Prepared
from core.sql_insert import insert_rows

logger = logging.getLogger(__name__)
# A note shorter than this ("ok", "n/a") is repeated by honest experts too.
NOTE_MIN_CHARS = 20


def _too_fast(assignment: Assignment, items: int) -> dict | None:
    minimum = assignment.task.project.min_seconds_per_item
    if not minimum or not items or assignment.submitted_at is None:
        return None
    # Measured from the lease start (a returned submission's lease starts at the return): the
    # time the expert had the task in hand, an upper bound of the time they spent on it.
    seconds = (assignment.submitted_at - assignment.leased_at).total_seconds()
    if seconds >= minimum * items:
        return None
    return {"seconds": round(seconds, 1), "items": items, "min_seconds_per_item": minimum}


def _single_value(values: list[int]) -> int | None:
    return values[0] if values and len(set(values)) == 1 else None


def _identical_run(assignment: Assignment, values: list[int]) -> dict | None:
    """The last N submissions of the expert in the project (this one included), each with every
    item labelled the same one value: straight-lining."""
    length = assignment.task.project.review_run_length
    value = _single_value(values)
    if length < 2 or value is None:
        return None
    by_assignment: dict[int, set[int]] = {}
    for assignment_id, label_value in _RECENT_LABELS.tuples(
            shape={"length": length}, expert_id=assignment.expert_id, project_id=assignment.task.project_id,
            submitted_at=assignment.submitted_at):
        by_assignment.setdefault(assignment_id, set()).add(label_value)
    # Fewer than N submissions, or one of them without labels (no rubric items): no run.
    if len(by_assignment) < length or any(found != {value} for found in by_assignment.values()):
        return None
    return {"value": value, "run": length}


def _repeated_note(assignment: Assignment, notes: list[str]) -> dict | None:
    """A note of this submission that the same expert wrote word for word on another task."""
    if not assignment.task.project.review_repeated_notes:
        return None
    candidates = sorted({n for n in notes if len(n) >= NOTE_MIN_CHARS})
    if not candidates:
        return None
    repeated = (Label.objects.filter(assignment__expert_id=assignment.expert_id, note__in=candidates,
                                     task__project_id=assignment.task.project_id)
                .exclude(task_id=assignment.task_id).values_list("note", "task_id").order_by("task_id").first())
    if repeated is None:
        return None
    note, task_id = repeated
    return {"note": note[:300], "other_task": task_id}


def _assignment_query(*, assignment_id: int) -> QuerySet[Assignment]:
    pending_return = SubmissionReturn.objects.filter(assignment=OuterRef("pk"), resubmitted_at__isnull=True,
                                                     lapsed_at__isnull=True)
    return (Assignment.objects.select_related("task__project").filter(pk=assignment_id)
            .annotate(returned=Exists(pending_return)))


# After every submission (the worker): compiled once per process (core.prepared).
_ASSIGNMENT = Prepared(_assignment_query)
_LABELS: Prepared[Any] = Prepared(lambda *, assignment_id: Label.objects.filter(assignment_id=assignment_id)
                   .order_by("pk").values_list("value", "note"))


def _recent_labels_query(*, length: int, expert_id: int, project_id: int, submitted_at: datetime) -> QuerySet[Any]:
    """The labels of the expert's last `length` submissions in the project up to `submitted_at`, in one query."""
    recent = (Assignment.objects.filter(expert_id=expert_id, task__project_id=project_id, kind=Assignment.Kind.WORK,
                                        status=Assignment.Status.SUBMITTED, submitted_at__lte=submitted_at)
              .order_by("-submitted_at", "-pk").values("pk")[:length])
    return Label.objects.filter(assignment_id__in=Subquery(recent)).order_by().values_list("assignment_id", "value")


# The run length is part of the SQL (its LIMIT): a shape of its own per length.
_RECENT_LABELS: Prepared[Any] = Prepared(_recent_labels_query)
_FLAGS: Prepared[Any] = Prepared(lambda *, assignment_id: ReviewFlag.objects.filter(assignment_id=assignment_id)
                  .values_list("rule"))


def review_flags_check(*, assignment_id: int, now: datetime) -> int:
    """Apply the review rules to a submission; returns how many new flags were written.

    Also records that a returned submission came back (its return's `resubmitted_at`).
    """
    assignment = _ASSIGNMENT.first(assignment_id=assignment_id)
    if (assignment is None or assignment.status != Assignment.Status.SUBMITTED
            or assignment.kind != Assignment.Kind.WORK):
        return 0
    if assignment.returned:  # type: ignore[attr-defined]
        SubmissionReturn.objects.filter(assignment=assignment, resubmitted_at__isnull=True,
                                        lapsed_at__isnull=True).update(resubmitted_at=assignment.submitted_at)
    if assignment.task.is_golden:
        return 0
    rows = _LABELS.tuples(assignment_id=assignment.pk)
    values = [v for v, _ in rows]
    notes = [n.strip() for _, n in rows if n.strip()]
    found = {
        ReviewFlag.Rule.TOO_FAST: _too_fast(assignment, len(rows)),
        ReviewFlag.Rule.IDENTICAL_RUN: _identical_run(assignment, values),
        ReviewFlag.Rule.REPEATED_NOTE: _repeated_note(assignment, notes),
    }
    existing = {rule for (rule,) in _FLAGS.tuples(assignment_id=assignment.pk)}
    flags = [ReviewFlag(project_id=assignment.task.project_id, assignment=assignment, rule=rule, detail=detail,
                        created_at=now)
             for rule, detail in found.items() if detail is not None and rule not in existing]
    if not flags:
        return 0
    # A concurrent run of the same check loses on the unique constraint and writes nothing.
    insert_rows(flags, ignore_conflicts=True)
    logger.info("submission flagged", extra={"assignment_id": assignment.pk, "rules": [f.rule for f in flags]})
    return len(flags)
