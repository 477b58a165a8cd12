"""Celery tasks of core: the outbox sweep."""
from celery import shared_task
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from core.outbox import outbox_sweep


@shared_task(name="core.outbox_sweep", acks_late=True,  # type: ignore[untyped-decorator]
             autoretry_for=(OperationalError, InterfaceError), retry_backoff=True, max_retries=3,
             soft_time_limit=120, time_limit=180)
def outbox_sweep_task() -> int:
    """Send again the follow-up work a broker outage or a lost worker left pending (beat)."""
    return outbox_sweep(now=timezone.now())
