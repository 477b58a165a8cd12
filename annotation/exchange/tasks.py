"""Celery task of dataset exports: a thin wrapper over `export_job_build`."""
from celery import shared_task
from django.db import OperationalError

from annotation.exchange.export_jobs import export_job_build

__all__ = ["export_build_task"]


@shared_task(name="annotation.export_build", acks_late=True, soft_time_limit=1800, time_limit=1900,
             autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3)
def export_build_task(*, job_id: int) -> str:
    """Build export job `job_id`'s file; returns its status."""
    job = export_job_build(job_id=job_id)
    return "gone" if job is None else job.status
