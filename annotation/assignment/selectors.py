"""Reads of an expert's own assignments: what state one is in, how much work they did per project.

The annotation page and the API both read an assignment's state here, so "expired"
means the same to both: a lease past its expiry is expired before the sweep
(`leases_expire`) marks the row.
"""
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from django.db.models import Count, Q

from annotation.models import Assignment, Project
from experts.models import User

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
    counts = {
        row.pop("task__project_id"): row
        for row in Assignment.objects.filter(expert=expert, task__project__in=projects)
        .values("task__project_id")
        .annotate(
            submitted=Count("pk", filter=Q(status=Assignment.Status.SUBMITTED)),
            in_progress=Count("pk", filter=Q(status=Assignment.Status.LEASED, expires_at__gt=now)),
        )
        .order_by()
    }
    return {p.pk: ExpertWork(**counts.get(p.pk, {})) for p in projects}
