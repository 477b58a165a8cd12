"""Celery task of consultations: the beat reveals blind votes whose deadline has passed."""
from __future__ import annotations

from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from annotation.consultations.services import consultations_reveal_due

__all__ = ["consultations_reveal_due_task"]


@shared_task(name="annotation.consultations_reveal_due", acks_late=True, autoretry_for=(OperationalError,),
             retry_backoff=True, max_retries=5, soft_time_limit=120, time_limit=150)
def consultations_reveal_due_task() -> int:
    """Reveal every consultation past its deadline (reads reveal them too); returns how many."""
    return consultations_reveal_due(now=timezone.now())
