"""Live judge runs: start, cancel, resume, progress, and asking the judge about one task.

A run holds one JudgeTaskResult per task, created `pending` when the run starts. A
worker *claims* a pending result (a conditional UPDATE that also checks the run is
still going, so a cancelled run is never asked again), asks the judge, and writes
either the labels and `done`, or the error and `failed`; nothing is ever dropped, so
done + failed + pending == total at every moment. A claim runs out after
`judge_claim_lease_s()`, long enough for the slowest possible answer (every retry
timing out, twice for the one re-ask), so a crashed worker's task is taken up again
and two live workers never ask about the same task.

Resuming turns failed results back to pending and starts a walker; done results are
never asked again. The walker (`judge_run_step`) works for a time budget and then
hands over to a fresh Celery task, so one run never outlives a task time limit.

Lock order: a JudgeRun row, then JudgeTaskResult rows; no function here holds a row
lock while it waits for the network.
"""
from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Min, Q

from annotation.judging.client import ChatClient, Completer, JudgeRequestError, judge_one
from annotation.judging.prompt import PROMPT_VERSION, JudgeAnswer, JudgeParseError
from annotation.judging.ratelimit import rate_limiter_for_run
from annotation.judging.secrets import JudgeKeyError, api_key_encrypt, api_key_env_check, api_key_resolve
from annotation.models import JudgeLabel, JudgeRun, JudgeTaskResult, Project, Task
from annotation.selectors import rubric_version_current
from core.after_commit import task_send_on_commit
from core.errors import DomainError
from experts.models import User
from rubrics.models import RubricItem

logger = logging.getLogger(__name__)

MAX_RPS = 50.0
NAME_MAX = 100
MODEL_MAX = 200
URL_MAX = 500
KEY_MAX = 1000
ERROR_MAX = 2000
CHUNK = 50
ACTIVE = (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING)

_url_validator = URLValidator(schemes=["http", "https"])


# --- Starting, cancelling, resuming ------------------------------------------------------

def judge_run_start(*, project: Project, name: str, base_url: str, judge_model: str, api_key: str | None,
                    api_key_env: str | None, requests_per_second: float, created_by: User | None,
                    now: datetime) -> JudgeRun:
    """Start a live judge run over every non-golden task of the project's current rubric version.

    The key is stored Fernet-encrypted (`api_key`) or named by an allowed environment
    variable the workers read (`api_key_env`); exactly one of the two. Raises
    DomainError listing every bad field (name taken, URL not http(s), rps outside
    (0, 50], ...) and then writes nothing. The walker is queued when the transaction
    commits. `now` is accepted like every service's; the run's times are set by the
    database (created) and by the walker (started, finished).
    """
    errors: list[dict[str, str]] = []

    def bad(field: str, message: str, code: str) -> None:
        errors.append({"field": field, "message": message, "code": code})

    name = (name or "").strip()
    if not name:
        bad("name", "required", "required")
    elif len(name) > NAME_MAX:
        bad("name", f"at most {NAME_MAX} characters", "too_long")
    base_url = (base_url or "").strip()
    try:
        if len(base_url) > URL_MAX:
            raise ValidationError("too long")
        _url_validator(base_url)
    except ValidationError:
        bad("base_url", "expected an http(s) URL such as https://api.openai.com/v1", "bad_url")
    judge_model = (judge_model or "").strip()
    if not judge_model:
        bad("judge_model", "required", "required")
    elif len(judge_model) > MODEL_MAX:
        bad("judge_model", f"at most {MODEL_MAX} characters", "too_long")
    rps = _rps_check(requests_per_second, bad)
    api_key = (api_key or "").strip()
    api_key_env = (api_key_env or "").strip()
    if bool(api_key) == bool(api_key_env):
        bad("api_key", "give either an API key or the name of an environment variable holding it", "key_choice")
    elif len(api_key) > KEY_MAX:
        bad("api_key", f"at most {KEY_MAX} characters", "too_long")
    elif api_key_env:
        try:
            api_key_env = api_key_env_check(api_key_env)
        except DomainError as exc:
            errors.extend(exc.errors)
    if name and JudgeRun.objects.filter(project=project, name=name).exists():
        bad("name", "a judge run of this project already has this name", "name_taken")
    version = rubric_version_current(project)
    task_ids = Task.objects.filter(project=project, rubric_version=version, is_golden=False).values_list(
        "pk", flat=True)
    if version is None:
        bad("tasks", "the project has no published rubric version yet", "no_version")
    elif not task_ids.exists():
        bad("tasks", "the current rubric version has no tasks to judge yet", "no_tasks")
    _raise_if_any(errors, "The judge run was not started")

    try:
        with transaction.atomic():
            run = JudgeRun.objects.create(
                project=project, rubric_version=version, name=name, judge_model=judge_model,
                prompt_version=PROMPT_VERSION, source=JudgeRun.Source.LIVE, status=JudgeRun.Status.PENDING,
                base_url=base_url, api_key_encrypted=api_key_encrypt(api_key) if api_key else "",
                api_key_env=api_key_env, requests_per_second=rps, created_by=created_by,
            )
            results = JudgeTaskResult.objects.bulk_create(
                (JudgeTaskResult(run=run, task_id=task_id) for task_id in task_ids.order_by("pk").iterator()),
                batch_size=2000,
            )
            _walker_queue_on_commit(run.pk)
    except IntegrityError:
        # Two starts with one name at once: the unique constraint decided.
        raise DomainError("The judge run was not started: name: a judge run of this project already has this "
                          "name.", code="invalid_run",
                          errors=[{"field": "name", "message": "a judge run of this project already has this name",
                                   "code": "name_taken"}]
                          ) from None
    logger.info("judge run %s started on project %s with %d tasks", run.pk, project.pk, len(results))
    return run


