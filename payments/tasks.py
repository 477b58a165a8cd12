"""Celery tasks of the payments app: thin, idempotent wrappers over the ledger and settlement.

`payments.ledger_post_earning` is sent by name from annotation when a submission commits;
`payments.earnings_sweep` (beat) posts whatever a lost task left out, and
`payments.periods_settle_due` (beat) closes periods whose end has passed. Each one
refetches by id and returns early when the work is already done, so a redelivery or
a retry never pays twice.
"""
from celery import shared_task
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from payments.ledger import earnings_sweep, ledger_post_earning
from payments.services import periods_settle_due

# Transient database trouble (a failover, a dropped connection, a lock timeout) is retried.
TRANSIENT = (OperationalError, InterfaceError)


@shared_task(name="payments.ledger_post_earning", acks_late=True, batchable=True, autoretry_for=TRANSIENT,
             retry_backoff=True,
             retry_backoff_max=600, retry_jitter=True, max_retries=8, soft_time_limit=30, time_limit=60)
def ledger_post_earning_task(*, assignment_id: int) -> int | None:
    """Post the earning of one submitted assignment; returns the entry id (None: nothing is payable)."""
    entry = ledger_post_earning(assignment_id=int(assignment_id), now=timezone.now())
    return entry.pk if entry is not None else None


@shared_task(name="payments.earnings_sweep", acks_late=True, autoretry_for=TRANSIENT, retry_backoff=True,
             max_retries=3, soft_time_limit=240, time_limit=300)
def earnings_sweep_task() -> int:
    """Post earnings missing for submitted work (beat); returns how many were posted."""
    return earnings_sweep(now=timezone.now())


@shared_task(name="payments.periods_settle_due", acks_late=True, autoretry_for=TRANSIENT, retry_backoff=True,
             max_retries=3, soft_time_limit=240, time_limit=300)
def periods_settle_due_task() -> list[int]:
    """Close every period whose end has passed (beat); returns the ids of the periods settled."""
    return [s.period.pk for s in periods_settle_due(now=timezone.now())]
