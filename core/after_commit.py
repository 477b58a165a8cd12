"""The one way to start follow-up work: a Celery task sent by name once the transaction commits.

Sending by name lets a lower app start a higher app's work (a submission earns money)
without importing it. With `CELERY_TASK_ALWAYS_EAGER` (the embedded mode and the tests)
a registered task runs in-process right after the commit.
"""
from typing import Any

from celery import current_app
from django.db import transaction


def task_send(name: str, *, countdown: float | None = None, **kwargs: Any) -> None:
    """Send task `name` with keyword arguments `kwargs` now: for a task that queues its own
    next step, which holds no transaction whose commit the step must wait for.

    `countdown` delays it by that many seconds.
    """
    task = current_app.tasks.get(name)
    if task is None:
        current_app.send_task(name, kwargs=kwargs, countdown=countdown)
    else:
        task.apply_async(kwargs=kwargs, countdown=countdown)


def task_send_on_commit(name: str, *, countdown: float | None = None, **kwargs: Any) -> None:
    """Queue task `name` with keyword arguments `kwargs` once the current transaction commits.

    Outside a transaction the task is sent at once. `countdown` delays it by that many seconds.
    """
    transaction.on_commit(lambda: task_send(name, countdown=countdown, **kwargs))
