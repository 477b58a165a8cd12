"""Export records and export jobs: every export leaves one, a large one is built by a worker.

A streamed download writes its record (delivery `stream`) before the first byte and its
row count after the last; a download the client abandons is marked failed when the
server closes it. A job (delivery `file`) is built by the Celery task
`annotation.export_build` into RUBRICA_EXPORT_DIR, reporting progress per chunk of
tasks; only its owner can download it, while they still manage the project, and only
until `expires_at` (RUBRICA_EXPORT_TTL_HOURS after it was asked for). Either way the
rows come from one consistent read (`snapshot.consistent_read`), whose database
snapshot is recorded as `db_snapshot`.

`exports_sweep` (beat, `annotation.exports_sweep`) deletes the files of expired jobs and
leftover partial files, and marks failed the exports that stopped without saying so (a
worker killed mid-build, a download whose server process went away).
"""
import logging
import os
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.audit.services import audit_record
from annotation.exchange.export import ExportFilters, export_tasks
from annotation.exchange.export_formats import FORMATS, dataset_export, export_format_check
from annotation.exchange.snapshot import (
    consistent_read,
    export_progress_clear,
    export_progress_get,
    export_progress_set,
)
from annotation.models import AuditAction, ExportJob, Project, WebhookEvent
from annotation.selectors import project_get_for_user
from annotation.webhooks.services import webhook_emit
from core.after_commit import task_send_on_commit
from core.error_codes import ErrorCode
from core.errors import DomainError, NotFound
from experts.models import User

logger = logging.getLogger(__name__)

EXPORT_BUILD = "annotation.export_build"
ACTIVE = (ExportJob.Status.PENDING, ExportJob.Status.RUNNING)


def _filters_from_json(data: dict) -> ExportFilters:
    after = data.get("submitted_after")
    return ExportFilters(**{**data, "submitted_after": datetime.fromisoformat(after).date() if after else None})


def export_job_create(*, project: Project, owner: User, fmt: str, filters: ExportFilters,
                      now: datetime) -> ExportJob:
    """Record an export to be built as a file and queue its build once this transaction commits."""
    export_format_check(fmt=fmt)
    with transaction.atomic():
        job = ExportJob.objects.create(
            project=project, owner=owner, fmt=fmt, filters=filters.as_json(), delivery=ExportJob.Delivery.FILE,
            progress_total=export_tasks(project=project, filters=filters).count(), created_at=now,
            expires_at=now + timedelta(hours=settings.RUBRICA_EXPORT_TTL_HOURS))
        audit_record(actor=owner, action=AuditAction.EXPORT, project_id=project.pk, objects=[job], now=now,
                     details={"format": fmt, "delivery": job.delivery, "filters": job.filters})
        task_send_on_commit(EXPORT_BUILD, job_id=job.pk)
    logger.info("export job queued", extra={"job_id": job.pk, "project_id": project.pk, "format": fmt})
    return job


ABANDONED = "The download stopped before its last byte: the client went away or the export failed."
INTERRUPTED = "Interrupted: the export stopped before finishing (its worker or server process went away)."
# A job running longer than the build task's hard time limit (1,900 s) has lost its worker.
RUNNING_STALE = timedelta(hours=1)
# A streamed download left "running" this long lost its server process.
STREAM_STALE = timedelta(hours=6)


def export_stream_start(*, project: Project, owner: User, fmt: str, filters: ExportFilters,
                        now: datetime) -> tuple[ExportJob, Iterator[bytes]]:
    """Record a streamed export and return it with its bytes; the outcome is stored when the bytes end.

    The bytes come from one consistent read. When the server closes the stream early (the
    client went away, an error), the record says so instead of staying "running".
    """
    export_format_check(fmt=fmt)
    with transaction.atomic():
        job = ExportJob.objects.create(
            project=project, owner=owner, fmt=fmt, filters=filters.as_json(), delivery=ExportJob.Delivery.STREAM,
            status=ExportJob.Status.RUNNING, created_at=now, started_at=now, expires_at=now)
        audit_record(actor=owner, action=AuditAction.EXPORT, project_id=project.pk, objects=[job], now=now,
                     details={"format": fmt, "delivery": job.delivery, "filters": job.filters})

    def chunks() -> Iterator[bytes]:
        counted: list[int] = []
        snapshot, finished = "", False
        try:
            with consistent_read() as snapshot:
                yield from dataset_export(project=project, filters=filters, fmt=fmt, snapshot_id=str(job.snapshot_id),
                                          counter=counted.append)
            finished = True
        finally:
            # Written after the read-only transaction has ended, in autocommit.
            outcome = ({"status": ExportJob.Status.DONE, "row_count": counted[0] if counted else 0} if finished
                       else {"status": ExportJob.Status.FAILED, "error": ABANDONED})
            ExportJob.objects.filter(pk=job.pk, status=ExportJob.Status.RUNNING).update(
                db_snapshot=snapshot, finished_at=timezone.now(), **outcome)
            if not finished:
                logger.warning("export stream abandoned", extra={"job_id": job.pk, "format": fmt})

    return job, chunks()


