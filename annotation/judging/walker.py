"""Asking the judge: the walker that works through a run's pending results.

A worker *claims* a pending result (a conditional UPDATE that also checks the run is
still going, so a cancelled run is never asked again), asks the judge, and writes
either the labels and `done`, or the error and `failed`; nothing is ever dropped. A
claim runs out after `judge_claim_lease_s()`, long enough for the slowest possible
answer (every retry timing out, twice for the one re-ask), so a crashed worker's task
is taken up again and two live workers never ask about the same task. The walker
(`judge_run_step`) works for a time budget and then hands over to a fresh Celery task,
so one run never outlives a task time limit.

Locks: a JudgeRun row, then JudgeTaskResult rows, never while waiting for the network
(the order is `annotation.lock_objects`).
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F, Min, Q

from annotation.judging.client import ChatClient, Completer, JudgeRequestError, judge_one
from annotation.judging.prompt import JudgeAnswer, JudgeParseError
from annotation.judging.ratelimit import rate_limiter_for_run
from annotation.judging.runs import ACTIVE, ERROR_CLASS_MAX, ERROR_MAX
from annotation.judging.secrets import JudgeKeyError, api_key_resolve
from annotation.lock_objects import judge_result_lock, judge_run_lock
from annotation.models import JudgeLabel, JudgeRun, JudgeTaskResult, WebhookEvent
from annotation.webhooks.services import webhook_emit
from core.after_commit import task_send_on_commit
from rubrics.models import RubricItem

logger = logging.getLogger(__name__)

CHUNK = 50


# --- Asking the judge ----------------------------------------------------------------------

def judge_claim_lease_s() -> float:
    """How long a claim lasts: the slowest answer possible, with every retry timing out, twice."""
    one_ask = (settings.RUBRICA_JUDGE_TIMEOUT_S * (settings.RUBRICA_JUDGE_MAX_RETRIES + 1)
               + settings.RUBRICA_JUDGE_BACKOFF_MAX_S * settings.RUBRICA_JUDGE_MAX_RETRIES)
    return 2 * one_ask + settings.RUBRICA_JUDGE_CLAIM_MARGIN_S


@dataclass
class _ProcessClient:
    fingerprint: str
    client: ChatClient
    secret: str  # kept only to scrub it from error texts a hostile endpoint might echo


# One client (connection pool and rate limiter) per run and worker process: every
# request of this process for the run shares the run's requests-per-second budget.
_clients: OrderedDict[int, _ProcessClient] = OrderedDict()
_clients_lock = threading.Lock()
_CLIENTS_KEPT = 8


def _process_client(run: JudgeRun) -> _ProcessClient:
    secret = api_key_resolve(encrypted=run.api_key_encrypted, env_name=run.api_key_env, project_id=run.project_id)
    temperature, params = _asked_with(run)
    material = "\x00".join(map(str, (
        run.base_url, run.judge_model, secret, run.requests_per_second, temperature,
        json.dumps(params, sort_keys=True), settings.RUBRICA_JUDGE_TIMEOUT_S,
        settings.RUBRICA_JUDGE_MAX_RETRIES, settings.RUBRICA_JUDGE_BACKOFF_BASE_S,
        settings.RUBRICA_JUDGE_BACKOFF_MAX_S)))
    fingerprint = hashlib.sha256(material.encode()).hexdigest()
    with _clients_lock:
        entry = _clients.get(run.pk)
        if entry is not None and entry.fingerprint == fingerprint:
            _clients.move_to_end(run.pk)
            return entry
        if entry is not None:
            entry.client.close()
        client = ChatClient(
            run.base_url, secret, run.judge_model,
            timeout_s=settings.RUBRICA_JUDGE_TIMEOUT_S,
            max_retries=settings.RUBRICA_JUDGE_MAX_RETRIES,
            backoff_base_s=settings.RUBRICA_JUDGE_BACKOFF_BASE_S,
            backoff_max_s=settings.RUBRICA_JUDGE_BACKOFF_MAX_S,
            rate_limiter=rate_limiter_for_run(run_id=run.pk, rps=run.requests_per_second),
            temperature=temperature, extra_body=params,
        )
        entry = _ProcessClient(fingerprint=fingerprint, client=client, secret=secret)
        _clients[run.pk] = entry
        while len(_clients) > _CLIENTS_KEPT:
            _, old = _clients.popitem(last=False)
            old.client.close()
        return entry


def _asked_with(run: JudgeRun) -> tuple[float, dict[str, Any]]:
    """The temperature and extra request fields of the run's judge configuration version (0 and none without)."""
    version = run.config_version
    if version is None:
        return 0.0, {}
    return float(version.temperature), dict(version.params or {})


