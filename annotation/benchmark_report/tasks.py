"""Celery task of the benchmark quality report: a thin wrapper that takes ids, refetches and calls one service."""
from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from annotation.benchmark_report.services import TASK_NAME, TRANSIENT_ERRORS, benchmark_report_process

__all__ = ["benchmark_report_compute_task"]


@shared_task(name=TASK_NAME, acks_late=True, autoretry_for=TRANSIENT_ERRORS, retry_backoff=True,
             retry_backoff_max=300, max_retries=5, soft_time_limit=900, time_limit=960)
def benchmark_report_compute_task(*, project_id: int, report_id: int) -> int | None:
    """Fill the pending benchmark report `report_id`; returns its id, None when nothing was due."""
    report = benchmark_report_process(report_id=report_id, now=timezone.now())
    return None if report is None else report.pk
