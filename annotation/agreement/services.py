"""Computing, requesting and keeping agreement reports.

A report is stored per project, rubric version and judge run; the dashboard and the
API read stored reports only. Labels arriving one task at a time ask for a recompute
through :func:`agreement_report_request`, which is debounced by a *pending report row*:
while a pending row exists for the project, further requests join it instead of
queueing another computation, and the computation it schedules (after
``RUBRICA_AGREEMENT_DEBOUNCE_S`` seconds) reads every label that arrived meanwhile.
Once a computation starts, its row is no longer pending, so a label that lands during
the computation schedules the next one.

Locks: the project row only (``project_lock``, order in ``annotation.lock_objects``),
held for the few statements that look for a pending row and create one.
"""
from __future__ import annotations

import logging
import math
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, transaction
from django.db.models import Q

from annotation.agreement.item_stats import item_stats_store
from annotation.agreement.material import Material
from annotation.agreement.report import material_load, report_params, report_payload
from annotation.lock_objects import project_lock
from annotation.models import AgreementReport, JudgeRun, Project, Task
from core.after_commit import task_send_on_commit
from rubrics.models import RubricVersion

logger = logging.getLogger(__name__)

# Stored reports kept per (project, judge run); older ones are deleted as new ones land.
KEEP_REPORTS = 10
TRANSIENT_ERRORS = (OperationalError, InterfaceError)


def debounce_seconds() -> int:
    return int(getattr(settings, "RUBRICA_AGREEMENT_DEBOUNCE_S", 30))


# A recompute's cost grows with the project (every label is read, the rankings are bootstrapped):
# on a large one it can take longer than the debounce, and a steady flow of labels would then keep
# a worker computing reports without pause. So the wait before a recompute is also at least
# REPORT_COST_FACTOR times what the project's last one took: reports then take at most about a
# tenth of a worker while labels arrive. A PM's "recompute now" does not wait.
REPORT_COST_FACTOR = 9
REPORT_WAIT_MAX_S = 3600


def _debounce_for(project: Project) -> int:
    """The wait before the project's next debounced recompute (seconds)."""
    base = debounce_seconds()
    if base <= 0:
        return base
    last_ms = (AgreementReport.objects.filter(project=project, status=AgreementReport.Status.DONE,
                                              duration_ms__isnull=False)
               .order_by("-computed_at", "-pk").values_list("duration_ms", flat=True).first())
    scaled = math.ceil(REPORT_COST_FACTOR * (last_ms or 0) / 1000)
    return max(base, min(scaled, REPORT_WAIT_MAX_S))


def judge_run_default(*, project: Project) -> JudgeRun | None:
    """The run a report shows unless one is chosen: the newest finished run, else the newest still labelling."""
    runs = JudgeRun.objects.filter(project=project).order_by("-created_at", "-pk")
    return (runs.filter(status=JudgeRun.Status.DONE).first()
            or runs.filter(status__in=[JudgeRun.Status.RUNNING, JudgeRun.Status.PENDING]).first())


def rubric_version_for_report(*, project: Project, judge_run: JudgeRun | None) -> RubricVersion | None:
    """The judge run's version; without a run, the newest version with submitted work, else with tasks."""
    if judge_run is not None:
        return judge_run.rubric_version
    tasks = Task.objects.filter(project=project).order_by("-rubric_version__number")
    version_id = (tasks.filter(submitted_count__gt=0).values_list("rubric_version_id", flat=True).first()
                  or tasks.values_list("rubric_version_id", flat=True).first())
    return None if version_id is None else RubricVersion.objects.get(pk=version_id)


def _store(*, report: AgreementReport, project: Project, run: JudgeRun | None, version: RubricVersion | None,
           material: Material, load_ms: int, now: datetime) -> AgreementReport:
    started = time.perf_counter()
    params = report_params(project)
    payload = report_payload(project=project, version=version, run=run, material=material, params=params, now=now)
    report.project = project
    report.judge_run = run
    report.rubric_version = version
    report.payload = payload
    report.units = int(material.unit_task.size)
    report.status = AgreementReport.Status.DONE
    report.computed_at = now
    report.error = ""
    report.duration_ms = int((time.perf_counter() - started) * 1000) + load_ms
    report.save()
    # After the payload: it set the material's judge vector to this run's.
    item_stats_store(report=report, material=material, params=params)
    _prune(project=project, run=run)
    return report


def _prune(*, project: Project, run: JudgeRun | None) -> None:
    finished = (AgreementReport.objects.filter(project=project, judge_run=run)
                .exclude(status__in=[AgreementReport.Status.PENDING, AgreementReport.Status.RUNNING])
                .order_by("-requested_at", "-pk"))
    stale = list(finished.values_list("pk", flat=True)[KEEP_REPORTS:])
    if stale:
        AgreementReport.objects.filter(pk__in=stale).delete()


def _load(*, project: Project, version: RubricVersion | None) -> tuple[Material, int]:
    """The material and how long reading it took, in milliseconds."""
    started = time.perf_counter()
    material = material_load(project=project, version=version)
    return material, int((time.perf_counter() - started) * 1000)


def agreement_report_compute(*, project: Project, judge_run: JudgeRun | None = None, now: datetime,
                             report: AgreementReport | None = None) -> AgreementReport:
    """Compute the full report from the database now and store it (status done).

    `judge_run=None` means the project's default run (:func:`judge_run_default`), or
    no judge section when the project has none. `report` is an existing row to fill
    (a pending request); otherwise a new row is written. The duration stored covers
    reading the labels and computing.
    """
    run = judge_run or judge_run_default(project=project)
    version = rubric_version_for_report(project=project, judge_run=run)
    material, load_ms = _load(project=project, version=version)
    target = report or AgreementReport(project=project, requested_at=now)
    return _store(report=target, project=project, run=run, version=version, material=material,
                  load_ms=load_ms, now=now)


