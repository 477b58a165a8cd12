"""Reads scoped to the requesting user. Missing and not-yours give the same NotFound."""
from django.db.models import QuerySet
from guardian.shortcuts import get_objects_for_user

from annotation import permissions
from annotation.models import Assignment, Project
from core.errors import NotFound
from experts.models import User
from rubrics.models import RubricItem, RubricVersion


def project_list_for_user(user: User) -> QuerySet[Project]:
    if user.is_platform_admin:
        return Project.objects.all()
    perm = permissions.MANAGE if user.is_pm else permissions.ANNOTATE
    return get_objects_for_user(user, perm, klass=Project, accept_global_perms=False)


def project_get_for_user(user: User, project_id, *, manage: bool = False) -> Project:
    """The project if `user` may reach it (manage=True: as its PM or an admin), else NotFound."""
    try:
        project = Project.objects.select_related("rubric").get(pk=int(project_id))
    except (Project.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such project.") from None
    allowed = permissions.can_manage(user, project) if manage else (
        permissions.can_manage(user, project) or permissions.can_annotate(user, project))
    if not allowed:
        raise NotFound("No such project.")
    return project


def assignment_get_for_expert(user: User, assignment_id) -> Assignment:
    """The expert's own assignment, or NotFound (also for another expert's id)."""
    try:
        return Assignment.objects.select_related(
            "task__response__question", "task__rubric_version", "task__project"
        ).get(pk=int(assignment_id), expert=user)
    except (Assignment.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such assignment.") from None


def rubric_version_current(project: Project) -> RubricVersion | None:
    """The newest published version of the project's rubric: new leases use it."""
    return (RubricVersion.objects.filter(rubric_id=project.rubric_id, status=RubricVersion.Status.PUBLISHED)
            .order_by("-number").first())


def rubric_items_for_task(task) -> list[RubricItem]:
    return list(
        RubricItem.objects.filter(version_id=task.rubric_version_id,
                                  question_ref=task.response.question.external_id)
        .select_related("dimension").order_by("position")
    )
