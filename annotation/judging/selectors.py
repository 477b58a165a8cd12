"""Reads of judge runs, scoped to the requesting user: missing and not-yours are one NotFound."""
from django.db.models import Count, Q, QuerySet

from annotation import permissions
from annotation.models import JudgeRun, JudgeTaskResult, Project
from core.errors import NotFound
from experts.models import User

FAILURES_SHOWN = 200


def judge_run_get_for_user(user: User, run_id) -> JudgeRun:
    """The judge run if `user` manages its project (its PM or an admin), else NotFound."""
    try:
        run = JudgeRun.objects.select_related("project", "rubric_version").get(pk=int(run_id))
    except (JudgeRun.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such judge run.") from None
    if not permissions.can_manage(user, run.project):
        raise NotFound("No such judge run.")
    return run


def judge_run_list_for_project(project: Project) -> QuerySet[JudgeRun]:
    """The project's runs, newest first, each with done / failed / pending / total counts."""
    status = JudgeTaskResult.Status
    return (
        JudgeRun.objects.filter(project=project)
        .select_related("rubric_version")
        .annotate(
            n_done=Count("results", filter=Q(results__status=status.DONE)),
            n_failed=Count("results", filter=Q(results__status=status.FAILED)),
            n_pending=Count("results", filter=Q(results__status=status.PENDING)),
            n_total=Count("results"),
        )
        .order_by("-created_at", "-pk")
    )


def judge_run_failures(run: JudgeRun, *, limit: int = FAILURES_SHOWN) -> list[JudgeTaskResult]:
    """The run's failed tasks (with question and model), first failed first."""
    return list(
        JudgeTaskResult.objects.filter(run=run, status=JudgeTaskResult.Status.FAILED)
        .select_related("task__response__question")
        .order_by("pk")[:limit]
    )
