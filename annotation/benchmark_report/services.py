"""Computing, requesting and keeping benchmark quality reports; the PM's gate thresholds.

A report is stored per project, judge run (and so rubric version) and *labels state*.
The labels state is the newest finished agreement report of the same project and run:
the dashboard recomputes those whenever labels arrive, are rejected or adjudicated, or
the judge labels more (debounced, see ``annotation.agreement.services``), so a stored
benchmark report whose labels state is older than the newest agreement report is stale.
The page then shows it, says so, and asks for a recompute; a pending row keeps many
requests to one computation, as the agreement reports do.

Locks: the project row only (``project_lock``), held while looking for a pending row.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, transaction
from django.db.models import Q

from annotation.agreement.benchmark import N_BOOT, Thresholds
from annotation.agreement.report import judge_vector, material_load
from annotation.agreement.services import judge_run_default, rubric_version_for_report
from annotation.benchmark_report.build import SCHEMA, benchmark_sections
from annotation.lock_objects import project_lock
from annotation.models import AgreementReport, BenchmarkGates, BenchmarkReport, JudgeRun, Project
from core.after_commit import task_send_on_commit
from rubrics.models import RubricItem

logger = logging.getLogger(__name__)

KEEP_REPORTS = 5
TRANSIENT_ERRORS = (OperationalError, InterfaceError)
CONTENT_CHARS = 200
TASK_NAME = "annotation.benchmark_report_compute"


# ------------------------------------------------------------------------ thresholds


def benchmark_thresholds(*, project: Project, row: BenchmarkGates | None = None) -> Thresholds:
    """The project's gate bars, as shares and points; the defaults while the PM has set none.

    `row` is the project's gates row when the caller already read it (an unsaved row: the defaults).
    """
    row = row if row is not None else BenchmarkGates.objects.filter(project=project).first()
    if row is None or row.pk is None:
        return Thresholds()
    return Thresholds(spread_min=row.spread_min, separation_min=row.separation_min_pct / 100,
                      gaps_significant_min=row.gaps_significant_min_pct / 100, saturation_max=row.saturation_max,
                      rank_stability_min=row.rank_stability_min_pct / 100)


def benchmark_gates_update(*, project: Project, values: dict[str, float]) -> BenchmarkGates:
    """Store the project's gate bars (`values` already validated by the form: field name to number)."""
    row, _ = BenchmarkGates.objects.get_or_create(project=project)
    for name, value in values.items():
        setattr(row, name, float(value))
    row.full_clean()
    row.save()
    return row


# ------------------------------------------------------------------------ reports


def labels_state(*, project: Project, run: JudgeRun | None) -> AgreementReport | None:
    """The newest finished agreement report of the project for `run` (no run: one without a judge)."""
    reports = AgreementReport.objects.filter(project=project, status=AgreementReport.Status.DONE)
    reports = reports.filter(judge_run=run) if run is not None else reports.filter(judge_run__isnull=True)
    return reports.defer("payload").order_by("-computed_at", "-pk").first()


@dataclass(frozen=True)
class Shown:
    """What the page shows: the newest finished report, whether it is stale, and any computation under way."""

    report: BenchmarkReport | None
    stale: bool
    in_flight: BenchmarkReport | None
    failed: BenchmarkReport | None = None


def benchmark_report_latest(*, project: Project, run: JudgeRun | None) -> BenchmarkReport | None:
    return (BenchmarkReport.objects.filter(project=project, judge_run=run, status=BenchmarkReport.Status.DONE)
            .order_by("-computed_at", "-pk").first())


def benchmark_report_in_flight(*, project: Project, run: JudgeRun | None) -> BenchmarkReport | None:
    return (BenchmarkReport.objects.filter(project=project, judge_run=run,
                                           status__in=[BenchmarkReport.Status.PENDING, BenchmarkReport.Status.RUNNING])
            .defer("payload").order_by("-requested_at", "-pk").first())


def benchmark_report_shown(*, project: Project, run: JudgeRun | None, now: datetime) -> Shown:
    """The report to render for `run` (None: the project's default run); asks for a recompute when it is stale.

    Stale: no report yet, or the labels changed since (a newer agreement report exists).
    """
    run = run or judge_run_default(project=project)
    report = benchmark_report_latest(project=project, run=run)
    state = labels_state(project=project, run=run)
    stale = report is None or (state is not None and report.labels_state_id != state.pk)
    in_flight = benchmark_report_in_flight(project=project, run=run)
    failed = _failed_since(project=project, run=run, report=report, state=state)
    if stale and in_flight is None and failed is None:
        try:
            benchmark_report_request(project=project, run=run, now=now)
        except Exception:
            # Eager Celery (embedded mode) computes inside the request and raises what the
            # computation raised; the failed row records it and the page says so.
            logger.warning("benchmark report computation failed", extra={"project_id": project.pk})
        # Eager Celery (embedded mode, tests) has already computed it.
        report = benchmark_report_latest(project=project, run=run) or report
        in_flight = benchmark_report_in_flight(project=project, run=run)
        stale = report is None or (state is not None and report.labels_state_id != state.pk)
    failed = _failed_since(project=project, run=run, report=report, state=state)
    return Shown(report=report, stale=stale, in_flight=in_flight, failed=failed)


def _failed_since(*, project: Project, run: JudgeRun | None, report: BenchmarkReport | None,
                  state: AgreementReport | None) -> BenchmarkReport | None:
    """A computation that failed after the shown report and after the labels last changed: not retried by a view."""
    failed = BenchmarkReport.objects.filter(project=project, judge_run=run, status=BenchmarkReport.Status.FAILED)
    if report is not None:
        failed = failed.filter(requested_at__gt=report.requested_at)
    if state is not None and state.computed_at is not None:
        failed = failed.filter(requested_at__gt=state.computed_at)
    return failed.defer("payload").order_by("-requested_at", "-pk").first()


