"""Live judge runs as a PM drives them: start, cancel, resume, and progress.

A run holds one JudgeTaskResult per task, created `pending` when the run starts;
done + failed + pending == total at every moment. Starting or resuming queues the
walker (`annotation.judging.walker`, through the Celery task "annotation.judge_run_step")
when the transaction commits. Resuming turns failed results back to pending; done
results are never asked again.

Locks: a JudgeRun row, then JudgeTaskResult rows (the order is `annotation.lock_objects`).
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.audit.services import audit_record
from annotation.judging.configs import judge_config_version_for_run
from annotation.judging.prompt import PROMPT_VERSION
from annotation.judging.secrets import api_key_encrypt, api_key_env_check_for
from annotation.lock_objects import judge_run_lock
from annotation.models import AuditAction, JudgeConfigVersion, JudgeRun, JudgeTaskResult, Project, Task
from annotation.selectors import rubric_version_current
from core.after_commit import task_send_on_commit
from core.errors import DomainError, NotFound
from core.outbound import OutboundRefused, url_check
from experts.models import User

logger = logging.getLogger(__name__)

# The Celery task that walks a run (annotation.judging.tasks), sent by name.
JUDGE_RUN_STEP = "annotation.judge_run_step"

MAX_RPS = 50.0
NAME_MAX = 100
MODEL_MAX = 200
URL_MAX = 500
KEY_MAX = 1000
ERROR_MAX = 2000
ERROR_CLASS_MAX = 40
ACTIVE = (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING)

_url_validator = URLValidator(schemes=["http", "https"])


# --- Starting, cancelling, resuming ------------------------------------------------------

def judge_run_can_cancel(run: JudgeRun) -> bool:
    """Whether `judge_run_cancel` would stop the run: a live run still pending or running."""
    return run.source == JudgeRun.Source.LIVE and run.status in ACTIVE


def judge_run_can_resume(run: JudgeRun) -> bool:
    """Whether the run page offers to resume: a live run that was cancelled or gave up.

    `judge_run_resume` also accepts a running run (it only queues another walker), but
    that is a repair for a lost task message, not an action to offer.
    """
    return run.source == JudgeRun.Source.LIVE and run.status in (JudgeRun.Status.CANCELLED, JudgeRun.Status.FAILED)


def judge_run_start(*, project: Project, name: str, base_url: str, judge_model: str, api_key: str | None,
                    api_key_env: str | None, requests_per_second: float, created_by: User | None,
                    config_version: object = None) -> JudgeRun:
    """Start a live judge run over every non-golden task of the project's current rubric version.

    `config_version` (a JudgeConfigVersion of this project, or its id) is what the run is
    asked with: its prompt template, temperature and extra request fields, and its model and
    base URL where it names them (an empty `judge_model` or `base_url` takes the version's;
    a different one is refused). Without it the run sends the built-in prompt at
    temperature 0 and records that as a version of the project's default configuration.

    The key is stored Fernet-encrypted (`api_key`) or, when an admin starts the run on a
    project granted that variable, named by an environment variable the workers read
    (`api_key_env`); exactly one of the two. Raises
    DomainError listing every bad field (name taken, URL not http(s), rps outside
    (0, 50], ...) and then writes nothing. The walker is queued when the transaction
    commits. The run's times are set by the database (created) and by the walker
    (started, finished), so it takes no `now`.
    """
    errors: list[dict[str, Any]] = []

    def bad(field: str, message: str, code: str, **params: str) -> None:
        errors.append({"field": field, "message": message, "code": code, **({"params": params} if params else {})})

    name = (name or "").strip()
    if not name:
        bad("name", "required", "required")
    elif len(name) > NAME_MAX:
        bad("name", f"at most {NAME_MAX} characters", "too_long")
    chosen = _config_version_of(project, config_version)
    if config_version not in (None, "") and chosen is None:
        bad("config_version", "not a judge configuration version of this project", "config_version_unknown")
    base_url = (base_url or "").strip()
    judge_model = (judge_model or "").strip()
    if chosen is not None:
        for field, given, fixed in (("base_url", base_url, chosen.base_url), ("judge_model", judge_model,
                                                                             chosen.judge_model)):
            if fixed and given and given != fixed:
                bad(field, f"the chosen configuration version fixes this as {fixed}", "config_version_differs",
                    value=fixed)
        base_url = base_url or chosen.base_url
        judge_model = judge_model or chosen.judge_model
    try:
        if len(base_url) > URL_MAX:
            raise ValidationError("too long")
        _url_validator(base_url)
    except ValidationError:
        bad("base_url", "expected an http(s) URL such as https://api.openai.com/v1", "bad_url")
    else:
        try:
            # What can be told without DNS (loopback, private literals, localhost, plain http);
            # names are resolved and vetted again at every request (core.outbound).
            url_check(base_url)
        except OutboundRefused as exc:
            bad("base_url", str(exc), "url_not_allowed")
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
            api_key_env = api_key_env_check_for(name=api_key_env, project_id=project.pk, user=created_by)
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
            # What the run will be asked with, as a judge configuration version (annotation.judging.configs).
            config_version = chosen or judge_config_version_for_run(
                project=project, judge_model=judge_model, base_url=base_url, created_by=created_by,
                now=timezone.now())
            run = JudgeRun.objects.create(
                project=project, rubric_version=version, name=name, judge_model=judge_model,
                config_version=config_version,
                prompt_version=PROMPT_VERSION, source=JudgeRun.Source.LIVE, status=JudgeRun.Status.PENDING,
                base_url=base_url, api_key_encrypted=api_key_encrypt(api_key) if api_key else "",
                api_key_env=api_key_env, requests_per_second=rps, created_by=created_by,
            )
            results = JudgeTaskResult.objects.bulk_create(
                (JudgeTaskResult(run=run, task_id=task_id) for task_id in task_ids.order_by("pk").iterator()),
                batch_size=2000,
            )
            # The key itself never reaches the log: only where it comes from.
            audit_record(actor=created_by, action=AuditAction.JUDGE_RUN_START, project_id=project.pk, objects=[run],
                         now=run.created_at, details={"name": name, "base_url": base_url, "judge_model": judge_model,
                                                      "key_source": "environment" if api_key_env else "stored",
                                                      "config_version": config_version.pk,
                                                      "tasks": len(results)})
            _walker_queue_on_commit(run.pk)
    except IntegrityError:
        # Two starts with one name at once: the unique constraint decided.
        raise DomainError("The judge run was not started: name: a judge run of this project already has this "
                          "name.", code="invalid_run",
                          errors=[{"field": "name", "message": "a judge run of this project already has this name",
                                   "code": "name_taken"}]
                          ) from None
    logger.info("judge run started", extra={"run_id": run.pk, "project_id": project.pk, "tasks": len(results)})
    return run


def _config_version_of(project: Project, value: object) -> JudgeConfigVersion | None:
    """The project's judge configuration version `value` names (an instance or an id), else None."""
    if isinstance(value, JudgeConfigVersion):
        return value if value.config.project_id == project.pk else None
    try:
        pk = int(str(value))
    except (TypeError, ValueError):
        return None
    return JudgeConfigVersion.objects.filter(pk=pk, config__project=project).first()


