"""Confirmed batch operations on tasks, applied once: in the request for a small set, by a worker for a large one.

The confirmation page carries a token; the confirming post writes one `BatchJob` per
(PM, token), so a second post of the same confirmation (a double click, a reload, a
replayed form) finds the first job and applies nothing more.

* At most `BATCH_SYNC_MAX_TASKS` tasks (submissions, for a rejection): the job row and the
  operation commit together in the request (`batch_run_now`); a refusal rolls both back.
* More: the job is queued (`batch_job_queue`) and a worker applies it (`batch_job_run`) in
  one transaction that also holds the job's row lock and marks it done, so a second delivery
  of the task waits, then finds it done; a refusal or a crash rolls everything back and the
  job is marked failed (or stays queued for a retry after a lost connection). Progress goes to
  the cache after each slice of tasks, since the transaction's own rows are invisible until
  it commits; the job page polls it.
"""
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.audit.services import _jsonable
from annotation.lock_objects import batch_job_lock
from annotation.models import BatchJob, Project
from annotation.workload.batch import (
    TaskFilter,
    batch_assign,
    batch_mark_golden,
    batch_raise_overlap,
    batch_reject,
    batch_set_priority,
    experts_of_project,
)
from core.after_commit import task_send_on_commit
from core.errors import DomainError
from core.request_id import request_id_bound, request_id_current
from experts.models import User

logger = logging.getLogger(__name__)

TOKEN_MAX = 64
PROGRESS_TTL_S = 6 * 3600


def sync_max() -> int:
    """The largest set applied in the request; a larger one goes to a worker."""
    return int(getattr(settings, "BATCH_SYNC_MAX_TASKS", 500))


@dataclass(frozen=True)
class BatchRequest:
    """A confirmed operation on a project's filtered tasks (for a rejection, `value` is the reason the
    experts read, `reason_code` its kind, and `experts` narrows the set to theirs)."""

    op: str
    task_filter: TaskFilter
    value: str = ""
    experts: tuple[int, ...] = ()
    reason_code: str = ""

    def params(self) -> dict[str, Any]:
        return {**self.task_filter.as_fields(), "value": self.value, "experts": list(self.experts),
                "reason_code": self.reason_code}

    @classmethod
    def from_job(cls, job: BatchJob) -> "BatchRequest":
        params = job.params
        return cls(op=job.op, task_filter=TaskFilter.from_data(params), value=str(params.get("value", "")),
                   experts=tuple(int(e) for e in params.get("experts", [])),
                   reason_code=str(params.get("reason_code", "")))


def _apply(*, project: Project, by: User, request: BatchRequest, now: datetime, progress=None) -> int:
    f = request.task_filter
    if request.op == BatchJob.Op.GOLDEN:
        return batch_mark_golden(project=project, task_filter=f, by=by, progress=progress)
    if request.op == BatchJob.Op.OVERLAP:
        return batch_raise_overlap(project=project, task_filter=f, overlap=request.value, by=by, progress=progress)
    if request.op == BatchJob.Op.PRIORITY:
        return batch_set_priority(project=project, task_filter=f, priority=request.value, by=by, progress=progress)
    if request.op == BatchJob.Op.REJECT:
        named = [e.pk for e in experts_of_project(project, list(request.experts))] if request.experts else []
        return batch_reject(project=project, task_filter=f, expert_ids=named, reason_code=request.reason_code,
                            reason=request.value, by=by, now=now, progress=progress)
    experts = experts_of_project(project, list(request.experts))
    return batch_assign(project=project, task_filter=f, experts=experts, by=by, now=now, progress=progress)


def _clean_token(token: str) -> str:
    return str(token or "").strip()[:TOKEN_MAX]


def batch_job_find(*, by: User, token: str) -> BatchJob | None:
    token = _clean_token(token)
    return BatchJob.objects.filter(created_by=by, token=token).first() if token else None


