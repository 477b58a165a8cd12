"""Reads for the PM's workload page: each expert's load, pace and quality, and the project's deadline.

A fixed number of queries, however many experts and tasks the project has (asserted in
tests/annotation/test_workload.py). Weekly capacity counts all the expert's projects, as
the claim does (`annotation.assignment.services.expert_check_room`); the rest is this
project's work.
"""
import statistics
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import Count, F, OuterRef, Q, Subquery, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from annotation.assignment.selectors import day_start, week_start
from annotation.models import Assignment, Label, Project, Task
from annotation.quality.control import ControlAccuracy, control_accuracy_for_experts
from annotation.selectors import project_experts
from experts.models import ExpertProfile, User

# The median pace reads each expert's newest submissions in the project.
PACE_WINDOW = 50
THROUGHPUT_DAYS = 7
# A quality trend moves when the newest control window differs from the one before by this much.
TREND_STEP_PCT = 5.0


@dataclass(frozen=True)
class ExpertLoad:
    """One expert on the workload page."""

    expert: User
    profile: ExpertProfile | None
    live: int  # leases running now in this project
    today: int  # work submitted today, every project
    week: int  # work submitted this week, every project
    capacity: int
    median_s_per_item: float | None
    control_now: ControlAccuracy
    control_before: ControlAccuracy

    @property
    def paused(self) -> bool:
        return self.profile is None or not self.profile.is_active

    @property
    def at_capacity(self) -> bool:
        return self.week >= self.capacity

    @property
    def capacity_pct(self) -> int:
        return min(100, round(100 * self.week / self.capacity)) if self.capacity else 100

    @property
    def trend(self) -> str:
        """"up", "down", "flat", or "" without two windows of control tasks to compare."""
        now, before = self.control_now.pct, self.control_before.pct
        if now is None or before is None:
            return ""
        if now - before >= TREND_STEP_PCT:
            return "up"
        if before - now >= TREND_STEP_PCT:
            return "down"
        return "flat"


@dataclass(frozen=True)
class ProjectDeadline:
    """The project's progress, pace over the last week and the finish date that pace gives."""

    total: int
    done: int
    throughput_7d: int
    due_date: date | None
    forecast: date | None  # None: nothing done in the last week (or nothing left)

    @property
    def left(self) -> int:
        return self.total - self.done

    @property
    def done_pct(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0

    @property
    def late(self) -> bool:
        """Past due already, or the forecast (or the lack of any pace) passes the due date."""
        if self.due_date is None or self.left == 0:
            return False
        return self.forecast is None or self.forecast > self.due_date

    @property
    def per_day(self) -> float:
        return self.throughput_7d / THROUGHPUT_DAYS


def project_deadline(project: Project, *, now: datetime) -> ProjectDeadline:
    """Regular tasks of the project (golden and superseded ones left out): done, total, the last 7 days' pace."""
    since = now - timedelta(days=THROUGHPUT_DAYS)
    counts = (Task.objects.filter(project=project, is_golden=False).exclude(status=Task.Status.SUPERSEDED)
              .aggregate(total=Count("pk"), done=Count("pk", filter=Q(status=Task.Status.COMPLETE)),
                         recent=Count("pk", filter=Q(status=Task.Status.COMPLETE, completed_at__gte=since))))
    left = counts["total"] - counts["done"]
    forecast = None
    if left == 0:
        forecast = timezone.localdate(now)
    elif counts["recent"]:
        days = left * THROUGHPUT_DAYS / counts["recent"]
        forecast = timezone.localdate(now + timedelta(days=days))
    return ProjectDeadline(total=counts["total"], done=counts["done"], throughput_7d=counts["recent"],
                           due_date=project.due_date, forecast=forecast)


def _median_pace(*, project: Project, experts: list[User]) -> dict[int, float]:
    """Median seconds per rubric item over each expert's newest `PACE_WINDOW` submissions, by user id."""
    items = (Label.objects.filter(assignment=OuterRef("pk")).order_by().values("assignment")
             .annotate(n=Count("pk")).values("n"))
    rows = (Assignment.objects.filter(task__project=project, expert__in=experts, kind=Assignment.Kind.WORK,
                                      status=Assignment.Status.SUBMITTED)
            .annotate(items=Subquery(items),
                      rank=Window(RowNumber(), partition_by=[F("expert_id")],
                                  order_by=[F("submitted_at").desc(), F("id").desc()]))
            .filter(rank__lte=PACE_WINDOW).values_list("expert_id", "leased_at", "submitted_at", "items"))
    paces: dict[int, list[float]] = {}
    for expert_id, leased_at, submitted_at, n in rows:
        if n and submitted_at is not None:
            paces.setdefault(expert_id, []).append((submitted_at - leased_at).total_seconds() / n)
    return {expert_id: statistics.median(values) for expert_id, values in paces.items()}


def expert_loads_for_project(project: Project, *, now: datetime) -> list[ExpertLoad]:
    """Every expert of `project`, by username, with their load, pace and control-task trend."""
    experts = list(project_experts(project).select_related("expert_profile"))
    today, week = day_start(now), week_start(now)
    work = Q(kind=Assignment.Kind.WORK, status__in=[Assignment.Status.SUBMITTED, Assignment.Status.REJECTED])
    counts = {row["expert_id"]: row for row in
              Assignment.objects.filter(expert__in=experts).values("expert_id").annotate(
                  live=Count("pk", filter=Q(task__project=project, status=Assignment.Status.LEASED,
                                            expires_at__gt=now)),
                  today=Count("pk", filter=work & Q(submitted_at__gte=today)),
                  week=Count("pk", filter=work & Q(submitted_at__gte=week))).order_by()}
    pace = _median_pace(project=project, experts=experts)
    window = project.control_window
    recent = control_accuracy_for_experts(project=project, experts=experts, window=window)
    double = control_accuracy_for_experts(project=project, experts=experts, window=2 * window)
    loads = []
    for expert in experts:
        row = counts.get(expert.pk, {})
        profile = getattr(expert, "expert_profile", None)
        now_acc, both = recent[expert.pk], double[expert.pk]
        before = ControlAccuracy(tasks=both.tasks - now_acc.tasks, items=both.items - now_acc.items,
                                 correct=both.correct - now_acc.correct)
        loads.append(ExpertLoad(
            expert=expert, profile=profile, live=row.get("live", 0), today=row.get("today", 0),
            week=row.get("week", 0), capacity=profile.weekly_capacity if profile else 0,
            median_s_per_item=pace.get(expert.pk), control_now=now_acc, control_before=before))
    return loads
