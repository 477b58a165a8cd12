"""Carrying work over to a newly published rubric version.

The mechanism: the work of a question whose items did not change (same item keys, wording,
score, dimension and tags) moves to the new version. Its regular tasks are re-pointed to the
new version and their labels and consensus to the new version's item of the same key, which
is the same criterion word for word. Assignments do not move, so the ledger (one earning per
submitted assignment) pays nothing twice, and every read that picks "the current version's
tasks" (dashboard, agreement reports, export) sees the carried work without a change. Labels
carry no database trigger (only rubric versions and items do), and the items they point to
after the move are published rows that never change.

The judge's work follows the same rule (`judge_runs_carry_over`): every judge run of the
previous version moves to the new one, its labels on carried tasks re-pointed like the
experts'. Its results on every other task (a question whose items changed) become
`superseded`, done or pending: the judge answered, or would answer, on wording that no
longer holds, so a run never mixes versions and never asks about an item of the old
wording again; only the new tasks of changed questions need a new run.

Golden tasks are not re-pointed: calibration attempts keep pointing at them and at the old
items they were answered on. The golden set is carried by `golden_carry_forward` (a new golden
task per response, references copied for unchanged questions).

A question with a changed item keeps its tasks on the old version: complete ones stay there as
history; partly worked ones (a lease or a submission) are closed as superseded, their leases
ended (the expert is notified) and their labels kept for audit; untouched ones move (nobody
worked on them). `tasks_ensure_for_version` then gives each of its responses a new task.
"""
import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import OuterRef, Subquery
from django.urls import reverse

from annotation.assignment.services import lease_end
from annotation.models import Assignment, ItemConsensus, JudgeLabel, JudgeRun, JudgeTaskResult, Label, Project, Task
from experts.models import User
from experts.notifications import notification_send
from rubrics.models import RubricItem, RubricVersion

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Carryover:
    carried_tasks: int
    superseded_tasks: int
    leases_ended: int


def _item_of_same_key(version: RubricVersion) -> Subquery:
    """The id of `version`'s item with the same key as the row's current item (a correlated subquery,
    so one UPDATE re-points every row, whatever the number of items)."""
    old_key = RubricItem.objects.filter(pk=OuterRef(OuterRef("rubric_item_id"))).values("item_key")[:1]
    return Subquery(RubricItem.objects.filter(version=version, item_key=Subquery(old_key)).values("pk")[:1])


def work_carry_over(*, project: Project, previous: RubricVersion, version: RubricVersion,
                    unchanged_questions: set[str], changed_questions: set[str], now: datetime) -> Carryover:
    """Move the unchanged questions' regular work from `previous` to `version`, and close the changed
    questions' partly worked tasks as superseded (see the module docstring). Runs inside the publish
    transaction, after the version lock (the lock order of `annotation.lock_objects`)."""
    old_tasks = Task.objects.filter(project=project, rubric_version=previous, is_golden=False)
    carried = old_tasks.filter(response__question__external_id__in=unchanged_questions)
    carried_ids = list(carried.values_list("pk", flat=True))
    if carried_ids:
        Label.objects.filter(task_id__in=carried_ids).update(rubric_item_id=_item_of_same_key(version))
        ItemConsensus.objects.filter(task_id__in=carried_ids).update(rubric_item_id=_item_of_same_key(version))
        Task.objects.filter(pk__in=carried_ids).update(rubric_version=version)

    worked = (old_tasks.filter(response__question__external_id__in=changed_questions)
              .exclude(status__in=[Task.Status.COMPLETE, Task.Status.SUPERSEDED]).filter(live_count__gt=0))
    superseded_ids = list(worked.values_list("pk", flat=True))
    ended_for: dict[int, int] = defaultdict(int)
    open_leases = (Assignment.objects.filter(task_id__in=superseded_ids,
                                             status__in=[Assignment.Status.LEASED, Assignment.Status.EXPIRED])
                   .order_by("task_id", "pk"))
    for assignment in open_leases:
        was_leased = assignment.status == Assignment.Status.LEASED
        if lease_end(assignment=assignment) and was_leased:
            ended_for[assignment.expert_id] += 1
    Task.objects.filter(pk__in=superseded_ids).update(status=Task.Status.SUPERSEDED)
    if ended_for:
        notification_send(users=User.objects.filter(pk__in=ended_for).order_by("pk"), kind="task_superseded",
                          now=now, params={"version": version.number, "project": project.name},
                          link=reverse("rubric_versions", args=[project.pk]))
    result = Carryover(carried_tasks=len(carried_ids), superseded_tasks=len(superseded_ids),
                       leases_ended=sum(ended_for.values()))
    logger.info("rubric work carried over", extra={"project_id": project.pk, "version_id": version.pk,
                                                   "carried": result.carried_tasks,
                                                   "superseded": result.superseded_tasks,
                                                   "leases_ended": result.leases_ended})
    return result


def judge_runs_carry_over(*, project: Project, previous: RubricVersion, version: RubricVersion,
                          unchanged_questions: set[str]) -> dict[str, int]:
    """Move `previous`'s judge runs to `version` (see the module docstring); after `work_carry_over`
    and `tasks_ensure_for_version`, in the publish transaction. Returns counts for the log."""
    runs = list(JudgeRun.objects.filter(project=project, rubric_version=previous).values_list("pk", flat=True))
    if not runs:
        return {"runs": 0, "labels": 0, "superseded": 0}
    # An untouched task of a changed question moves to the new version too, but not its wording:
    # only the unchanged questions' tasks carry the judge's answers.
    carried = Task.objects.filter(project=project, rubric_version=version, is_golden=False,
                                  response__question__external_id__in=unchanged_questions)
    labels = (JudgeLabel.objects.filter(run_id__in=runs, task__in=carried, rubric_item__version=previous)
              .update(rubric_item_id=_item_of_same_key(version)))
    superseded = (JudgeTaskResult.objects.filter(run_id__in=runs).exclude(task__in=carried)
                  .exclude(status=JudgeTaskResult.Status.SUPERSEDED)
                  .update(status=JudgeTaskResult.Status.SUPERSEDED, claimed_until=None))
    JudgeRun.objects.filter(pk__in=runs).update(rubric_version=version)
    counts = {"runs": len(runs), "labels": labels, "superseded": superseded}
    logger.info("judge runs carried over", extra={"project_id": project.pk, "version_id": version.pk, **counts})
    return counts
