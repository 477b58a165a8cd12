"""Reads scoped to the requesting user. Missing and not-yours give the same NotFound."""
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, F, Q, QuerySet, Sum
from guardian.shortcuts import get_objects_for_user, get_users_with_perms

from annotation import permissions
from annotation.models import Assignment, Project, Task
from core.errors import NotFound
from core.prepared import Prepared
from experts.models import Role, User
from rubrics.models import RubricItem, RubricVersion


def project_list_for_user(user: User, *, archived: bool = False) -> QuerySet[Project]:
    """The projects `user` reaches; archived ones are hidden unless `archived` (then only those)."""
    if user.is_platform_admin:
        projects = Project.objects.all()
    else:
        perm = permissions.MANAGE if user.is_pm else permissions.ANNOTATE
        projects = get_objects_for_user(user, perm, klass=Project, accept_global_perms=False)
    return projects.filter(archived_at__isnull=not archived)


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


def _expert_assignment_query(*, assignment_id: int, expert_id: int) -> QuerySet[Assignment]:
    return Assignment.objects.select_related(
        "task__response__question", "task__rubric_version", "task__project", "expert__expert_profile"
    ).filter(pk=assignment_id, expert_id=expert_id)


# On every submission, autosave and annotation page: compiled once per process (core.prepared).
_EXPERT_ASSIGNMENT = Prepared(_expert_assignment_query)


def assignment_get_for_expert(user: User, assignment_id) -> Assignment:
    """The expert's own assignment, or NotFound (also for another expert's id)."""
    try:
        wanted = int(assignment_id)
    except (TypeError, ValueError):
        raise NotFound("No such assignment.") from None
    found = (_EXPERT_ASSIGNMENT.first(assignment_id=wanted, expert_id=user.pk)
             if user.pk is not None and -2**63 <= wanted < 2**63 else None)
    if found is None:
        raise NotFound("No such assignment.")
    return found


def rubric_version_current(project: Project) -> RubricVersion | None:
    """The newest published version of the project's rubric: new leases use it."""
    return (RubricVersion.objects.filter(rubric_id=project.rubric_id, status=RubricVersion.Status.PUBLISHED)
            .order_by("-number").first())


def _task_items_query(*, version_id: int, question_ref: str) -> QuerySet[RubricItem]:
    return (RubricItem.objects.filter(version_id=version_id, question_ref=question_ref)
            .select_related("dimension").annotate(version_status=F("version__status")).order_by("position"))


_TASK_ITEMS = Prepared(_task_items_query)

# The items of a published version never change (a database trigger refuses it), and every claim and
# submission reads a task's: each process keeps them, per version and question, for ITEMS_KEEP_S
# (the dimension they carry is taxonomy an admin may rename: it shows within that time), at most
# ITEMS_KEPT of them. A draft version's items are read each time. The items are shared: read-only.
ITEMS_KEEP_S = 60.0
ITEMS_KEPT = 4096
_items_kept: OrderedDict[tuple[str, int, str], tuple[float, tuple[RubricItem, ...]]] = OrderedDict()
_items_lock = threading.Lock()


def rubric_items_for_task(task) -> list[RubricItem]:
    """The rubric items a task is labelled on, in order (compiled once per process: on every claim and submit)."""
    key = (connection.settings_dict["NAME"], task.rubric_version_id, task.response.question.external_id)
    now = time.monotonic()
    with _items_lock:
        kept = _items_kept.get(key)
        if kept is not None and kept[0] > now:
            _items_kept.move_to_end(key)
            return list(kept[1])
    items = _TASK_ITEMS.all(version_id=key[1], question_ref=key[2])
    if items and all(getattr(i, "version_status", None) == RubricVersion.Status.PUBLISHED for i in items):
        with _items_lock:
            _items_kept[key] = (now + ITEMS_KEEP_S, tuple(items))
            _items_kept.move_to_end(key)
            while len(_items_kept) > ITEMS_KEPT:
                _items_kept.popitem(last=False)
    return items


def rubric_items_forget() -> None:
    """Drop the items this process keeps (tests: a flushed database numbers its rows again)."""
    with _items_lock:
        _items_kept.clear()


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


@dataclass(frozen=True)
class TaskProgress:
    """A project's live task counts, as the home page, the project page and the dashboard show them.

    Golden tasks never complete (they keep serving as control tasks), so they are counted
    apart in `golden` and stay out of every other count; their submissions are real work
    and stay in `submissions`.
    """

    project: Project
    tasks: int = 0
    open: int = 0
    pending: int = 0  # open, nobody on it yet
    in_progress: int = 0  # every slot leased, or open with someone on it
    full: int = 0
    complete: int = 0
    golden: int = 0
    submissions: int = 0

    @property
    def percent_complete(self) -> int:
        return round(100 * self.complete / self.tasks) if self.tasks else 0


def task_progress_for_projects(projects: Iterable[Project]) -> list[TaskProgress]:
    """The progress of each of `projects`, in their order, in one query.

    Callers pass projects they already scoped to the user (`project_list_for_user`,
    `project_get_for_user`).
    """
    projects = list(projects)
    regular = Q(is_golden=False)
    open_ = regular & Q(status=Task.Status.OPEN)
    rows = {
        row.pop("project_id"): row
        for row in Task.objects.filter(project__in=projects)
        .values("project_id")
        .annotate(
            tasks=Count("pk", filter=regular),
            open=Count("pk", filter=open_),
            pending=Count("pk", filter=open_ & Q(live_count=0)),
            in_progress=Count("pk", filter=regular & (Q(status=Task.Status.FULL)
                                                      | Q(status=Task.Status.OPEN, live_count__gt=0))),
            full=Count("pk", filter=regular & Q(status=Task.Status.FULL)),
            complete=Count("pk", filter=regular & Q(status=Task.Status.COMPLETE)),
            golden=Count("pk", filter=Q(is_golden=True)),
            submissions=Sum("submitted_count"),
        )
        .order_by()
    }
    return [TaskProgress(project=p, **{k: v or 0 for k, v in rows.get(p.pk, {}).items()}) for p in projects]


def task_progress_for_project(project: Project) -> TaskProgress:
    return task_progress_for_projects([project])[0]
