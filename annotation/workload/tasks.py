"""Celery task of the batch operations: a thin wrapper over `batch_job_run`."""
from celery import shared_task
from django.db import OperationalError

from annotation.workload.jobs import batch_job_run

__all__ = ["batch_job_run_task"]


# A lost connection or a deadlock rolls the whole batch back and leaves the job queued: trying
# again is safe. The job's row lock and status make a second delivery a no-op.
@shared_task(name="annotation.batch_job_run", acks_late=True, soft_time_limit=1800, time_limit=1900,
             autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3)
def batch_job_run_task(*, job_id: int) -> str:
    """Apply queued batch job `job_id`; returns its status."""
    return batch_job_run(job_id=job_id)
