"""Celery tasks of live judge runs: thin wrappers that take a run id and call the services.

One task walks one run for a time budget, asking about pending tasks one after
another through the run's per-process chat client (its rate limiter spaces this
process's requests; with REDIS_URL set, every process shares one Redis-held budget per
run, see `ratelimit.py`). When the budget is spent it queues a fresh task for the rest,
so no task outlives its time limit, and a redelivered task (acks_late) simply walks on:
finished tasks are never asked again and claims keep two walkers off the same task.
"""
from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import OperationalError
from django.utils import timezone

from annotation.judging.drift import judge_drift_check
from annotation.judging.runs import JUDGE_RUN_STEP
from annotation.judging.walker import judge_claim_lease_s, judge_run_step
from core.after_commit import task_send

__all__ = ["judge_drift_check_task", "judge_run_step_task"]

# Room for the budget plus one last task whose every retry times out.
_SOFT_LIMIT_S = int(settings.RUBRICA_JUDGE_STEP_BUDGET_S + judge_claim_lease_s() / 2) + 30


@shared_task(bind=True, name="annotation.judge_run_step", acks_late=True, soft_time_limit=_SOFT_LIMIT_S,
             time_limit=_SOFT_LIMIT_S + 60, autoretry_for=(OperationalError,), retry_backoff=True,
             retry_backoff_max=300, max_retries=10)
def judge_run_step_task(self, *, run_id: int) -> str:
    """Walk run `run_id` for one budget; queue the next walker if work remains."""
    try:
        step = judge_run_step(run_id=run_id, clock=timezone.now, budget_s=settings.RUBRICA_JUDGE_STEP_BUDGET_S)
    except SoftTimeLimitExceeded:
        # The task in flight keeps its claim until it runs out; a fresh walker takes over then.
        task_send(JUDGE_RUN_STEP, countdown=judge_claim_lease_s(), run_id=run_id)
        return "interrupted"
    if step.state == "more":
        task_send(JUDGE_RUN_STEP, run_id=run_id)
    elif step.state == "wait" and not self.request.is_eager:
        # Other workers hold claims: look again when the first could have run out.
        task_send(JUDGE_RUN_STEP, countdown=step.wait_s, run_id=run_id)
    return step.state


@shared_task(name="annotation.judge_drift_check", acks_late=True, soft_time_limit=120, time_limit=180,
             autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5)
def judge_drift_check_task(*, run_id: int) -> int | None:
    """Compare a finished run with the earlier one sharing its units; returns the drift alert's id, if any."""
    alert = judge_drift_check(run_id=run_id, now=timezone.now())
    return None if alert is None else alert.pk
