"""Reads of the reveal page: which judge run is shown, and the items where the expert differs from it.

Access is decided here, in one call that fetches and authorises (`reveal_get_for_expert`): the
expert's own work assignment of a regular task, in a project that reveals the judge; anything else
is the same 404 ("missing or not yours"). A submission that is not (or no longer) counted is refused
with its own message.
"""
from __future__ import annotations

from dataclasses import dataclass

from annotation.models import (
    Assignment,
    JudgeLabel,
    JudgeRun,
    JudgeTaskResult,
    Label,
    LabelRevision,
    Project,
    RevealRound,
    Task,
)
from annotation.selectors import assignment_get_for_expert
from core.error_codes import ErrorCode
from core.errors import Conflict, NotFound
from experts.models import User
from rubrics.models import RubricItem


@dataclass(frozen=True)
class RevealRow:
    """One item where the expert's first label and the judge's differ."""

    item: RubricItem
    label: Label
    first: int
    judge: int
    revision: LabelRevision | None  # the expert's revision, once the round is closed


@dataclass(frozen=True)
class Reveal:
    assignment: Assignment
    task: Task
    project: Project
    run: JudgeRun | None  # None: the judge has not judged the task yet
    reason: str  # the judge's reason for the task (per task in JudgeTaskResult)
    rows: list[RevealRow]
    agreeing: int  # items where the expert and the judge agree
    round: RevealRound | None  # set once the expert has revised (or kept everything)

    @property
    def closed(self) -> bool:
        return self.round is not None


def reveal_assignment_get(*, expert: User, assignment_id: object) -> Assignment:
    """The expert's own submitted work assignment in a project that reveals the judge, or a refusal."""
    assignment = assignment_get_for_expert(expert, assignment_id)
    task = assignment.task
    if not task.project.judge_reveal or assignment.kind != Assignment.Kind.WORK or task.is_golden:
        # Control tasks are golden: nothing on them may hint that they are (their work is scored apart).
        raise NotFound("No such assignment.")
    if assignment.status == Assignment.Status.REJECTED:
        raise Conflict("This submission was rejected, so it cannot be compared or revised.",
                       code=ErrorCode.REVEAL_REJECTED)
    if assignment.status != Assignment.Status.SUBMITTED:
        raise Conflict("Submit this task first.", code=ErrorCode.REVEAL_NOT_SUBMITTED)
    return assignment


def judge_run_for_task(*, task: Task) -> JudgeRun | None:
    """The newest finished run of the task's project that labelled this task."""
    return (JudgeRun.objects.filter(project_id=task.project_id, status=JudgeRun.Status.DONE, labels__task=task)
            .distinct().order_by("-created_at", "-pk").first())


def judge_has_labels(*, task: Task) -> bool:
    """Whether the post-submit page offers "Compare with the judge" (one EXISTS query)."""
    return JudgeLabel.objects.filter(task=task, run__status=JudgeRun.Status.DONE).exists()


def reveal_get_for_expert(*, expert: User, assignment_id: object) -> Reveal:
    """Everything the reveal page shows, in a fixed handful of queries whatever the number of items."""
    assignment = reveal_assignment_get(expert=expert, assignment_id=assignment_id)
    task = assignment.task
    round_ = RevealRound.objects.filter(assignment=assignment).select_related("judge_run").first()
    # A closed round keeps showing the run it was revised against, even after a newer run finished.
    run = round_.judge_run if round_ is not None and round_.judge_run is not None else judge_run_for_task(task=task)
    if run is None:
        return Reveal(assignment=assignment, task=task, project=task.project, run=None, reason="", rows=[],
                      agreeing=0, round=round_)
    reason = (JudgeTaskResult.objects.filter(run=run, task=task).values_list("reason", flat=True).first() or "")
    judged = dict(JudgeLabel.objects.filter(run=run, task=task).values_list("rubric_item_id", "value"))
    labels = list(Label.objects.filter(assignment=assignment).select_related("rubric_item__dimension", "revision")
                  .order_by("rubric_item__position"))
    rows, agreeing = [], 0
    for label in labels:
        judge = judged.get(label.rubric_item_id)
        if judge is None:
            continue
        if judge == label.value:
            agreeing += 1
            continue
        revision = getattr(label, "revision", None) if round_ is not None else None
        rows.append(RevealRow(item=label.rubric_item, label=label, first=label.value, judge=judge, revision=revision))
    return Reveal(assignment=assignment, task=task, project=task.project, run=run, reason=reason, rows=rows,
                  agreeing=agreeing, round=round_)
