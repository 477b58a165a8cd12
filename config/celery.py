"""The Celery application; tasks are discovered in each app's tasks.py."""
import os

from celery import Celery
from celery.signals import beat_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("rubrica")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def _refuse_unsafe_keys(**kwargs) -> None:
    """A worker or beat with unsafe keys stops before it takes any task (core.checks)."""
    from core.checks import startup_refuse_unsafe

    startup_refuse_unsafe()
