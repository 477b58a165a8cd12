"""The judge's convergence: each successive judge run's agreement with the human majority, against the targets.

Nothing here computes a statistic: every figure (agreement, its cluster Wilson
interval over dialogues, the number of dialogues) is read from the run's newest
stored agreement report (`annotation.agreement.sections.judge_section`). A run is one
point of the loop: it was asked with one judge configuration version under one rubric
version, so the points in run order are the successive versions.

Targets (GrowLoop): 90% on the dimensions the project marks as safety, 85% on the
others; the PM edits both and the safety marks (`ConvergenceSettings`). A dimension
has *converged* when the newest run's agreement on it meets its target (the point
estimate; the interval is shown beside it, and a lower bound under the target is
called out as "not yet sure"); the overall line is held to the non-safety target.

Locks: none (one row per project, written with update_or_create in a transaction).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils.translation import gettext

from annotation.audit.services import audit_record
from annotation.models import AgreementReport, AuditAction, ConvergenceSettings, JudgeRun, Project
from annotation.models.blind_test import DRIFT_THRESHOLD_PCT, OTHER_TARGET_PCT, SAFETY_TARGET_PCT
from core.errors import DomainError
from experts.models import User
from rubrics.models import Dimension

# Chart geometry (SVG user units): runs along x, agreement along y from 50% (lower when a point needs it) to 100%.
CHART_W = 640
CHART_H = 220
PAD_L = 44
PAD_R = 12
PAD_T = 10
PAD_B = 30
Y_MIN = 0.5


@dataclass(frozen=True)
class Targets:
    safety_pct: float = SAFETY_TARGET_PCT
    other_pct: float = OTHER_TARGET_PCT
    drift_pct: float = DRIFT_THRESHOLD_PCT
    safety_codes: frozenset[str] = frozenset()

    def for_dimension(self, code: str) -> float:
        return (self.safety_pct if code in self.safety_codes else self.other_pct) / 100


def convergence_targets(*, project: Project) -> Targets:
    """The project's targets; the defaults (and no safety dimension) while the PM has set none."""
    row = ConvergenceSettings.objects.filter(project=project).first()
    if row is None:
        return Targets()
    return Targets(safety_pct=row.safety_target_pct, other_pct=row.other_target_pct,
                   drift_pct=row.drift_threshold_pct,
                   safety_codes=frozenset(row.safety_dimensions.values_list("code", flat=True)))


def convergence_targets_update(*, project: Project, safety_pct: float, other_pct: float, drift_pct: float,
                               safety_codes: list[str], by: User | None, now: datetime) -> ConvergenceSettings:
    """Store the project's targets, drift threshold and safety dimensions (already validated by the form).

    Values outside 0-100 (drift: outside (0, 100]) or an unknown dimension code raise
    DomainError and write nothing; the change is audited with the old and new values.
    """
    if not all(0 <= v <= 100 for v in (safety_pct, other_pct)) or not 0 < drift_pct <= 100:
        raise DomainError("Targets are percentages from 0 to 100; the drift threshold more than 0.")
    dims = list(Dimension.objects.filter(code__in=safety_codes))
    if len(dims) != len(set(safety_codes)):
        raise DomainError("Unknown dimension.")
    before = convergence_targets(project=project)
    with transaction.atomic():
        row, _ = ConvergenceSettings.objects.update_or_create(
            project=project, defaults={"safety_target_pct": safety_pct, "other_target_pct": other_pct,
                                       "drift_threshold_pct": drift_pct})
        row.safety_dimensions.set(dims)
        audit_record(actor=by, action=AuditAction.CONVERGENCE_TARGETS, project_id=project.pk, objects=[row],
                     now=now, details={
                         "before": {"safety_pct": before.safety_pct, "other_pct": before.other_pct,
                                    "drift_pct": before.drift_pct, "safety": sorted(before.safety_codes)},
                         "after": {"safety_pct": safety_pct, "other_pct": other_pct, "drift_pct": drift_pct,
                                   "safety": sorted(set(safety_codes))}})
    return row


@dataclass
class Point:
    """One run's figures on one line (overall or a dimension)."""

    agreement: float | None
    low: float | None
    high: float | None
    n: int
    questions: int
    thin: bool

    @property
    def ci(self) -> tuple[float | None, float | None]:
        return (self.low, self.high)


@dataclass
class RunPoint:
    run: JudgeRun
    label: str
    computed_at: datetime | None
    overall: Point | None
    by_dimension: dict[str, Point] = field(default_factory=dict)
    # Which expert labels the report's panel verdicts came from: "first" or "revised" (after a reveal).
    labels_used: str = "first"


@dataclass
class Line:
    """A dimension (or the overall line) across the runs, with its target and verdict."""

    code: str
    name: str
    target: float
    safety: bool
    points: list[Point | None]
    latest: Point | None
    converged: bool
    sure: bool  # the newest interval's lower bound also meets the target
    best: float | None


def _point(row: dict[str, Any] | None) -> Point | None:
    if not row or row.get("agreement") is None:
        return None
    ci = row.get("agreement_ci") or [None, None]
    return Point(agreement=row["agreement"], low=ci[0], high=ci[1], n=int(row.get("n") or 0),
                 questions=int(row.get("questions") or 0), thin=bool(row.get("thin")))


