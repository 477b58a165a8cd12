"""Celery tasks of the review: the flag check after a submission, and the reminders beat."""
from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from annotation.review.reminders import reminders_send
from annotation.review.rules import review_flags_check

__all__ = ["reminders_send_task", "review_flags_check_task"]


@shared_task(name="annotation.review_flags_check", acks_late=True, batchable=True, soft_time_limit=30, time_limit=60,
             autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5)
def review_flags_check_task(*, assignment_id: int) -> int:
    """Flag a submission that trips a review rule; returns how many new flags were written."""
    return review_flags_check(assignment_id=assignment_id, now=timezone.now())


@shared_task(name="annotation.reminders_send", acks_late=True, soft_time_limit=120, time_limit=180)
def reminders_send_task() -> dict[str, int]:
    """Reminders and risk alerts (beat, every 5 minutes); also puts back returned submissions left unfixed."""
    return reminders_send(now=timezone.now())