def benchmark_report_request(*, project: Project, run: JudgeRun | None, now: datetime) -> BenchmarkReport:
    """Ask for a computation; while one is pending, further requests join it. Returns the pending row."""
    with transaction.atomic():
        project_lock(project.pk)
        pending = (BenchmarkReport.objects.filter(project=project, judge_run=run,
                                                  status=BenchmarkReport.Status.PENDING)
                   .order_by("-requested_at", "-pk").first())
        if pending is not None:
            return pending
        pending = BenchmarkReport.objects.create(project=project, judge_run=run, requested_at=now)
        task_send_on_commit(TASK_NAME, project_id=project.pk, report_id=pending.pk)
    return pending


def _params() -> tuple[int, int]:
    return N_BOOT, int(getattr(settings, "RUBRICA_AGREEMENT_SEED", 0))


def benchmark_payload(*, project: Project, run: JudgeRun | None, now: datetime) -> tuple[dict[str, Any], int,
                                                                                          AgreementReport | None]:
    """Read the labels of `run`'s rubric version (without a run: the newest worked version) and compute.

    Returns the payload, the number of units read and the labels state it was read at.
    """
    state = labels_state(project=project, run=run)
    version = rubric_version_for_report(project=project, judge_run=run)
    material = material_load(project=project, version=version)
    material.judge = judge_vector(material, run) if run is not None else None
    n_boot, seed = _params()
    sections = benchmark_sections(material, n_boot=n_boot, seed=seed)
    for side in sections["sides"].values():
        if side:
            _add_item_texts(side["constant"]["all_hit_items"] + side["constant"]["all_miss_items"])
    payload = {
        "schema": SCHEMA,
        "project_id": project.pk,
        "rubric_version": None if version is None else {"id": version.pk, "number": version.number},
        "judge_run": None if run is None else {"id": run.pk, "name": run.name, "judge_model": run.judge_model},
        "labels_state": None if state is None else {
            "agreement_report": state.pk,
            "computed_at": state.computed_at.isoformat() if state.computed_at else None,
        },
        "computed_at": now.isoformat(),
        "dimensions": [{"code": d.code, "name_zh": d.name_zh, "name_en": d.name_en, "is_gate": d.is_gate}
                       for d in material.dims],
        **sections,
    }
    return payload, int(material.unit_task.size), state


def _add_item_texts(rows: list[dict[str, Any]]) -> None:
    texts = {pk: (ref, key, content) for pk, ref, key, content in
             RubricItem.objects.filter(pk__in=[r["rubric_item_id"] for r in rows])
             .values_list("pk", "question_ref", "item_key", "content")}
    for r in rows:
        ref, key, content = texts.get(r["rubric_item_id"], ("", "", ""))
        r.update(question_id=ref, item_key=key, content=content[:CONTENT_CHARS])


def benchmark_report_compute(*, project: Project, run: JudgeRun | None = None, now: datetime,
                             report: BenchmarkReport | None = None) -> BenchmarkReport:
    """Compute the report now and store it (status done); `run=None` means the project's default run."""
    run = run or judge_run_default(project=project)
    started = time.perf_counter()
    payload, units, state = benchmark_payload(project=project, run=run, now=now)
    target = report or BenchmarkReport(project=project, requested_at=now)
    target.judge_run = run
    target.rubric_version_id = (payload["rubric_version"] or {}).get("id")
    target.labels_state = state
    target.payload = payload
    target.units = units
    target.status = BenchmarkReport.Status.DONE
    target.computed_at = now
    target.error = ""
    target.duration_ms = int((time.perf_counter() - started) * 1000)
    target.save()
    _prune(project=project, run=run)
    return target


def _prune(*, project: Project, run: JudgeRun | None) -> None:
    done = (BenchmarkReport.objects.filter(project=project, judge_run=run, status=BenchmarkReport.Status.DONE)
            .order_by("-computed_at", "-pk").values_list("pk", flat=True))
    stale = list(done[KEEP_REPORTS:])
    if stale:
        BenchmarkReport.objects.filter(pk__in=stale).delete()


def _stale_after() -> timedelta:
    """A running row older than this was abandoned by a lost worker and may be claimed again."""
    return timedelta(seconds=2 * int(getattr(settings, "CELERY_TASK_TIME_LIMIT", 360)))


def benchmark_report_process(*, report_id: int, now: datetime) -> BenchmarkReport | None:
    """Fill a pending row; None when it is gone or another delivery already did it."""
    claimable = Q(status=BenchmarkReport.Status.PENDING) | Q(
        status=BenchmarkReport.Status.RUNNING, requested_at__lt=now - _stale_after())
    if not BenchmarkReport.objects.filter(claimable, pk=report_id).update(status=BenchmarkReport.Status.RUNNING):
        return None
    report = BenchmarkReport.objects.select_related("project", "judge_run").get(pk=report_id)
    try:
        return benchmark_report_compute(project=report.project, run=report.judge_run, now=now, report=report)
    except TRANSIENT_ERRORS:
        _set_status(report_id, BenchmarkReport.Status.PENDING, "")
        raise
    except Exception as exc:
        logger.exception("benchmark report failed", extra={"report_id": report_id})
        _set_status(report_id, BenchmarkReport.Status.FAILED, f"{type(exc).__name__}: {exc}"[:2000], now)
        raise


def _set_status(report_id: int, status: str, error: str, now: datetime | None = None) -> None:
    try:
        BenchmarkReport.objects.filter(pk=report_id).update(status=status, error=error, computed_at=now)
    except DatabaseError:
        logger.warning("could not record benchmark report status", extra={"report_id": report_id})
