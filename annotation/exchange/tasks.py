"""Celery tasks of dataset exports (thin wrappers over `export_job_build` and `exports_sweep`) and
of question imports (writing the search rows an import leaves to them)."""
from celery import shared_task
from django.db import OperationalError, connection
from django.utils import timezone

from annotation.exchange.export_jobs import export_job_build, exports_sweep
from annotation.models import Question, QuestionSearch
from annotation.models.project import question_search_rows

__all__ = ["export_build_task", "exports_sweep_task", "question_search_index_task", "question_search_merge_task"]

SEARCH_INDEX = "annotation_questionsearch_text_trgm"
# Questions read, and search rows written, per statement.
SEARCH_BATCH = 1000


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


@shared_task(name="annotation.question_search_index", acks_late=True, soft_time_limit=900, time_limit=960,
             autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3)
def question_search_index_task() -> int:
    """Write the search rows of questions that have none yet (an import's), then merge the search
    index's pending entries into the index proper; returns the rows written.

    Idempotent: a second run finds nothing to write. Rows go in batches of `SEARCH_BATCH`
    questions, each its own transaction, so a long backlog shows progress on the board and a
    question edited meanwhile keeps the row its edit wrote (ON CONFLICT DO NOTHING).
    """
    written = 0
    after = 0
    while True:
        batch = list(Question.objects.filter(pk__gt=after, search__isnull=True).order_by("pk")
                     .only("pk", "dialogue", "final_user_turn")[:SEARCH_BATCH])
        if not batch:
            break
        QuestionSearch.objects.bulk_create(question_search_rows(batch), ignore_conflicts=True)
        written += len(batch)
        after = batch[-1].pk
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT gin_clean_pending_list(%s::regclass)", [SEARCH_INDEX])
    return written


@shared_task(name="annotation.question_search_merge", acks_late=True, soft_time_limit=900, time_limit=960,
             autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3)
def question_search_merge_task() -> int:
    """The name an import queued before migration 0042: it now does `question_search_index_task`'s work."""
    return question_search_index_task()