def _rps_check(value: float, bad: Callable[..., None]) -> float:
    try:
        rps = float(value)
    except (TypeError, ValueError):
        bad("requests_per_second", "expected a number", "rps_range", max=f"{MAX_RPS:g}")
        return 0.0
    if not math.isfinite(rps) or not 0 < rps <= MAX_RPS:
        bad("requests_per_second", f"expected more than 0 and at most {MAX_RPS:g}", "rps_range", max=f"{MAX_RPS:g}")
    return rps


def _raise_if_any(errors: list[dict[str, str]], what: str) -> None:
    if errors:
        first = errors[0]
        raise DomainError(f"{what}: {first['field']}: {first['message']}.", code="invalid_run", errors=errors)


def _live_run_locked(run: JudgeRun) -> JudgeRun:
    locked = judge_run_lock(run.pk)
    if locked is None:
        raise NotFound("No such judge run.")
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
    logger.info("judge run cancelled", extra={"run_id": locked.pk})
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
    logger.info("judge run resumed", extra={"run_id": locked.pk, "retried": retried})
    return locked


def _walker_queue_on_commit(run_id: int) -> None:
    task_send_on_commit(JUDGE_RUN_STEP, run_id=run_id)


def judge_run_progress(run: JudgeRun) -> dict[str, int | str]:
    """Counts of done, failed and pending results, their total, and the run's current status.

    Results superseded by a rubric change are counted apart and left out of the total.
    """
    counts = JudgeTaskResult.objects.filter(run_id=run.pk).aggregate(
        done=Count("pk", filter=Q(status=JudgeTaskResult.Status.DONE)),
        failed=Count("pk", filter=Q(status=JudgeTaskResult.Status.FAILED)),
        pending=Count("pk", filter=Q(status=JudgeTaskResult.Status.PENDING)),
        superseded=Count("pk", filter=Q(status=JudgeTaskResult.Status.SUPERSEDED)),
        total=Count("pk", filter=~Q(status=JudgeTaskResult.Status.SUPERSEDED)),
    )
    status = JudgeRun.objects.filter(pk=run.pk).values_list("status", flat=True).first() or run.status
    return {**counts, "status": status}
