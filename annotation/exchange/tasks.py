"""Celery tasks of dataset exports (thin wrappers over `export_job_build` and `exports_sweep`) and
of question imports (merging the search index's pending entries)."""
from celery import shared_task
from django.db import OperationalError, connection
from django.utils import timezone

from annotation.exchange.export_jobs import export_job_build, exports_sweep

__all__ = ["export_build_task", "exports_sweep_task", "question_search_merge_task"]

SEARCH_INDEX = "annotation_question_search_text_trgm"


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


@shared_task(name="annotation.question_search_merge", acks_late=True, soft_time_limit=600, time_limit=660,
             autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3)
def question_search_merge_task() -> int:
    """Merge the board search index's pending entries (written by an import) into the index proper;
    returns the pages merged. Idempotent: a second run finds nothing pending. Nothing on SQLite."""
    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list(%s::regclass)", [SEARCH_INDEX])
        return int(cursor.fetchone()[0])
