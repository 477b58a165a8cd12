"""Reads of an expert's own assignments: what state one is in, how much work they did per project.

The annotation page and the API both read an assignment's state here, so "expired"
means the same to both: a lease past its expiry is expired before the sweep
(`leases_expire`) marks the row.
"""
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from django.db import connection
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.models import Assignment, Difficulty, Project, Task, TaskSkip
from experts.models import ExpertProfile, User, tier_rank
from rubrics.models import RubricVersion

# The home page counts an expert's tasks left up to this many per project, then says "more than".
TASKS_LEFT_CAP = 1000


def difficulties_for(*, project: Project, tier: str) -> list[str]:
    """The question difficulties an expert of `tier` takes in `project` (hard needs `project.hard_min_tier`)."""
    allowed: list[str] = [Difficulty.NORMAL]
    if tier_rank(tier) >= tier_rank(project.hard_min_tier):
        allowed.append(Difficulty.HARD)
    return allowed


def week_start(now: datetime) -> datetime:
    """Monday 00:00 of `now`'s week, in the platform's time zone (weekly capacity counts from there)."""
    local = timezone.localtime(now)
    day = local.replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=local.weekday())


def day_start(now: datetime) -> datetime:
    """00:00 of `now`'s day, in the platform's time zone."""
    return timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)


AssignmentState = Literal["leased", "expired", "released", "submitted"]


def assignment_state(assignment: Assignment, *, now: datetime) -> AssignmentState:
    """"leased" (the slot is the expert's), "expired" (a late submission counts only while the task has
    room, see `assignment_revive`), "released" (given back, skipped or ended when the expert left the
    project: never submitted) or "submitted"."""
    if assignment.status == Assignment.Status.SUBMITTED:
        return "submitted"
    if assignment.status == Assignment.Status.RELEASED:
        return "released"
    if assignment.status == Assignment.Status.EXPIRED or assignment.expires_at <= now:
        return "expired"
    return "leased"


@dataclass(frozen=True)
class ExpertWork:
    """The expert's own work in one project: submitted tasks and leases still running."""

    submitted: int = 0
    in_progress: int = 0


def expert_work_for_projects(expert: User, projects: Iterable[Project], *, now: datetime) -> dict[int, ExpertWork]:
    """The expert's work in each of `projects`, by project id, in one query (every project has an entry).

    Control tasks count like any other task here: the expert never learns which were controls.
    """
    projects = list(projects)
    # The project of each of the expert's assignments is read by its task's primary key, one row
    # at a time: joined to the tasks instead, the planner hashed the project's every task (a scan
    # of 100,000 rows, 25 ms of the home page) for a veteran's 1,300 assignments (4 ms this way).
    project_key = Subquery(Task.objects.filter(pk=OuterRef("task_id")).order_by().values("project_id")[:1])
    rows = (Assignment.objects.filter(expert=expert)
            .annotate(project_key=project_key)
            .values("project_key")
            .annotate(
                submitted=Count("pk", filter=Q(status=Assignment.Status.SUBMITTED)),
                in_progress=Count("pk", filter=Q(status=Assignment.Status.LEASED, expires_at__gt=now)),
            )
            .order_by())
    counts = {row.pop("project_key"): row for row in rows}
    return {p.pk: ExpertWork(**counts.get(p.pk, {})) for p in projects}


def tasks_left_for_projects(expert: User, projects: Iterable[Project], *, tier: str | None = None) -> dict[int, int]:
    """How many tasks each project still has for `expert`, by project id, in two queries (one with `tier`).

    Counted up to TASKS_LEFT_CAP: a value above it (TASKS_LEFT_CAP + 1) means "more than that".

    The same tasks "next task" draws from (`services._open_tasks_for`): open, regular
    tasks of the project's current rubric version that the expert never held, of a
    difficulty their tier takes. Tasks whose slots are all leased right now are not
    counted; they come back when a lease ends.
    """
    projects = list(projects)
    if not projects:
        return {}
    if tier is None:  # a caller that read the expert's profile already passes its tier
        profile = ExpertProfile.objects.filter(user=expert).only("tier").first()
        if profile is None:
            return {p.pk: 0 for p in projects}
        tier = profile.tier
    per_project = Q()
    rules: dict[int, Q] = {}
    for project in projects:
        allowed = difficulties_for(project=project, tier=tier)
        # The project's current version as a subquery of its own rubric, run once per statement: written
        # against each task's project, it ran (and sorted) once per task scanned, 2 ms of every home page.
        current = (RubricVersion.objects.filter(rubric_id=project.rubric_id, status=RubricVersion.Status.PUBLISHED)
                   .order_by("-number").values("pk")[:1])
        rule = Q(project_id=project.pk, rubric_version_id=Subquery(current))
        if len(allowed) < len(Difficulty.values):
            rule &= Q(response__question__difficulty__in=allowed)
        rules[project.pk] = rule
        per_project |= rule
    held_before = Assignment.objects.filter(task=OuterRef("pk"), expert=expert)
    eligible = (Task.objects.filter(status=Task.Status.OPEN, is_golden=False, response__question__judge_only=False)
                .exclude(Exists(held_before)))
    if connection.features.supports_slicing_ordering_in_compound:
        # Counted up to the cap, per project, in one UNION ALL of LIMITed scans: an exact count of
        # 100,000 open tasks cost 250 ms on every home page; "more than 1,000" is all an expert needs.
        capped = [eligible.filter(rules[p.pk]).values_list("project_id", flat=True)[:TASKS_LEFT_CAP + 1]
                  for p in projects]
        rows = list(capped[0].union(*capped[1:], all=True)) if len(capped) > 1 else list(capped[0])
        counts: dict[int, int] = Counter(rows)
    else:
        counts = dict(eligible.filter(per_project).values("project_id").annotate(n=Count("pk")).order_by()
                      .values_list("project_id", "n"))
    return {p.pk: counts.get(p.pk, 0) for p in projects}


