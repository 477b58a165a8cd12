"""Row locks, always taken in one order to keep concurrent requests free of deadlocks.

Lock order: task, then its assignments (by pk). A function that needs both calls
`task_lock` first.
"""
from annotation.models import Assignment, Task


def task_lock(task_id: int) -> Task:
    return Task.objects.select_for_update(of=("self",)).get(pk=task_id)


def task_lock_or_skip(task_id: int) -> Task | None:
    """The locked task, or None when another transaction holds it (SKIP LOCKED)."""
    return Task.objects.select_for_update(skip_locked=True, of=("self",)).filter(pk=task_id).first()


def assignment_lock(assignment_id: int) -> Assignment:
    return Assignment.objects.select_for_update(of=("self",)).get(pk=assignment_id)
