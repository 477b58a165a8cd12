"""Starting higher-app work from annotation without importing it: Celery tasks sent by name."""
from celery import current_app
from django.db import transaction


def task_send_on_commit(name: str, *args) -> None:
    """Queue task `name` once the current transaction commits (eagerly in the embedded mode)."""

    def send() -> None:
        task = current_app.tasks.get(name)
        if task is None:
            current_app.send_task(name, args=list(args))
        else:
            task.apply_async(args=list(args))

    transaction.on_commit(send)