def _rps_check(value: float, bad: Callable[[str, str, str], None]) -> float:
    try:
        rps = float(value)
    except (TypeError, ValueError):
        bad("requests_per_second", "expected a number", "rps_range")
        return 0.0
    if not math.isfinite(rps) or not 0 < rps <= MAX_RPS:
        bad("requests_per_second", f"expected more than 0 and at most {MAX_RPS:g}", "rps_range")
    return rps


def _raise_if_any(errors: list[dict[str, str]], what: str) -> None:
    if errors:
        first = errors[0]
        raise DomainError(f"{what}: {first['field']}: {first['message']}.", code="invalid_run", errors=errors)


def _live_run_locked(run: JudgeRun) -> JudgeRun:
    locked = JudgeRun.objects.select_for_update().get(pk=run.pk)
    if locked.source != JudgeRun.Source.LIVE:
        raise DomainError("An imported judge run has no requests to cancel or resume.", code="imported_run")
    return locked


@transaction.atomic
def judge_run_cancel(*, run: JudgeRun, now: datetime) -> JudgeRun:
    """Stop asking: workers check the run before each request. Answers already in flight are kept.

    Cancelling a cancelled run changes nothing; a finished run cannot be cancelled.
    """
    locked = _live_run_locked(run)
    if locked.status == JudgeRun.Status.CANCELLED:
        return locked
    if locked.status not in ACTIVE:
        raise DomainError("The judge run has already finished.", code="run_finished", status=409)
    locked.status = JudgeRun.Status.CANCELLED
    locked.finished_at = now
    locked.save(update_fields=["status", "finished_at"])
    logger.info("judge run %s cancelled", locked.pk)
    return locked


@transaction.atomic
def judge_run_resume(*, run: JudgeRun, now: datetime) -> JudgeRun:
    """Ask again about every pending or failed task, never about a done one.

    Resuming a running run only queues another walker (harmless: claims keep two
    walkers off the same task), which also revives a run whose task message was lost.
    """
    locked = _live_run_locked(run)
    retried = JudgeTaskResult.objects.filter(run=locked, status=JudgeTaskResult.Status.FAILED).update(
        status=JudgeTaskResult.Status.PENDING)
    if not JudgeTaskResult.objects.filter(run=locked, status=JudgeTaskResult.Status.PENDING).exists():
        raise DomainError("Every task of this judge run is done; there is nothing to resume.",
                          code="nothing_to_resume", status=409)
    locked.status = JudgeRun.Status.RUNNING
    locked.finished_at = None
    locked.save(update_fields=["status", "finished_at"])
    _walker_queue_on_commit(locked.pk)
    logger.info("judge run %s resumed (%d failed tasks to ask again)", locked.pk, retried)
    return locked


def _walker_queue_on_commit(run_id: int) -> None:
    # Imported here because the task module imports this one. Sent through the task
    # object, not by name: a web process in eager mode never imports annotation.tasks,
    # so a task sent by name would be published to no worker at all.
    from annotation.judging.tasks import judge_run_process

    transaction.on_commit(lambda: judge_run_process.apply_async(args=[run_id]))


def judge_run_progress(run: JudgeRun) -> dict[str, int | str]:
    """Counts of done, failed and pending results, their total, and the run's current status."""
    counts = JudgeTaskResult.objects.filter(run_id=run.pk).aggregate(
        done=Count("pk", filter=Q(status=JudgeTaskResult.Status.DONE)),
        failed=Count("pk", filter=Q(status=JudgeTaskResult.Status.FAILED)),
        pending=Count("pk", filter=Q(status=JudgeTaskResult.Status.PENDING)),
        total=Count("pk"),
    )
    status = JudgeRun.objects.filter(pk=run.pk).values_list("status", flat=True).first() or run.status
    return {**counts, "status": status}


