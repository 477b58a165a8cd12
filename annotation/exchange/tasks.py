"""Celery tasks of dataset exports: thin wrappers over `export_job_build` and `exports_sweep`."""
from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from annotation.exchange.export_jobs import export_job_build, exports_sweep

__all__ = ["export_build_task", "exports_sweep_task"]


@shared_task(name="annotation.export_build", acks_late=True, soft_time_limit=1800, time_limit=1900,
             autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3)
def export_build_task(*, job_id: int) -> str:
    """Build export job `job_id`'s file; returns its status."""
    job = export_job_build(job_id=job_id)
    return "gone" if job is None else job.status


@shared_task(name="annotation.exports_sweep", autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3)
def exports_sweep_task() -> dict[str, int]:
    """Delete expired export files and leftovers; mark exports that stopped silently as failed."""
    return exports_sweep(now=timezone.now())
