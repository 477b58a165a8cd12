"""What publishing the draft would do to the work, read before publishing."""
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count

from annotation.models import Assignment, Label, Project, Response, Task
from annotation.rubric_editing.diff import RubricDiff
from annotation.rubric_editing.pricing import Cost, reannotation_cost
from rubrics.models import RubricVersion

# The kinds of change an item can have, as the diff's field names map to them.
FIELD_KINDS = {"content": "reworded", "score": "rescored", "dimension": "dimension_changed", "tags": "retagged"}


@dataclass(frozen=True)
class QuestionChange:
    question_id: str
    # {kind: [item keys]} with kind one of added, removed, reworded, rescored, dimension_changed, retagged.
    items: dict[str, list[str]]


@dataclass(frozen=True)
class RubricImpact:
    questions: list[QuestionChange] = field(default_factory=list)
    # Regular tasks of the published version on changed questions (superseded or left as history).
    tasks: int = 0
    # Submitted labels on those tasks (kept for audit, no longer current).
    submitted_labels: int = 0
    golden_tasks: int = 0
    # Experts with a submission or an open lease on those tasks (open leases end on publishing).
    experts: int = 0
    open_leases: int = 0
    # Regular tasks that carry over unchanged (no re-annotation, no second payment).
    carried_tasks: int = 0
    # New tasks publishing creates, and the pieces of work (tasks × overlap) by difficulty.
    new_tasks: int = 0
    work: dict[str, int] = field(default_factory=dict)
    cost: Cost | None = None
    recalibration: bool = False


def rubric_impact(*, project: Project, published: RubricVersion | None, diff: RubricDiff | None,
                  at: datetime) -> RubricImpact:
    """The impact of publishing the draft whose diff against `published` is `diff`."""
    if diff is None:
        return RubricImpact()
    by_question: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for item in diff.added:
        by_question[item.question_ref]["added"].append(item.item_key)
    for item in diff.removed:
        by_question[item.question_ref]["removed"].append(item.item_key)
    for change in diff.changed:
        for name in change.fields:
            by_question[change.after.question_ref][FIELD_KINDS[name]].append(change.after.item_key)
    questions = [QuestionChange(question_id=q, items={k: sorted(v) for k, v in kinds.items()})
                 for q, kinds in sorted(by_question.items())]
    if published is None:
        return RubricImpact(questions=questions)
    changed = diff.touched_questions & diff.old_questions
    unchanged = diff.old_questions - diff.touched_questions
    old = Task.objects.filter(project=project, rubric_version=published)
    touched = old.filter(response__question__external_id__in=changed)
    regular = touched.filter(is_golden=False)
    assignments = Assignment.objects.filter(task__in=regular, kind=Assignment.Kind.WORK,
                                            status__in=[Assignment.Status.LEASED, Assignment.Status.SUBMITTED])
    golden_questions = set(old.filter(is_golden=True).values_list("response__question__external_id", flat=True))
    # New tasks: every response of a changed or new question (golden ones get theirs from the golden set).
    needing = diff.touched_questions - unchanged
    per_difficulty = (Response.objects.filter(project=project, question__external_id__in=needing)
                      .values("question__difficulty").annotate(n=Count("pk")))
    work = {row["question__difficulty"]: row["n"] * project.overlap for row in per_difficulty}
    return RubricImpact(
        questions=questions,
        tasks=regular.count(),
        submitted_labels=Label.objects.filter(task__in=regular, assignment__status=Assignment.Status.SUBMITTED).count(),
        golden_tasks=touched.filter(is_golden=True).count(),
        experts=assignments.values("expert_id").distinct().count(),
        open_leases=assignments.filter(status=Assignment.Status.LEASED).count(),
        carried_tasks=old.filter(is_golden=False, response__question__external_id__in=unchanged).count(),
        new_tasks=sum(row["n"] for row in per_difficulty),
        work=work,
        cost=reannotation_cost(project_id=project.pk, work=work, at=at),
        recalibration=bool(diff.changes_standard and diff.standard_questions & golden_questions),
    )