def agreement_report_request(*, project: Project, now: datetime, judge_run: JudgeRun | None = None,
                             debounce_s: int | None = None) -> AgreementReport:
    """Ask for a recompute; many requests within the debounce window make one computation.

    With `debounce_s=0` (a PM's "recompute now") the computation is sent at once, even
    when a debounced one is already waiting; that one then finds its row done and stops.
    Returns the pending row the computation will fill.
    """
    with transaction.atomic():
        project_lock(project.pk)
        delay = _debounce_for(project) if debounce_s is None else max(0, int(debounce_s))
        # Under the lock (requests of one project run one after another), so one pending row is written.
        pending = (AgreementReport.objects.filter(project=project, judge_run=judge_run,
                                                  status=AgreementReport.Status.PENDING)
                   .order_by("-requested_at", "-pk").first())
        if pending is not None and delay > 0:
            return pending
        if pending is None:
            pending = AgreementReport.objects.create(project=project, judge_run=judge_run, requested_at=now,
                                                     status=AgreementReport.Status.PENDING)
        report_id = pending.pk
        task_send_on_commit("annotation.agreement_report_compute", countdown=delay, project_id=project.pk,
                            report_id=report_id)
    return pending


def agreement_report_request_for(*, project_id: int, now: datetime) -> int | None:
    """`agreement_report_request` for the project with this id (labels arrived); the pending report's id,
    or None when the project is gone.

    The usual case costs one query: every completed task asks, and while a debounced recompute
    waits, the request has nothing to do and needs neither the project nor its lock. That read is
    safe without the lock: a computation that claims the row after it loads the labels after the
    claim, so the labels of the request's commit, which came before, are in it; one that claimed
    it before leaves no pending row to find, and the request takes the locked path."""
    if debounce_seconds() > 0:
        pending_id = (AgreementReport.objects.filter(project_id=project_id, judge_run=None,
                                                     status=AgreementReport.Status.PENDING)
                      .order_by("-requested_at", "-pk").values_list("pk", flat=True).first())
        if pending_id is not None:
            return pending_id
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return None
    return agreement_report_request(project=project, now=now).pk


def _stale_after() -> timedelta:
    """A running row older than this was abandoned by a lost worker and may be claimed again."""
    hard_limit = int(getattr(settings, "CELERY_TASK_TIME_LIMIT", 360))
    # Measured from the request: the wait before the computation starts can be the longest one.
    return timedelta(seconds=max(debounce_seconds(), REPORT_WAIT_MAX_S) + 2 * hard_limit)


def agreement_report_process(*, report_id: int, now: datetime, attempt_id: str = "") -> AgreementReport | None:
    """Fill a pending report row; None when it is gone or another delivery already did it.

    `attempt_id` names the message (its Celery task id): a row left running by an earlier
    delivery of the same message, whose worker died, is claimed again at once.

    A row requested without a judge run (labels arrived) also refreshes the latest
    report of every other run of the same rubric version, reading the labels once.
    """
    claimable = Q(status=AgreementReport.Status.PENDING) | Q(
        status=AgreementReport.Status.RUNNING, requested_at__lt=now - _stale_after())
    if attempt_id:
        claimable |= Q(status=AgreementReport.Status.RUNNING, claimed_by=attempt_id)
    if not AgreementReport.objects.filter(claimable, pk=report_id).update(status=AgreementReport.Status.RUNNING,
                                                                          claimed_by=attempt_id):
        return None
    report = AgreementReport.objects.select_related("project", "judge_run__rubric_version").get(pk=report_id)
    project = report.project
    refresh_all = report.judge_run_id is None
    try:
        run = report.judge_run or judge_run_default(project=project)
        version = rubric_version_for_report(project=project, judge_run=run)
        material, load_ms = _load(project=project, version=version)
        done = _store(report=report, project=project, run=run, version=version, material=material,
                      load_ms=load_ms, now=now)
        if refresh_all:
            for other in _runs_with_reports(project=project, version=version, exclude=run):
                _store(report=AgreementReport(project=project, requested_at=now), project=project, run=other,
                       version=version, material=material, load_ms=load_ms, now=now)
        return done
    except TRANSIENT_ERRORS:
        # The database went away mid-way: hand the row back so the task's retry can claim it.
        _set_status(report_id, AgreementReport.Status.PENDING, "")
        raise
    except Exception as exc:
        logger.exception("agreement report failed", extra={"report_id": report_id, "project_id": project.pk})
        _set_status(report_id, AgreementReport.Status.FAILED, f"{type(exc).__name__}: {exc}"[:2000], now)
        raise


def _set_status(report_id: int, status: str, error: str, now: datetime | None = None) -> None:
    try:
        AgreementReport.objects.filter(pk=report_id).update(status=status, error=error, computed_at=now)
    except DatabaseError:
        logger.warning("could not record agreement report status", extra={"report_id": report_id})


def _runs_with_reports(*, project: Project, version: RubricVersion | None, exclude: JudgeRun | None) -> list[JudgeRun]:
    reported = AgreementReport.objects.filter(project=project, status=AgreementReport.Status.DONE,
                                              judge_run__isnull=False).values("judge_run_id")
    runs = JudgeRun.objects.filter(project=project, pk__in=reported, rubric_version=version)
    if exclude is not None:
        runs = runs.exclude(pk=exclude.pk)
    return list(runs.order_by("pk"))