# --- Asking the judge ----------------------------------------------------------------------

def judge_claim_lease_s() -> float:
    """How long a claim lasts: the slowest answer possible, with every retry timing out, twice."""
    one_ask = (settings.RUBRICA_JUDGE_TIMEOUT_S * (settings.RUBRICA_JUDGE_MAX_RETRIES + 1)
               + settings.RUBRICA_JUDGE_BACKOFF_MAX_S * settings.RUBRICA_JUDGE_MAX_RETRIES)
    return 2 * one_ask + 60


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
    secret = api_key_resolve(encrypted=run.api_key_encrypted, env_name=run.api_key_env)
    material = "\x00".join(map(str, (
        run.base_url, run.judge_model, secret, run.requests_per_second, settings.RUBRICA_JUDGE_TIMEOUT_S,
        settings.RUBRICA_JUDGE_MAX_RETRIES, settings.RUBRICA_JUDGE_BACKOFF_BASE_S,
        settings.RUBRICA_JUDGE_BACKOFF_MAX_S, settings.RUBRICA_JUDGE_TRUST_ENV)))
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
            trust_env=settings.RUBRICA_JUDGE_TRUST_ENV,
        )
        entry = _ProcessClient(fingerprint=fingerprint, client=client, secret=secret)
        _clients[run.pk] = entry
        while len(_clients) > _CLIENTS_KEPT:
            _, old = _clients.popitem(last=False)
            old.client.close()
        return entry


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
        answer = judge_one(client, question.full_dialogue(), response.text, rubric)
    except (JudgeRequestError, JudgeParseError, JudgeKeyError, ValueError) as exc:
        return _result_fail(result_id=result_id, error=_scrub(str(exc), secret))
    except Exception as exc:
        if isinstance(exc, SoftTimeLimitExceeded):
            # The Celery task is out of time: leave the claim to run out, never half-record.
            raise
        logger.exception("judge run %s: unexpected error on result %s", run.pk, result_id)
        return _result_fail(result_id=result_id, error=_scrub(f"unexpected error: {type(exc).__name__}: {exc}",
                                                              secret))
    return _result_record(result_id=result_id, items=items, answer=answer, secret=secret)


@transaction.atomic
def _result_claim(*, result_id: int, now: datetime) -> JudgeTaskResult | None:
    """Take a pending result up for one ask, unless another worker holds it or the run stopped.

    The row lock makes the check-and-claim atomic; it is released before the request.
    """
    result = (JudgeTaskResult.objects.select_for_update(of=("self",))
              .select_related("run", "task__response__question").filter(pk=result_id).first())
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
                   secret: str | None) -> JudgeTaskResult:
    result = JudgeTaskResult.objects.select_for_update().get(pk=result_id)
    if result.status != JudgeTaskResult.Status.PENDING:
        return result  # recorded by a worker whose claim had run out; the first answer stands
    JudgeLabel.objects.bulk_create(
        JudgeLabel(run_id=result.run_id, task_id=result.task_id, rubric_item=item, value=value)
        for item, value in zip(items, answer.detail, strict=True)
    )
    result.status = JudgeTaskResult.Status.DONE
    result.reason = _scrub(answer.reason, secret) if secret else answer.reason
    result.error = ""
    result.claimed_until = None
    result.save(update_fields=["status", "reason", "error", "claimed_until", "updated_at"])
    return result


@transaction.atomic
def _result_fail(*, result_id: int, error: str) -> JudgeTaskResult:
    result = JudgeTaskResult.objects.select_for_update().get(pk=result_id)
    if result.status != JudgeTaskResult.Status.PENDING:
        return result
    result.status = JudgeTaskResult.Status.FAILED
    result.error = error
    result.claimed_until = None
    result.save(update_fields=["status", "error", "claimed_until", "updated_at"])
    logger.info("judge run %s: task %s failed: %s", result.run_id, result.task_id, error)
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
        _results_fail_pending(run_id=run_id, error=str(exc), now=clock())
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


def _results_fail_pending(*, run_id: int, error: str, now: datetime) -> None:
    JudgeTaskResult.objects.filter(run_id=run_id, status=JudgeTaskResult.Status.PENDING).filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lte=now)
    ).update(status=JudgeTaskResult.Status.FAILED, error=error[:ERROR_MAX], attempts=F("attempts") + 1,
             claimed_until=None)


@transaction.atomic
def _run_finish(*, run_id: int, now: datetime) -> JudgeStep:
    run = JudgeRun.objects.select_for_update().filter(pk=run_id).first()
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
    task_send_on_commit("annotation.request_agreement", run.project_id)
    logger.info("judge run %s finished: %s", run_id, run.status)
    return JudgeStep("finished")
