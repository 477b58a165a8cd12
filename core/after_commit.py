"""The one way to start follow-up work: a Celery task sent by name once the transaction commits.

Sending by name lets a lower app start a higher app's work (a submission earns money)
without importing it. With `CELERY_TASK_ALWAYS_EAGER` (the embedded mode and the tests)
a registered task runs in-process right after the commit.
"""
from typing import Any

from celery import current_app
from django.db import transaction


def task_send_on_commit(name: str, *args: Any, countdown: float | None = None, **kwargs: Any) -> None:
    """Queue task `name` with `args` and `kwargs` once the current transaction commits.

    Outside a transaction the task is sent at once. `countdown` delays it by that many seconds.
    Positional arguments stay accepted because every caller moved here from
    `annotation.outbox` passes the task's ids positionally.
    """

    def send() -> None:
        task = current_app.tasks.get(name)
        if task is None:
            current_app.send_task(name, args=list(args), kwargs=kwargs, countdown=countdown)
        else:
            task.apply_async(args=list(args), kwargs=kwargs, countdown=countdown)

    transaction.on_commit(send)
