"""Pulling work: an expert leases the next task; leases expire and their slot returns.

Rules (DESIGN step 4): a task reaches exactly `overlap` distinct experts, drawn at
random among eligible ones; an expert never holds two assignments on one task, and
never gets back a task whose lease they let expire. The database enforces both rules
(unique constraints and a trigger); this module keeps the counters on Task in step.
"""
import logging
import random
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef

from annotation import permissions
from annotation.errors import Conflict, Forbidden
from annotation.lock_objects import task_lock, task_lock_or_skip
from annotation.models import Assignment, Project, Task
from annotation.selectors import rubric_version_current
from experts.models import ExpertProfile, User

logger = logging.getLogger(__name__)

RING_SIZE = 2**62
# A draw takes the first unlocked open task past a random point of the ring; while open
# tasks exist but are all locked by concurrent claims, it draws again.
DRAW_ATTEMPTS = 25
EXPIRE_BATCH = 50


def free_slot(task: Task) -> int:
    """The lowest slot number without a live assignment (the task row must be locked)."""
    taken = set(
        Assignment.objects.filter(task=task, status__in=[Assignment.Status.LEASED, Assignment.Status.SUBMITTED])
        .values_list("slot", flat=True)
    )
    return next(n for n in range(1, task.overlap + 1) if n not in taken)


def expert_check_eligible(*, project: Project, expert: User) -> ExpertProfile:
    """The expert's profile if they may take work in `project`; otherwise Forbidden with the reason."""
    if not permissions.can_annotate(expert, project):
        raise Forbidden("You are not an annotator in this project.", code="not_member")
    profile = ExpertProfile.objects.filter(user=expert).first()
    if profile is None:
        raise Forbidden("Your account has no expert profile.", code="no_profile")
    if not profile.is_active:
        raise Forbidden("Your expert account is paused; contact the project manager.", code="paused")
    return profile


def _draw_candidates(*, project: Project, version_id: int, expert: User, start: int, wrap: bool) -> list[Task]:
    held_before = Assignment.objects.filter(task=OuterRef("pk"), expert=expert)
    qs = (Task.objects.filter(project=project, rubric_version_id=version_id, status=Task.Status.OPEN)
          .exclude(Exists(held_before)))
    qs = qs.filter(shuffle_key__lt=start) if wrap else qs.filter(shuffle_key__gte=start)
    return list(qs.order_by("shuffle_key").select_for_update(skip_locked=True, of=("self",))[:1])


def assignment_claim_next(*, project: Project, expert: User, now: datetime) -> Assignment | None:
    """Lease the next task in `project` to `expert`, or return None when no task is left for them.

    An unexpired lease the expert already holds in the project is returned again, so
    "next task" never hoards work. The draw picks the first open task past a random
    point of the task ring that the expert never held; SKIP LOCKED lets concurrent
    experts pass each other instead of queueing on one row.
    """
    profile = expert_check_eligible(project=project, expert=expert)
    current = (Assignment.objects.filter(expert=expert, task__project=project, status=Assignment.Status.LEASED,
                                         expires_at__gt=now).order_by("leased_at").first())
    if current is not None:
        return current
    leases_expire(project=project, now=now)
    live = Assignment.objects.filter(expert=expert, status=Assignment.Status.LEASED, expires_at__gt=now).count()
    if live >= profile.max_concurrent_leases:
        raise Conflict("You already hold as many leases as you may; finish one first.", code="lease_limit")
    version = rubric_version_current(project)
    if version is None:
        return None
    for _attempt in range(DRAW_ATTEMPTS):
        start = random.randrange(RING_SIZE)
        with transaction.atomic():
            found = (_draw_candidates(project=project, version_id=version.pk, expert=expert, start=start, wrap=False)
                     or _draw_candidates(project=project, version_id=version.pk, expert=expert, start=start,
                                         wrap=True))
            if found:
                try:
                    with transaction.atomic():
                        return _lease(task=found[0], expert=expert, now=now, timeout_s=project.lease_timeout_s)
                except IntegrityError:
                    # A concurrent request of the same expert won this task; draw again.
                    pass
        if not _any_open_task_for(project=project, version_id=version.pk, expert=expert):
            return None
        # Every open task was locked by a concurrent claim at that instant: draw again.
    return None


def _any_open_task_for(*, project: Project, version_id: int, expert: User) -> bool:
    held_before = Assignment.objects.filter(task=OuterRef("pk"), expert=expert)
    return (Task.objects.filter(project=project, rubric_version_id=version_id, status=Task.Status.OPEN)
            .exclude(Exists(held_before)).exists())


def _lease(*, task: Task, expert: User, now: datetime, timeout_s: int) -> Assignment:
    assignment = Assignment.objects.create(
        task=task, expert=expert, slot=free_slot(task), status=Assignment.Status.LEASED,
        leased_at=now, expires_at=now + timedelta(seconds=timeout_s),
    )
    task.live_count += 1
    if task.live_count >= task.overlap:
        task.status = Task.Status.FULL
    task.save(update_fields=["live_count", "status"])
    return assignment


def lease_extend(*, assignment: Assignment, now: datetime) -> None:
    """Push a live lease's expiry forward: an expert who is still working keeps the task."""
    if assignment.status == Assignment.Status.LEASED and assignment.expires_at > now:
        timeout = assignment.task.project.lease_timeout_s
        Assignment.objects.filter(pk=assignment.pk, status=Assignment.Status.LEASED).update(
            expires_at=now + timedelta(seconds=timeout))


def leases_expire(*, now: datetime, project: Project | None = None, limit: int = EXPIRE_BATCH) -> int:
    """Expire overdue leases and return their slots to the pool; returns how many expired."""
    overdue = Assignment.objects.filter(status=Assignment.Status.LEASED, expires_at__lte=now)
    if project is not None:
        overdue = overdue.filter(task__project=project)
    expired = 0
    for assignment_id, task_id in overdue.order_by("task_id").values_list("pk", "task_id")[:limit]:
        with transaction.atomic():
            task = task_lock_or_skip(task_id)
            if task is None:
                continue
            changed = Assignment.objects.filter(pk=assignment_id, status=Assignment.Status.LEASED,
                                                expires_at__lte=now).update(status=Assignment.Status.EXPIRED)
            if not changed:
                continue
            task.live_count -= 1
            if task.status == Task.Status.FULL:
                task.status = Task.Status.OPEN
            task.save(update_fields=["live_count", "status"])
            expired += 1
    if expired:
        logger.info("leases expired", extra={"count": expired})
    return expired


def assignment_revive(*, assignment: Assignment, task: Task, now: datetime) -> None:
    """Take an expired lease back for a late submission, if its task still has a free slot.

    The task row must be locked by the caller.
    """
    if task.live_count >= task.overlap:
        raise Conflict("Your lease expired and the task went to another expert; your draft is kept "
                       "but cannot be submitted.", code="lease_lost")
    assignment.slot = free_slot(task)
    assignment.status = Assignment.Status.LEASED
    assignment.expires_at = now + timedelta(seconds=task.project.lease_timeout_s)
    assignment.save(update_fields=["slot", "status", "expires_at"])
    task.live_count += 1
    if task.live_count >= task.overlap:
        task.status = Task.Status.FULL
    task.save(update_fields=["live_count", "status"])


__all__ = ["assignment_claim_next", "assignment_revive", "lease_extend", "leases_expire", "task_lock"]