def export_job_build(*, job_id: int) -> ExportJob | None:
    """Build a pending export job's file; a job already taken up or gone is left alone (idempotent)."""
    claimed = ExportJob.objects.filter(pk=job_id, status=ExportJob.Status.PENDING).update(
        status=ExportJob.Status.RUNNING, started_at=timezone.now())
    job = ExportJob.objects.select_related("project").filter(pk=job_id).first()
    if job is None or not claimed:
        return job
    directory = Path(settings.RUBRICA_EXPORT_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{job.snapshot_id}.{FORMATS[job.fmt][1]}"
    partial = target.with_name(target.name + ".part")
    total = job.progress_total

    def progress(done: int) -> None:
        export_progress_set(job.pk, min(done, total))

    counted: list[int] = []
    snapshot = ""
    try:
        with partial.open("wb") as sink, consistent_read() as snapshot:
            for chunk in dataset_export(project=job.project, filters=_filters_from_json(job.filters), fmt=job.fmt,
                                        snapshot_id=str(job.snapshot_id), counter=counted.append,
                                        progress=progress):
                sink.write(chunk)
        os.replace(partial, target)
    except Exception as exc:
        partial.unlink(missing_ok=True)
        ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.FAILED, error=str(exc)[:2000],
                                                   db_snapshot=snapshot, finished_at=timezone.now())
        export_progress_clear(job.pk)
        logger.exception("export job failed", extra={"job_id": job.pk})
        raise
    finished_at = timezone.now()
    with transaction.atomic():
        ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.DONE, progress_done=total,
                                                   row_count=counted[0] if counted else 0, file_path=str(target),
                                                   db_snapshot=snapshot, finished_at=finished_at)
        webhook_emit(project_id=job.project_id, event=WebhookEvent.EXPORT_READY, now=finished_at,
                     data={"export_job_id": job.pk, "snapshot_id": str(job.snapshot_id), "format": job.fmt,
                           "rows": counted[0] if counted else 0, "expires_at": job.expires_at.isoformat()})
    export_progress_clear(job.pk)
    logger.info("export job built", extra={"job_id": job.pk, "rows": counted[0] if counted else 0})
    job.refresh_from_db()
    return job


def exports_sweep(*, now: datetime) -> dict[str, int]:
    """Housekeeping of exports; returns what it did, by kind. Safe to run at any time, and twice.

    - the file of every expired job is deleted (the record stays, its page says "expired");
    - `.part` files no running job is writing are deleted;
    - a file job running past RUNNING_STALE and a streamed download running past
      STREAM_STALE are marked failed with INTERRUPTED.
    """
    done = {"files_deleted": 0, "partials_deleted": 0, "interrupted": 0}
    for pk, path in (ExportJob.objects.filter(expires_at__lte=now).exclude(file_path="")
                     .values_list("pk", "file_path")):
        Path(path).unlink(missing_ok=True)
        done["files_deleted"] += ExportJob.objects.filter(pk=pk).update(file_path="")
    stale = (ExportJob.objects.filter(status=ExportJob.Status.RUNNING, delivery=ExportJob.Delivery.FILE,
                                      started_at__lte=now - RUNNING_STALE)
             | ExportJob.objects.filter(status=ExportJob.Status.RUNNING, delivery=ExportJob.Delivery.STREAM,
                                        started_at__lte=now - STREAM_STALE))
    for pk in list(stale.values_list("pk", flat=True)):
        done["interrupted"] += ExportJob.objects.filter(pk=pk, status=ExportJob.Status.RUNNING).update(
            status=ExportJob.Status.FAILED, error=INTERRUPTED, finished_at=now)
        export_progress_clear(pk)
    directory = Path(settings.RUBRICA_EXPORT_DIR)
    if directory.is_dir():
        writing = {str(s) for s in ExportJob.objects.filter(status=ExportJob.Status.RUNNING,
                                                            delivery=ExportJob.Delivery.FILE)
                   .values_list("snapshot_id", flat=True)}
        for partial in directory.glob("*.part"):
            if partial.name.split(".", 1)[0] not in writing:
                partial.unlink(missing_ok=True)
                done["partials_deleted"] += 1
    if any(done.values()):
        logger.info("exports swept", extra=done)
    return done


def export_job_get_for_user(user: User, job_id) -> ExportJob:
    """The user's own export job in a project they still manage, else NotFound (also for another user's id)."""
    try:
        job = ExportJob.objects.select_related("project").get(pk=int(job_id), owner=user)
    except (ExportJob.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such export.") from None
    project_get_for_user(user, job.project_id, manage=True)
    if job.status == ExportJob.Status.RUNNING:
        # The worker's progress lives in the cache while its read-only snapshot is open.
        job.progress_done = min(export_progress_get(job.pk, job.progress_done), job.progress_total)
    return job


def export_job_list_for_user(project: Project, user: User, *, limit: int = 10) -> list[ExportJob]:
    """The user's latest export jobs (files, not streamed downloads) in this project."""
    return list(ExportJob.objects.filter(project=project, owner=user, delivery=ExportJob.Delivery.FILE)
                .order_by("-created_at", "-pk")[:limit])


def export_job_file(*, job: ExportJob, now: datetime) -> Path:
    """The file of a finished, unexpired job; a clear error otherwise."""
    if job.expires_at <= now or (job.status == ExportJob.Status.DONE and not job.file_path):
        raise DomainError("This export has expired.", code=ErrorCode.EXPORT_EXPIRED, status=410,
                          params={"expired": timezone.localtime(job.expires_at).strftime("%Y-%m-%d %H:%M")})
    if job.status != ExportJob.Status.DONE or not job.file_path:
        raise DomainError("This export is not ready yet.", code=ErrorCode.EXPORT_NOT_READY, status=409,
                          params={"status": job.get_status_display()})
    path = Path(job.file_path)
    if not path.is_file():
        raise NotFound("The export file is gone.")
    return path
