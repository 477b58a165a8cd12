"""What an agreement report is computed from: one project's labels as aligned arrays.

`annotation.agreement.report` fills a :class:`Material` from the database; the section
builders (:mod:`sections`, :mod:`consistency`) read it. Also the small helpers they
share: payload numbers (NaN becomes None), local calendar days, group bounds, and the
per-unit lookups derived once per material. No Django import here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from typing import Any

import numpy as np
from numpy.typing import NDArray

EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


@dataclass(frozen=True)
class Dim:
    code: str
    name_zh: str
    name_en: str
    category: str
    is_gate: bool


@dataclass(frozen=True)
class Expert:
    user_id: int
    pseudonym: str
    tier: str
    status: str


@dataclass(frozen=True)
class Params:
    """Knobs of one computation (defaults come from settings in `report.py`)."""

    n_boot: int = 1000
    seed: int = 0
    alpha: float = 0.05
    drift_window: int = 100
    drift_baseline: int = 200
    drift_margin: float = 0.10
    drift_alpha: float | None = 0.05
    curve_bucket: int = 50
    curve_max_points: int = 100
    disagreement_limit: int = 200
    tz: tzinfo | None = None


@dataclass
class Material:
    """One project's labels under one rubric version, as aligned arrays.

    Index spaces: tasks (``task_*``: those with a submitted assignment or a judge run's
    answer, see ``report.worked_tasks``), questions, models (of those tasks), rubric items
    (``item_*``), dimensions, experts. Units are the non-golden (task, rubric item) pairs with at
    least one label; golden labels are kept apart as flat cells (``golden_*``) because
    a golden task may be labelled by many more experts than a panel holds.
    """

    n_slots: int
    task_id: NDArray[np.int64]
    task_question: NDArray[np.int64]
    task_model: NDArray[np.int64]
    task_golden: NDArray[np.bool_]
    question_ext: list[str]
    question_difficulty: NDArray[np.int64]
    difficulties: list[str]
    models: list[str]
    item_id: NDArray[np.int64]
    item_position: NDArray[np.int64]
    item_dim: NDArray[np.int64]
    item_score: NDArray[np.float64]
    dims: list[Dim]
    experts: list[Expert]
    # Submitted assignments, flat.
    a_task: NDArray[np.int64]
    a_expert: NDArray[np.int64]
    a_submitted: NDArray[np.float64]
    a_leased: NDArray[np.float64]
    # Units of non-golden tasks.
    unit_task: NDArray[np.int64]
    unit_item: NDArray[np.int64]
    labels: NDArray[np.int8]
    unit_expert: NDArray[np.int64]
    unit_time: NDArray[np.float64]
    # Labels on golden tasks, flat, with the reference label (-1 when none).
    golden_task: NDArray[np.int64]
    golden_item: NDArray[np.int64]
    golden_expert: NDArray[np.int64]
    golden_time: NDArray[np.float64]
    golden_value: NDArray[np.int8]
    golden_ref: NDArray[np.int8]
    # The judge's label per unit (-1 when missing); None when no judge run is reported.
    judge: NDArray[np.int8] | None = None
    # Each task's own panel size (its overlap, extra experts for ties included); None: `n_slots` for all.
    task_overlap: NDArray[np.int64] | None = None
    # Everything the reported run judged in full, labelled by experts or not: the judge's own board.
    judged: JudgedUnits | None = None
    # A consultation's verdict per unit: -1 none, 0/1 the adjudicated label, 2 "item is ambiguous".
    adjudicated: NDArray[np.int8] | None = None
    # Which expert labels `labels` holds: "first" (as submitted) or "revised" (after the judge's
    # reveal, annotation.reveal); and the revised cells, to show agreement before and after.
    labels_used: str = "first"
    revisions: Revisions | None = None
    derived: dict[str, Any] = field(default_factory=dict)


@dataclass
class Revisions:
    """The label cells an expert revised after the reveal: unit, slot (0-based), first and revised value."""

    unit: NDArray[np.int64]
    slot: NDArray[np.int64]
    first: NDArray[np.int8]
    revised: NDArray[np.int8]
    judge_shown: NDArray[np.int8]  # the judge label the expert was shown


@dataclass
class JudgedUnits:
    """The units (task index, item index) of every task of the version the run judged in full, with its labels.

    The material's units are what experts labelled; the judge's own leaderboard must not
    wait for them, so it reads the run's labels on their own. `failed` marks (per task) the
    regular tasks the run failed on (a failed call, or only part of the items answered):
    dropped from the judge's board, as HeartBench drops them.
    """

    unit_task: NDArray[np.int64]
    unit_item: NDArray[np.int64]
    value: NDArray[np.int8]
    failed: NDArray[np.bool_]


# --------------------------------------------------------------------------- helpers


def num(value: Any, digits: int = 4) -> float | None:
    """A finite float rounded for the payload, or None (JSON has no NaN)."""
    if value is None:
        return None
    x = float(value)
    return round(x, digits) if math.isfinite(x) else None


def interval(pair: tuple[float, float], digits: int = 4) -> list[float | None]:
    return [num(pair[0], digits), num(pair[1], digits)]


def local_days(epochs: NDArray[np.float64], tz: tzinfo | None) -> NDArray[np.int64]:
    """Local calendar day (days since 1970-01-01) of each UTC epoch second.

    Offsets are looked up once per distinct UTC hour: time zones change offset on the
    hour, so that is exact and costs a few thousand lookups instead of one per row.
    """
    if epochs.size == 0:
        return np.zeros(0, dtype=np.int64)
    hours = np.floor(epochs / 3600.0).astype(np.int64)
    distinct, inverse = np.unique(hours, return_inverse=True)
    if tz is None:
        offsets = np.zeros(distinct.size)
    else:
        offsets = np.array([
            datetime.fromtimestamp(int(h) * 3600, tz).utcoffset().total_seconds()  # type: ignore[union-attr]
            for h in distinct
        ])
    return np.floor((epochs + offsets[inverse.reshape(-1)]) / 86400.0).astype(np.int64)


def day_text(day: int) -> str:
    return date.fromordinal(int(day) + EPOCH_ORDINAL).isoformat()


def group_bounds(sorted_keys: NDArray[np.int64], n_groups: int) -> NDArray[np.int64]:
    """Start offsets (n_groups + 1) of each key's run in an ascending key array."""
    return np.searchsorted(sorted_keys, np.arange(n_groups + 1)).astype(np.int64)