def _scrub(text: str, secret: str | None) -> str:
    if secret and secret in text:
        text = text.replace(secret, "***")
    return text[:ERROR_MAX]


def judge_task_execute(*, result_id: int, now: datetime, client: Completer | None = None) -> JudgeTaskResult | None:
    """Ask the judge about one pending result's task; record labels and `done`, or the error and `failed`.

    Returns None without asking when the result is not pending, is claimed by another
    worker, or its run is cancelled or finished. `client` replaces the run's own
    (per-process) chat client, for callers that bring their own.
    """
    result = _result_claim(result_id=result_id, now=now)
    if result is None:
        return None
    run, response = result.run, result.task.response
    question = response.question
    # The run's version, not the task's: an untouched task moves to a newer version on publish.
    items = list(RubricItem.objects.filter(version_id=run.rubric_version_id, question_ref=question.external_id)
                 .select_related("dimension").order_by("position"))
    rubric = [{"dimension": item.dimension.name_zh, "score": item.score, "content": item.content} for item in items]
    secret = None
    try:
        if client is None:
            entry = _process_client(run)
            client, secret = entry.client, entry.secret
        template = run.config_version.prompt_template if run.config_version is not None else None
        answer = judge_one(client, question.full_dialogue(), response.text, rubric, template=template)
    except JudgeRequestError as exc:
        return _result_fail(result_id=result_id, error=_scrub(str(exc), secret), error_class=exc.error_class,
                            http_status=exc.status)
    except JudgeParseError as exc:
        return _result_fail(result_id=result_id, error=_scrub(str(exc), secret), error_class="unparseable_answer")
    except JudgeKeyError as exc:
        return _result_fail(result_id=result_id, error=str(exc), error_class="key")
    except ValueError as exc:
        # render_judge_prompt refuses a rubric it cannot render; nothing was sent.
        return _result_fail(result_id=result_id, error=_scrub(str(exc), secret), error_class="bad_rubric")
    except Exception as exc:
        if isinstance(exc, SoftTimeLimitExceeded):
            # The Celery task is out of time: leave the claim to run out, never half-record.
            raise
        # The message of an unexpected error may hold anything; the page gets its class only.
        logger.exception("judge result: unexpected error", extra={"run_id": run.pk, "result_id": result_id})
        return _result_fail(result_id=result_id, error=f"unexpected error: {type(exc).__name__}",
                            error_class="internal")
    return _result_record(result_id=result_id, items=items, answer=answer, secret=secret)


@transaction.atomic
def _result_claim(*, result_id: int, now: datetime) -> JudgeTaskResult | None:
    """Take a pending result up for one ask, unless another worker holds it or the run stopped.

    The row lock makes the check-and-claim atomic; it is released before the request.
    """
    result = judge_result_lock(result_id)
    if result is None or result.status != JudgeTaskResult.Status.PENDING or result.run.status not in ACTIVE:
        return None
    if result.claimed_until is not None and result.claimed_until > now:
        return None
    result.claimed_until = now + timedelta(seconds=judge_claim_lease_s())
    result.attempts += 1
    result.save(update_fields=["claimed_until", "attempts", "updated_at"])
    return result


@transaction.atomic
def _result_record(*, result_id: int, items: list[RubricItem], answer: JudgeAnswer,
                   secret: str | None) -> JudgeTaskResult | None:
    result = judge_result_lock(result_id)
    if result is None or result.status != JudgeTaskResult.Status.PENDING:
        return result  # recorded by a worker whose claim had run out; the first answer stands
    JudgeLabel.objects.bulk_create(
        JudgeLabel(run_id=result.run_id, task_id=result.task_id, rubric_item=item, value=value)
        for item, value in zip(items, answer.detail, strict=True)
    )
    result.status = JudgeTaskResult.Status.DONE
    result.reason = _scrub(answer.reason, secret) if secret else answer.reason
    result.error = result.error_class = ""
    result.http_status = None
    result.claimed_until = None
    result.save(update_fields=["status", "reason", "error", "error_class", "http_status", "claimed_until",
                               "updated_at"])
    return result


@transaction.atomic
def _result_fail(*, result_id: int, error: str, error_class: str,
                 http_status: int | None = None) -> JudgeTaskResult | None:
    result = judge_result_lock(result_id)
    if result is None or result.status != JudgeTaskResult.Status.PENDING:
        return result
    result.status = JudgeTaskResult.Status.FAILED
    result.error = error[:ERROR_MAX]
    result.error_class = error_class[:ERROR_CLASS_MAX]
    result.http_status = http_status
    result.claimed_until = None
    result.save(update_fields=["status", "error", "error_class", "http_status", "claimed_until", "updated_at"])
    logger.info("judge result failed", extra={"run_id": result.run_id, "task_id": result.task_id,
                                              "error_class": error_class, "http_status": http_status, "error": error})
    return result


