"""Celery tasks of the annotation app: thin, idempotent wrappers over services."""
from celery import shared_task
from django.utils import timezone

from annotation.assignment.services import leases_expire


@shared_task(name="annotation.expire_leases", acks_late=True, soft_time_limit=60, time_limit=90)
def expire_leases() -> int:
    """Return overdue leases to the pool (beat runs it every minute; claims also sweep)."""
    total = 0
    while (n := leases_expire(now=timezone.now())) > 0:
        total += n
    return total
