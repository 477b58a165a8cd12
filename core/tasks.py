"""Celery tasks of core: the outbox sweep and the batch of a transaction's follow-up work."""
from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from core.after_commit import FOLLOW_UPS_DRAIN_TASK, FOLLOW_UPS_TASK
from core.outbox import follow_ups_drain, follow_ups_run, outbox_sweep


@shared_task(name="core.outbox_sweep", acks_late=True,  # type: ignore[untyped-decorator]
             autoretry_for=(OperationalError, InterfaceError), retry_backoff=True, max_retries=3,
             soft_time_limit=120, time_limit=180)
def outbox_sweep_task() -> int:
    """Send again the follow-up work a broker outage or a lost worker left pending (beat)."""
    return outbox_sweep(now=timezone.now())


@shared_task(bind=True, name=FOLLOW_UPS_TASK, acks_late=True, ignore_result=True,  # type: ignore[untyped-decorator]
             autoretry_for=(OperationalError, InterfaceError), retry_backoff=True, retry_backoff_max=600,
             retry_jitter=True, max_retries=8, soft_time_limit=120, time_limit=180)
def follow_ups_run_task(self: Any, *, steps: list[list[Any]]) -> int:
    """Run the follow-up tasks one transaction asked for (a submission's earning, tier rules,
    review rules, agreement request), in order, once (`core.outbox.follow_ups_run`)."""
    return follow_ups_run(steps=steps, task_id=self.request.id, now=timezone.now())


@shared_task(name=FOLLOW_UPS_DRAIN_TASK, acks_late=True, ignore_result=True,  # type: ignore[untyped-decorator]
             autoretry_for=(OperationalError, InterfaceError), retry_backoff=True, retry_backoff_max=600,
             retry_jitter=True, max_retries=8, soft_time_limit=120, time_limit=180)
def follow_ups_drain_task() -> int:
    """Run every pending batch of follow-up work, oldest first (`core.outbox.follow_ups_drain`)."""
    return follow_ups_drain()
