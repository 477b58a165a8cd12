"""Celery tasks for agreement reports: thin wrappers that take ids, refetch and call one service."""
from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from annotation.agreement.services import (
    TRANSIENT_ERRORS,
    agreement_report_compute,
    agreement_report_process,
    agreement_report_request_for,
)
from annotation.models import JudgeRun, Project

__all__ = ["agreement_report_compute_task", "agreement_report_request_task"]


@shared_task(bind=True, name="annotation.agreement_report_compute", acks_late=True, autoretry_for=TRANSIENT_ERRORS,
             retry_backoff=True, retry_backoff_max=300, max_retries=5, soft_time_limit=900, time_limit=960)
def agreement_report_compute_task(self, *, project_id: int, judge_run_id: int | None = None,
                                  report_id: int | None = None) -> int | None:
    """Compute a project's agreement report; returns the stored report's id (None when nothing was due).

    With `report_id` it fills that pending row (a debounced or on-demand request) and
    does nothing when another delivery already did; without it, it computes a fresh
    report for `judge_run_id` (or the default run) right away.
    """
    now = timezone.now()
    if report_id is not None:
        report = agreement_report_process(report_id=report_id, now=now, attempt_id=self.request.id or "")
        return None if report is None else report.pk
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return None
    run = None
    if judge_run_id is not None:
        run = JudgeRun.objects.filter(pk=judge_run_id, project=project).first()
        if run is None:
            return None
    return agreement_report_compute(project=project, judge_run=run, now=now).pk


# coalesce: a drain asks once per project for its rows, last; lock_order: it may lock the project,
# 3rd in annotation.lock_objects' order.
@shared_task(name="annotation.agreement_report_request", acks_late=True, batchable=True, coalesce=True, lock_order=3,
             autoretry_for=TRANSIENT_ERRORS, retry_backoff=True, max_retries=5, soft_time_limit=30, time_limit=60)
def agreement_report_request_task(*, project_id: int) -> int | None:
    """Labels arrived in `project_id`: ask for a debounced recompute; returns the pending report's id."""
    return agreement_report_request_for(project_id=project_id, now=timezone.now())
