"""Export records and export jobs: every export leaves one, a large one is built by a worker.

A streamed download writes its record (delivery `stream`) before the first byte and its
row count after the last. A job (delivery `file`) is built by the Celery task
`annotation.export_build` into RUBRICA_EXPORT_DIR, reporting progress per chunk of
tasks; only its owner can download it, while they still manage the project, and only
until `expires_at` (RUBRICA_EXPORT_TTL_HOURS after it was asked for).
"""
import logging
import os
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.exchange.export import ExportFilters, export_tasks
from annotation.exchange.export_formats import FORMATS, dataset_export, export_format_check
from annotation.models import ExportJob, Project
from annotation.selectors import project_get_for_user
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
        task_send_on_commit(EXPORT_BUILD, job_id=job.pk)
    logger.info("export job queued", extra={"job_id": job.pk, "project_id": project.pk, "format": fmt})
    return job


def export_stream_start(*, project: Project, owner: User, fmt: str, filters: ExportFilters,
                        now: datetime) -> tuple[ExportJob, Iterator[bytes]]:
    """Record a streamed export and return it with its bytes; the row count is stored after the last byte."""
    export_format_check(fmt=fmt)
    job = ExportJob.objects.create(
        project=project, owner=owner, fmt=fmt, filters=filters.as_json(), delivery=ExportJob.Delivery.STREAM,
        status=ExportJob.Status.RUNNING, created_at=now, expires_at=now)

    def finished(count: int) -> None:
        ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.DONE, row_count=count,
                                                   finished_at=timezone.now())

    return job, dataset_export(project=project, filters=filters, fmt=fmt, snapshot_id=str(job.snapshot_id),
                               counter=finished)


def export_job_build(*, job_id: int) -> ExportJob | None:
    """Build a pending export job's file; a job already taken up or gone is left alone (idempotent)."""
    claimed = ExportJob.objects.filter(pk=job_id, status=ExportJob.Status.PENDING).update(
        status=ExportJob.Status.RUNNING)
    job = ExportJob.objects.select_related("project").filter(pk=job_id).first()
    if job is None or not claimed:
        return job
    directory = Path(settings.RUBRICA_EXPORT_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{job.snapshot_id}.{FORMATS[job.fmt][1]}"
    partial = target.with_name(target.name + ".part")
    total = job.progress_total

    def progress(done: int) -> None:
        ExportJob.objects.filter(pk=job.pk).update(progress_done=min(done, total))

    counted: list[int] = []
    try:
        with partial.open("wb") as sink:
            for chunk in dataset_export(project=job.project, filters=_filters_from_json(job.filters), fmt=job.fmt,
                                        snapshot_id=str(job.snapshot_id), counter=counted.append,
                                        progress=progress):
                sink.write(chunk)
        os.replace(partial, target)
    except Exception as exc:
        partial.unlink(missing_ok=True)
        ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.FAILED, error=str(exc)[:2000],
                                                   finished_at=timezone.now())
        logger.exception("export job failed", extra={"job_id": job.pk})
        raise
    ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.DONE, progress_done=total,
                                               row_count=counted[0] if counted else 0, file_path=str(target),
                                               finished_at=timezone.now())
    logger.info("export job built", extra={"job_id": job.pk, "rows": counted[0] if counted else 0})
    job.refresh_from_db()
    return job


def export_job_get_for_user(user: User, job_id) -> ExportJob:
    """The user's own export job in a project they still manage, else NotFound (also for another user's id)."""
    try:
        job = ExportJob.objects.select_related("project").get(pk=int(job_id), owner=user)
    except (ExportJob.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such export.") from None
    project_get_for_user(user, job.project_id, manage=True)
    return job


def export_job_list_for_user(project: Project, user: User, *, limit: int = 10) -> list[ExportJob]:
    """The user's latest export jobs (files, not streamed downloads) in this project."""
    return list(ExportJob.objects.filter(project=project, owner=user, delivery=ExportJob.Delivery.FILE)
                .order_by("-created_at", "-pk")[:limit])


def export_job_file(*, job: ExportJob, now: datetime) -> Path:
    """The file of a finished, unexpired job; a clear error otherwise."""
    if job.expires_at <= now:
        raise DomainError("This export has expired.", code=ErrorCode.EXPORT_EXPIRED, status=410,
                          params={"expired": timezone.localtime(job.expires_at).strftime("%Y-%m-%d %H:%M")})
    if job.status != ExportJob.Status.DONE or not job.file_path:
        raise DomainError("This export is not ready yet.", code=ErrorCode.EXPORT_NOT_READY, status=409,
                          params={"status": job.get_status_display()})
    path = Path(job.file_path)
    if not path.is_file():
        raise NotFound("The export file is gone.")
    return path