def derive(m: Material) -> dict[str, Any]:
    """Per-unit lookups shared by the sections (computed once per material)."""
    if m.derived:
        return m.derived
    hits = (m.labels == 1).sum(axis=1)
    total = (m.labels >= 0).sum(axis=1)
    panel = m.n_slots if m.task_overlap is None else m.task_overlap[m.unit_task]
    complete = total >= panel
    # A tie is no verdict (-1): it is never scored as a hit or a miss, and it is left out of
    # judge agreement and scores. A panel of one is `single`, not unanimous.
    majority = np.where(2 * hits > total, 1, np.where(2 * hits < total, 0, -1)).astype(np.int8)
    tied = complete & (2 * hits == total)
    # An adjudicated unit takes the consultation's label; "ambiguous" has none and, like a tie the
    # consultation left unresolved, is left out of judge agreement and scores (and counted).
    adjudicated = m.adjudicated if m.adjudicated is not None else np.full(hits.size, -1, np.int8)
    decided = complete & ((adjudicated == 0) | (adjudicated == 1))
    ambiguous = complete & (adjudicated == 2)
    majority = np.where(decided, adjudicated, np.where(ambiguous, -1, majority)).astype(np.int8)
    single = complete & (total == 1)
    unit_question = m.task_question[m.unit_task]
    unit_dim = m.item_dim[m.unit_item]
    categories = sorted({d.category for d in m.dims})
    dim_category = np.array([categories.index(d.category) for d in m.dims], dtype=np.int64)
    m.derived.update(
        complete=complete,
        majority=majority,
        unanimous=complete & (total > 1) & ((hits == 0) | (hits == total)),
        tied=tied,
        # What judge agreement and scores leave out: ties nobody adjudicated, and ambiguous items.
        tied_open=tied & ~decided & ~ambiguous,
        ambiguous=ambiguous,
        left_out=(tied & ~decided) | ambiguous,
        single=single,
        unit_question=unit_question,
        unit_model=m.task_model[m.unit_task],
        unit_dim=unit_dim,
        unit_category=dim_category[unit_dim],
        unit_difficulty=m.question_difficulty[unit_question],
        categories=categories,
        task_items=_items_per_task(m),
    )
    return m.derived


def _items_per_task(m: Material) -> NDArray[np.int64]:
    """Rubric items per task: its units, or for a golden task the distinct items of its golden labels."""
    items = np.bincount(m.unit_task, minlength=m.task_id.size)
    if m.golden_task.size:
        width = max(1, m.item_id.size)
        pairs = np.unique(m.golden_task * width + m.golden_item)
        items = items + np.bincount(pairs // width, minlength=m.task_id.size)
    return items