# --- Walking a run -------------------------------------------------------------------------

@dataclass(frozen=True)
class JudgeStep:
    """What a walker left behind: `finished`, `stopped` (cancelled or gone), `more` to do, or
    `wait` `wait_s` seconds for tasks other workers hold claims on."""

    state: Literal["finished", "stopped", "more", "wait"]
    wait_s: float = 0.0


def judge_run_step(*, run_id: int, clock: Callable[[], datetime], budget_s: float) -> JudgeStep:
    """Ask about the run's pending tasks in order, one at a time, for up to `budget_s` seconds.

    Stops as soon as the run is cancelled (the claim of each task checks), and marks
    the run done (or failed, when some tasks failed) once nothing is pending.
    """
    started = time.monotonic()
    JudgeRun.objects.filter(pk=run_id, status=JudgeRun.Status.PENDING, started_at__isnull=True).update(
        status=JudgeRun.Status.RUNNING, started_at=clock())
    JudgeRun.objects.filter(pk=run_id, status=JudgeRun.Status.PENDING).update(status=JudgeRun.Status.RUNNING)
    run = JudgeRun.objects.filter(pk=run_id).first()
    if run is None or run.status != JudgeRun.Status.RUNNING:
        return JudgeStep("stopped")
    try:
        _process_client(run)
    except JudgeKeyError as exc:
        # Every request would fail the same way: record it on each task at once.
        _results_fail_pending(run_id=run_id, error=str(exc), error_class="key", now=clock())
        return _run_finish(run_id=run_id, now=clock())

    while True:
        now = clock()
        ids = list(
            JudgeTaskResult.objects.filter(run_id=run_id, status=JudgeTaskResult.Status.PENDING)
            .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lte=now))
            .order_by("pk").values_list("pk", flat=True)[:CHUNK]
        )
        if not ids:
            return _run_finish(run_id=run_id, now=clock())
        for result_id in ids:
            if judge_task_execute(result_id=result_id, now=clock()) is None and not _run_active(run_id):
                return JudgeStep("stopped")
            if time.monotonic() - started >= budget_s:
                return JudgeStep("more")


def _run_active(run_id: int) -> bool:
    return JudgeRun.objects.filter(pk=run_id, status__in=ACTIVE).exists()


def _results_fail_pending(*, run_id: int, error: str, error_class: str, now: datetime) -> None:
    JudgeTaskResult.objects.filter(run_id=run_id, status=JudgeTaskResult.Status.PENDING).filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lte=now)
    ).update(status=JudgeTaskResult.Status.FAILED, error=error[:ERROR_MAX], error_class=error_class,
             http_status=None, attempts=F("attempts") + 1, claimed_until=None)


@transaction.atomic
def _run_finish(*, run_id: int, now: datetime) -> JudgeStep:
    run = judge_run_lock(run_id)
    if run is None or run.status not in ACTIVE:
        return JudgeStep("stopped")
    pending = JudgeTaskResult.objects.filter(run_id=run_id, status=JudgeTaskResult.Status.PENDING)
    if pending.exists():
        # Held by other workers: they finish them, or their claims run out and we take over.
        first_expiry = pending.aggregate(at=Min("claimed_until"))["at"]
        wait = (first_expiry - now).total_seconds() if first_expiry else 0.0
        return JudgeStep("wait", wait_s=max(1.0, wait))
    failed = JudgeTaskResult.objects.filter(run_id=run_id, status=JudgeTaskResult.Status.FAILED).exists()
    run.status = JudgeRun.Status.FAILED if failed else JudgeRun.Status.DONE
    run.finished_at = now
    run.save(update_fields=["status", "finished_at"])
    task_send_on_commit("annotation.agreement_report_request", project_id=run.project_id)
    if run.status == JudgeRun.Status.DONE:
        task_send_on_commit("annotation.judge_drift_check", run_id=run.pk)
    webhook_emit(project_id=run.project_id, event=WebhookEvent.JUDGE_RUN_FINISHED, now=now,
                 data={"judge_run_id": run.pk, "name": run.name, "status": run.status,
                       "finished_at": now.isoformat()})
    logger.info("judge run finished", extra={"run_id": run_id, "status": run.status})
    return JudgeStep("finished")
