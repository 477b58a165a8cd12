"""Reads scoped to the requesting user. Missing and not-yours give the same NotFound."""
from dataclasses import dataclass

from django.db.models import QuerySet
from guardian.shortcuts import get_objects_for_user, get_users_with_perms

from annotation import permissions
from annotation.models import Assignment, Project
from core.errors import NotFound
from experts.models import Role, User
from rubrics.models import RubricItem, RubricVersion


def project_list_for_user(user: User) -> QuerySet[Project]:
    if user.is_platform_admin:
        return Project.objects.all()
    perm = permissions.MANAGE if user.is_pm else permissions.ANNOTATE
    return get_objects_for_user(user, perm, klass=Project, accept_global_perms=False)


@dataclass(frozen=True)
class ProjectAccess:
    """A project and what `user` was found to be in it, so callers need not ask the permission layer again."""

    project: Project
    user: User
    manages: bool
    annotates: bool


def project_access_for_user(user: User, project_id, *, manage: bool = False) -> ProjectAccess:
    """The project and the user's role in it if they may reach it (manage=True: as its PM or an admin).

    Missing and not-yours give the same NotFound.
    """
    try:
        project = Project.objects.select_related("rubric").get(pk=int(project_id))
    except (Project.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such project.") from None
    manages = permissions.can_manage(user, project)
    annotates = False if manage or manages else permissions.can_annotate(user, project)
    if not (manages or annotates):
        raise NotFound("No such project.")
    return ProjectAccess(project=project, user=user, manages=manages, annotates=annotates)


def project_get_for_user(user: User, project_id, *, manage: bool = False) -> Project:
    """The project if `user` may reach it (manage=True: as its PM or an admin), else NotFound."""
    return project_access_for_user(user, project_id, manage=manage).project


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


def project_experts(project: Project) -> QuerySet[User]:
    """Experts who annotate in `project`."""
    users = get_users_with_perms(project, only_with_perms_in=["annotate_project"], with_group_users=False)
    return User.objects.filter(pk__in=users.values("pk"), role=Role.EXPERT).order_by("username")


def project_managers(project: Project) -> QuerySet[User]:
    """PMs who manage `project` (admins are not notified per project)."""
    users = get_users_with_perms(project, only_with_perms_in=["manage_project"], with_group_users=False)
    return User.objects.filter(pk__in=users.values("pk"), role=Role.PM).order_by("username")


def project_expert_get(project: Project, user_id) -> User:
    """An expert of `project` by id, or NotFound (also for an id outside the project)."""
    try:
        return project_experts(project).get(pk=int(user_id))
    except (User.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such expert in this project.") from None
