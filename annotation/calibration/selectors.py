"""Reads for calibration: the usable golden material and the expert's own attempts."""
from django.db.models import Count, F, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from annotation.models import CalibrationAttempt, CalibrationDraft, CalibrationTask, GoldenReference, Project, Task
from core.errors import NotFound
from experts.models import User
from rubrics.models import RubricItem, RubricVersion


def golden_usable_tasks(*, project: Project, version: RubricVersion) -> QuerySet[Task]:
    """Golden tasks of `version` whose every rubric item has a reference: calibration and control material."""
    items = (RubricItem.objects.filter(version=version, question_ref=OuterRef("response__question__external_id"))
             .order_by().values("version").annotate(n=Count("pk")).values("n"))
    refs = (GoldenReference.objects.filter(task=OuterRef("pk"), rubric_item__version=version)
            .order_by().values("task").annotate(n=Count("pk")).values("n"))
    # "No item without a reference" as one difference: written as `ref_count = item_count`, the
    # planner hash-joined the question's subquery against the task's and ran both for every
    # question x task pair (150 ms for 200 golden tasks of a 100,000-task project, against 7 ms).
    return (Task.objects.filter(project=project, rubric_version=version, is_golden=True)
            .annotate(item_count=Coalesce(Subquery(items), 0), ref_count=Coalesce(Subquery(refs), 0))
            .annotate(missing_refs=F("item_count") - F("ref_count"))
            .filter(item_count__gt=0, missing_refs=0))


def project_has_golden_set(project: Project) -> bool:
    """Whether the PM ever gave the project reference labels: from then on calibration gates real work."""
    return GoldenReference.objects.filter(task__project=project).exists()


def experts_with_live_calibration(project: Project) -> set[int]:
    """Ids of experts holding a calibration attempt of `project` that is not stale (passed, failed
    or in progress): the ones a standard-changing version sends back to calibration."""
    return set(CalibrationAttempt.objects.filter(project=project).exclude(status=CalibrationAttempt.Status.STALE)
               .values_list("expert_id", flat=True).distinct())


def attempt_get_for_expert(user: User, attempt_id) -> CalibrationAttempt:
    """The expert's own calibration attempt, or NotFound (also for someone else's)."""
    try:
        return CalibrationAttempt.objects.select_related("project", "rubric_version").get(
            pk=int(attempt_id), expert=user)
    except (CalibrationAttempt.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such calibration attempt.") from None


def golden_task_ids_seen_in_calibration(*, project: Project, expert: User) -> QuerySet:
    """Golden tasks the expert met in calibration, where they saw the references: never a control task for them."""
    return CalibrationTask.objects.filter(attempt__project=project, attempt__expert=expert).values("task_id")


def attempt_list_for_expert(*, project: Project, expert: User, limit: int = 20) -> list[CalibrationAttempt]:
    """The expert's newest calibration attempts in `project`, for their own page and their PM's."""
    return list(CalibrationAttempt.objects.filter(project=project, expert=expert)
                .select_related("rubric_version").order_by("-started_at", "-id")[:limit])


def calibration_answers_for_task(*, attempt: CalibrationAttempt, task: Task) -> dict[str, int]:
    """The expert's answers so far on one task of their attempt, by rubric item key (unanswered items absent)."""
    return dict(attempt.answers.filter(task=task).values_list("rubric_item__item_key", "value"))


def calibration_draft_for_task(*, attempt: CalibrationAttempt, task: Task) -> CalibrationDraft | None:
    """The autosaved marks and notes of one task of the attempt, if any."""
    return CalibrationDraft.objects.filter(attempt=attempt, task=task).first()