def _label(run: JudgeRun) -> str:
    version = run.config_version
    config = f"{version.config.name} v{version.number}" if version is not None else run.name
    return f"{config} · {gettext('rubric')} v{run.rubric_version.number}"


def convergence_points(*, project: Project) -> list[RunPoint]:
    """Per judge run with a finished agreement report, oldest run first: the judge section's figures.

    Two queries whatever the number of runs: the runs, and the judge sections of their
    finished reports (read as JSON paths, not whole payloads); a run's newest report wins.
    """
    runs = list(JudgeRun.objects.filter(project=project).select_related("rubric_version", "config_version__config")
                .order_by("created_at", "pk"))
    newest: dict[int, Any] = {}
    for found in (AgreementReport.objects.filter(project=project, status=AgreementReport.Status.DONE,
                                               judge_run__isnull=False)
                .order_by("judge_run_id", "-computed_at", "-pk")
                .values("judge_run_id", "computed_at", "payload__judge__overall", "payload__judge__by_dimension",
                        "payload__labels_used")):
        newest.setdefault(found["judge_run_id"], found)
    points = []
    for run in runs:
        row = newest.get(run.pk)
        if row is None or row["payload__judge__overall"] is None and not row["payload__judge__by_dimension"]:
            continue
        dims = {r["key"]: p for r in (row["payload__judge__by_dimension"] or []) if (p := _point(r)) is not None}
        points.append(RunPoint(run=run, label=_label(run), computed_at=row["computed_at"],
                               overall=_point(row["payload__judge__overall"]), by_dimension=dims,
                               labels_used=row["payload__labels_used"] or "first"))
    return points


def _line(code: str, name: str, target: float, safety: bool, points: list[Point | None]) -> Line:
    latest = points[-1] if points else None
    reached = latest is not None and latest.agreement is not None and latest.agreement >= target - 1e-9
    sure = reached and latest is not None and latest.low is not None and latest.low >= target - 1e-9
    values = [p.agreement for p in points if p is not None and p.agreement is not None]
    return Line(code=code, name=name, target=target, safety=safety, points=points, latest=latest,
                converged=reached, sure=sure, best=max(values) if values else None)


def convergence_lines(*, points: list[RunPoint], targets: Targets, english: bool) -> tuple[Line | None, list[Line]]:
    """The overall line and one line per dimension any run reported, in taxonomy order."""
    if not points:
        return None, []
    overall = _line("overall", "", targets.other_pct / 100, False, [p.overall for p in points])
    codes = {code for p in points for code in p.by_dimension}
    lines = []
    for dim in Dimension.objects.filter(code__in=codes).order_by("sort_order", "code"):
        lines.append(_line(dim.code, dim.name_en if english else dim.name_zh, targets.for_dimension(dim.code),
                           dim.code in targets.safety_codes, [p.by_dimension.get(dim.code) for p in points]))
    return overall, lines


def _y(value: float, y_min: float = Y_MIN) -> float:
    share = (max(y_min, min(1.0, value)) - y_min) / (1 - y_min)
    return round(PAD_T + (1 - share) * (CHART_H - PAD_T - PAD_B), 2)


def _y_min(line: Line) -> float:
    """The axis starts at 50%, or lower (in steps of 10 points) when a point or an interval falls below it."""
    values = [v for p in line.points if p is not None for v in (p.agreement, p.low) if v is not None]
    lowest = min([Y_MIN, *values])
    return max(0.0, math.floor(lowest * 10 + 1e-9) / 10)


def convergence_chart(line: Line, labels: list[str]) -> dict[str, Any]:
    """Server-side SVG geometry of one line: points with their intervals, the target, axis ticks."""
    n = len(line.points)
    y_min = _y_min(line)

    def y(value: float) -> float:
        return _y(value, y_min)

    plot_w = CHART_W - PAD_L - PAD_R
    step = plot_w / max(1, n - 1) if n > 1 else 0
    xs = [round(PAD_L + (i * step if n > 1 else plot_w / 2), 2) for i in range(n)]
    marks: list[dict[str, Any]] = []
    path: list[str] = []
    for i, p in enumerate(line.points):
        if p is None or p.agreement is None:
            continue
        x, at = xs[i], y(p.agreement)
        path.append(f"{'M' if not path else 'L'}{x},{at}")
        marks.append({"x": x, "y": at, "low": y(p.low if p.low is not None else p.agreement),
                      "high": y(p.high if p.high is not None else p.agreement),
                      "met": p.agreement >= line.target - 1e-9, "label": labels[i],
                      "value": f"{100 * p.agreement:.1f}%"})
    step_v = 0.1 if y_min >= 0.5 else 0.2
    levels = [1.0 - k * step_v for k in range(int(round((1.0 - y_min) / step_v)) + 1)]
    ticks = [{"y": y(v), "label": f"{round(v * 100)}%"} for v in levels if v >= y_min - 1e-9]
    return {"width": CHART_W, "height": CHART_H, "left": PAD_L, "right": CHART_W - PAD_R,
            "bottom": CHART_H - PAD_B, "target_y": y(line.target), "target": f"{100 * line.target:g}%",
            "path": " ".join(path), "marks": marks, "ticks": ticks,
            "xlabels": [{"x": xs[i], "text": f"#{i + 1}"} for i in range(n)], "text_y": CHART_H - PAD_B + 16}
