"""Celery tasks of the review: the flag check after a submission, and the reminders beat."""
from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from annotation.review.rules import review_flags_check

__all__ = ["review_flags_check_task"]


@shared_task(name="annotation.review_flags_check", acks_late=True, soft_time_limit=30, time_limit=60,
             autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5)
def review_flags_check_task(*, assignment_id: int) -> int:
    """Flag a submission that trips a review rule; returns how many new flags were written."""
    return review_flags_check(assignment_id=assignment_id, now=timezone.now())