def expert_history(expert: User) -> QuerySet[Assignment]:
    """The expert's own finished work, newest first: submitted tasks, and tasks they gave back or
    skipped. `finished_at` is when it ended (submission, skip, or the lease start for a task given
    back, which keeps no end time). Never the model: callers show the question only."""
    # A submission a PM returned to fix is listed too while its lease is open (it is the expert's to fix).
    returned_open = Q(status=Assignment.Status.LEASED, submission_return__isnull=False,
                      submission_return__resubmitted_at__isnull=True, submission_return__lapsed_at__isnull=True)
    return (Assignment.objects.filter(Q(status__in=[Assignment.Status.SUBMITTED, Assignment.Status.RELEASED,
                                                    Assignment.Status.REJECTED]) | returned_open,
                                      expert=expert, kind=Assignment.Kind.WORK)
            .select_related("task__project", "task__response__question", "skip", "submission_return")
            .annotate(finished_at=Coalesce("submitted_at", "skip__created_at", "leased_at"))
            .order_by("-finished_at", "-pk"))


def project_skips(project: Project, *, reason: str | None = None) -> QuerySet[TaskSkip]:
    """The project's skips, newest first, for its PM (optionally of one reason)."""
    qs = (TaskSkip.objects.filter(project=project)
          .select_related("task__response__question", "expert__expert_profile").order_by("-created_at", "-pk"))
    if reason:
        qs = qs.filter(reason=reason)
    return qs


def project_skip_counts(project: Project) -> dict[str, int]:
    """How many skips the project has per reason (every reason has an entry)."""
    counts = dict(TaskSkip.objects.filter(project=project).values("reason").annotate(n=Count("pk"))
                  .order_by().values_list("reason", "n"))
    return {reason: counts.get(reason, 0) for reason in TaskSkip.Reason.values}


def lease_seconds_left(assignment: Assignment, *, now: datetime) -> int:
    """Whole seconds until the lease runs out: 0 unless it is live."""
    if assignment_state(assignment, now=now) != "leased":
        return 0
    return max(0, int((assignment.expires_at - now).total_seconds()))


# The skip list shows the newest skips only; the counts per reason cover all of them.
SKIPS_LIMIT = 500


def history_status(assignment: Assignment) -> str:
    """"submitted", "returned" (by a PM to fix: open again),
    "rejected" (by a PM, with a reason), "skipped" (given back with a reason) or
    "released" (given back, or ended when the expert left the project)."""
    if assignment.status == Assignment.Status.SUBMITTED:
        return "submitted"
    if assignment.status == Assignment.Status.LEASED:
        return "returned"
    if assignment.status == Assignment.Status.REJECTED:
        return "rejected"
    try:
        assignment.skip  # noqa: B018 - select_related by expert_history
    except TaskSkip.DoesNotExist:
        return "released"
    return "skipped"


@dataclass(frozen=True)
class LeaseClock:
    """What the page's countdown needs: seconds left, the full timeout, and when to warn."""

    seconds_left: int
    timeout_s: int
    warn_s: int
    expires_at: datetime


WARN_MAX_S = 300
WARN_SHARE = 0.2


def lease_clock(assignment: Assignment, *, now: datetime) -> LeaseClock:
    """The countdown of a lease: it warns 5 minutes before the end, or at 20% of a short timeout."""
    timeout = assignment.task.project.lease_timeout_s
    return LeaseClock(seconds_left=lease_seconds_left(assignment, now=now), timeout_s=timeout,
                      warn_s=min(WARN_MAX_S, int(timeout * WARN_SHARE)), expires_at=assignment.expires_at)
