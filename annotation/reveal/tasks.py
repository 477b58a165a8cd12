"""Celery task of the reveal: rewrite a project's consensus after its label choice changed."""
from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from annotation.reveal.services import consensus_recompute_project

__all__ = ["consensus_recompute_project_task"]


@shared_task(name="annotation.consensus_recompute_project", acks_late=True, soft_time_limit=600, time_limit=660,
             autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5)
def consensus_recompute_project_task(*, project_id: int) -> int:
    """Thin and idempotent: a redelivery rewrites the same rows."""
    return consensus_recompute_project(project_id=project_id, now=timezone.now())