def _new_job(*, project: Project, by: User, request: BatchRequest, token: str, total: int, now: datetime) -> BatchJob:
    return BatchJob.objects.create(project=project, created_by=by, token=token, op=request.op,
                                   params=request.params(), total=total, created_at=now,
                                   request_id=request_id_current())


def batch_run_now(*, project: Project, by: User, request: BatchRequest, token: str, total: int,
                  now: datetime) -> tuple[BatchJob, bool]:
    """Apply a small batch in this request; returns (job, True), or (the earlier job, False) when
    this token was confirmed before. A refusal raises and leaves no job and no change."""
    token = _clean_token(token)
    try:
        with transaction.atomic():
            job = _new_job(project=project, by=by, request=request, token=token, total=total, now=now)
            job.changed = _apply(project=project, by=by, request=request, now=now)
            job.status = BatchJob.Status.DONE
            job.finished_at = timezone.now()
            job.save(update_fields=["changed", "status", "finished_at"])
    except IntegrityError:
        earlier = batch_job_find(by=by, token=token)
        if earlier is None:
            raise
        return earlier, False
    return job, True


def batch_job_queue(*, project: Project, by: User, request: BatchRequest, token: str, total: int,
                    now: datetime) -> tuple[BatchJob, bool]:
    """Queue a large batch for a worker; returns (job, True), or (the earlier job, False) for a token
    confirmed before."""
    token = _clean_token(token)
    try:
        with transaction.atomic():
            job = _new_job(project=project, by=by, request=request, token=token, total=total, now=now)
    except IntegrityError:
        earlier = batch_job_find(by=by, token=token)
        if earlier is None:
            raise
        return earlier, False
    task_send_on_commit("annotation.batch_job_run", job_id=job.pk)
    return job, True


def _progress_key(job_id: int) -> str:
    return f"batch-job:{job_id}:done"


def batch_job_progress(job: BatchJob) -> int:
    """How many of the job's tasks the worker went through so far (all of them once done)."""
    if job.status == BatchJob.Status.DONE:
        return job.total
    if job.status == BatchJob.Status.FAILED:
        return 0
    return min(int(cache.get(_progress_key(job.pk)) or 0), job.total)


def batch_job_run(*, job_id: int) -> str:
    """Apply queued job `job_id` once, in one transaction; returns its status ("gone" when missing).

    A job that is not queued any more (done, failed, a second delivery) is left as it is.
    """
    try:
        with transaction.atomic():
            job = batch_job_lock(job_id)
            if job is None:
                return "gone"
            if job.status != BatchJob.Status.QUEUED:
                return job.status

            def progress(done: int, total: int) -> None:
                cache.set(_progress_key(job_id), done, PROGRESS_TTL_S)

            with request_id_bound(job.request_id):
                changed = _apply(project=job.project, by=job.created_by, request=BatchRequest.from_job(job),
                                 now=timezone.now(), progress=progress)
            BatchJob.objects.filter(pk=job_id).update(status=BatchJob.Status.DONE, changed=changed,
                                                      finished_at=timezone.now())
    except DomainError as exc:
        BatchJob.objects.filter(pk=job_id, status=BatchJob.Status.QUEUED).update(
            status=BatchJob.Status.FAILED, error_code=str(exc.code)[:64], error_params=_jsonable(exc.params),
            error_message=exc.message, finished_at=timezone.now())
        logger.info("batch job refused", extra={"job_id": job_id, "code": exc.code})
        return BatchJob.Status.FAILED
    finally:
        cache.delete(_progress_key(job_id))
    logger.info("batch job done", extra={"job_id": job_id, "changed": changed})
    return BatchJob.Status.DONE


def batch_job_error(job: BatchJob) -> DomainError | None:
    """Why a failed job changed nothing, as the error it raised."""
    if job.status != BatchJob.Status.FAILED:
        return None
    return DomainError(job.error_message, code=job.error_code or None, params=dict(job.error_params or {}))
