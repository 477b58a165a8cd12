"""Is the benchmark any good? Separation, gaps, saturation and stability of model scores.

A benchmark earns its keep when it tells models apart: the scores spread, the order of
the models survives resampling the questions, neighbours in that order are separated by
more than chance, the best model is not already at the ceiling, and ranks hold still.
These are GrowLoop's five gates; this module computes the figures behind them from the
per-question dimension norms of :func:`annotation.agreement.scoring.score_model` (the one
HeartBench score computation of the project: nothing here scores a hit itself).

Resampling is by question (the dialogue is the unit that was sampled), 1,000 replicates
by default, drawn by :func:`annotation.agreement.stats.cluster_weights` from a recorded
seed; every side (human consensus, judge) is read off the same replicates, so the two
are compared on identical resamples. Each replicate recomputes each model's overall
score with :func:`annotation.agreement.scoring.overall_from_norms` (question weights).

No Django import here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from annotation.agreement.scoring import overall_from_norms
from annotation.agreement.stats import cluster_weights, percentile_interval

__all__ = [
    "HISTOGRAM_EDGES",
    "N_BOOT",
    "RANK_TOLERANCE",
    "Distribution",
    "Gate",
    "SideFigures",
    "Thresholds",
    "bootstrap_sides",
    "constant_items",
    "gates_evaluate",
    "layer_scores",
    "score_distribution",
]

# GrowLoop's number: ranks must hold under 1,000 bootstrap resamples.
N_BOOT = 1000
# "Stable rank": within one place of the full-data rank (ours; GrowLoop gives no number).
RANK_TOLERANCE = 1
HISTOGRAM_EDGES = tuple(float(x) for x in range(0, 101, 10))


@dataclass(frozen=True)
class Thresholds:
    """The five gates' bars. Defaults are ours where GrowLoop gives no number (all but the 1,000 resamples)."""

    spread_min: float = 10.0
    """Points: best minus worst overall score must reach this."""
    separation_min: float = 0.95
    """Share of resamples that keep the full order of the models."""
    gaps_significant_min: float = 1.0
    """Share of adjacent pairs whose gap has a 95% interval excluding 0."""
    saturation_max: float = 90.0
    """Points: the best model must score below this."""
    rank_stability_min: float = 0.95
    """For every model, share of resamples with its rank within RANK_TOLERANCE of the full-data rank."""


class SideFigures(NamedTuple):
    """Bootstrap figures of one side (human consensus or judge); model arrays follow the input's model axis."""

    overall: NDArray[np.float64]
    """(n_models,) full-data overall score."""
    overall_ci: NDArray[np.float64]
    """(n_models, 2) percentile interval of the overall score."""
    order: NDArray[np.int64]
    """Model indices, best first (ties broken by index)."""
    rank: NDArray[np.int64]
    """(n_models,) competition rank on the full data, best 1."""
    order_keep_share: float
    """Share of replicates in which every adjacent pair of ``order`` keeps its strict order."""
    gap: NDArray[np.float64]
    """(n_models - 1,) score of ``order[k]`` minus score of ``order[k + 1]``."""
    gap_ci: NDArray[np.float64]
    """(n_models - 1, 2) percentile interval of each gap over the replicates."""
    gap_significant: NDArray[np.bool_]
    """(n_models - 1,) whether the gap's interval excludes 0."""
    rank_keep_share: NDArray[np.float64]
    """(n_models,) share of replicates with exactly the full-data rank."""
    rank_near_share: NDArray[np.float64]
    """(n_models,) share of replicates with the rank within RANK_TOLERANCE of the full-data rank."""
    n_boot: int


def _ranks(scores: NDArray[np.float64]) -> NDArray[np.int64]:
    """Competition ranks along the last axis (1 + strictly better scores); nan counts as worst."""
    x = np.where(np.isnan(scores), -np.inf, scores)
    ranks: NDArray[np.int64] = (1 + (x[..., None, :] > x[..., :, None]).sum(axis=-1)).astype(np.int64)
    return ranks


def _figures(overall: NDArray[np.float64], boot: NDArray[np.float64], alpha: float) -> SideFigures:
    n_models = overall.size
    order = np.lexsort((np.arange(n_models), -np.where(np.isnan(overall), -np.inf, overall))).astype(np.int64)
    rank = _ranks(overall)
    boot_rank = _ranks(boot)
    in_order = boot[:, order]
    steps = in_order[:, :-1] - in_order[:, 1:]
    keep = np.all(steps > 0, axis=1) if n_models > 1 else np.ones(boot.shape[0], bool)
    gap = overall[order][:-1] - overall[order][1:]
    gap_ci = np.array([percentile_interval(steps[:, k], alpha) for k in range(n_models - 1)]).reshape(-1, 2)
    significant = (gap_ci[:, 0] > 0) | (gap_ci[:, 1] < 0)
    overall_ci = np.array([percentile_interval(boot[:, k], alpha) for k in range(n_models)]).reshape(-1, 2)
    n = max(1, boot.shape[0])
    return SideFigures(
        overall=overall,
        overall_ci=overall_ci,
        order=order,
        rank=rank,
        order_keep_share=float(keep.sum() / n) if boot.shape[0] else float("nan"),
        gap=gap,
        gap_ci=gap_ci,
        gap_significant=np.asarray(significant, dtype=np.bool_),
        rank_keep_share=(boot_rank == rank).sum(axis=0) / n,
        rank_near_share=(np.abs(boot_rank - rank) <= RANK_TOLERANCE).sum(axis=0) / n,
        n_boot=int(boot.shape[0]),
    )


def bootstrap_sides(
    norms_by_side: Sequence[ArrayLike],
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
    alpha: float = 0.05,
) -> list[SideFigures]:
    """Question-level bootstrap of every side's model scores, on one shared stream of replicates.

    Each element of ``norms_by_side`` is an (n_models, n_questions, n_dims) stack of
    ``score_model(...).dim_norms`` (nan where a model's question lacks the dimension),
    with the same models and questions in the same order on every side. A replicate
    draws n_questions questions with replacement and recomputes each model's overall
    score with the drawn multiplicities; all sides see the same draws.
    """
    sides = [np.asarray(n, dtype=np.float64) for n in norms_by_side]
    if not sides:
        return []
    shape = sides[0].shape
    if any(s.shape != shape or s.ndim != 3 for s in sides):
        raise ValueError("every side must be an (n_models, n_questions, n_dims) array of one shape")
    n_models, n_questions, n_dims = shape
    # Each side as a (questions, models x dims) matrix, so that a block of replicates is one
    # BLAS matrix product: 1,000 replicates x 2,960 questions x 14 models x 16 dimensions take
    # 0.3 s this way against 2.9 s through overall_from_norms's einsum, for the same figures
    # (tests/annotation/test_benchmark_stats.py checks them against it).
    present = [~np.isnan(s) for s in sides]
    filled = [np.where(p, s, 0.0).transpose(1, 0, 2).reshape(n_questions, -1) for s, p in zip(sides, present)]
    counts = [p.transpose(1, 0, 2).reshape(n_questions, -1).astype(np.float64) for p in present]
    # Both sides score the same units, so their dimension cells usually coincide: count them once.
    shared = all(np.array_equal(present[0], p) for p in present[1:])
    boots = [np.full((n_boot, n_models), np.nan) for _ in sides]
    row = 0
    for weights in cluster_weights(n_questions, n_boot, seed):
        w = weights.astype(np.float64)
        den_shared = w @ counts[0] if shared else None
        for k, boot in enumerate(boots):
            den = den_shared if den_shared is not None else w @ counts[k]
            boot[row : row + len(w)] = _overall_from_sums(w @ filled[k], den, n_models, n_dims)
        row += len(weights)
    return [_figures(overall_from_norms(side), boot[:row], alpha) for side, boot in zip(sides, boots)]


def _overall_from_sums(num: NDArray[np.float64], den: NDArray[np.float64], n_models: int,
                       n_dims: int) -> NDArray[np.float64]:
    """Overall scores (replicates, models) from weighted norm sums and counts (replicates, models x dims).

    The same arithmetic as ``overall_from_norms``: ability = weighted mean norm over the
    questions having the dimension, overall = mean of the defined abilities.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        abilities = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan).reshape(-1, n_models, n_dims)
    defined = ~np.isnan(abilities)
    n_def = defined.sum(axis=-1)
    total = np.where(defined, abilities, 0.0).sum(axis=-1)
    result: NDArray[np.float64] = np.where(n_def > 0, total / np.maximum(n_def, 1), np.nan)
    return result


def layer_scores(norms: ArrayLike, layer_of_question: ArrayLike, n_layers: int) -> NDArray[np.float64]:
    """(n_layers, n_models) overall scores on each layer's questions only (difficulty: normal, hard).

    ``layer_of_question`` gives each question's layer index (-1: in no layer). A layer
    without questions scores nan.
    """
    x = np.asarray(norms, dtype=np.float64)
    layer = np.asarray(layer_of_question, dtype=np.int64)
    if x.ndim != 3 or layer.shape != (x.shape[1],):
        raise ValueError("norms must be (n_models, n_questions, n_dims) and layers one per question")
    weights = (layer[None, :] == np.arange(n_layers)[:, None]).astype(np.float64)
    scores: NDArray[np.float64] = overall_from_norms(x, weights).reshape(n_layers, x.shape[0])
    return scores


class Distribution(NamedTuple):
    """Per-model summary of question scores: counts, mean, five-number summary, 10-point histogram."""

    n: NDArray[np.int64]
    mean: NDArray[np.float64]
    quantiles: NDArray[np.float64]
    """(n_models, 5): min, 25th, median, 75th, max (linear interpolation); nan without questions."""
    histogram: NDArray[np.int64]
    """(n_models, 10): questions scoring in [0, 10), [10, 20), ... [90, 100]."""


def score_distribution(question_scores: ArrayLike, present: ArrayLike) -> Distribution:
    """Summarise (n_models, n_questions) question scores over the questions each model was scored on."""
    s = np.asarray(question_scores, dtype=np.float64)
    mask = np.asarray(present, dtype=bool)
    if s.ndim != 2 or mask.shape != s.shape:
        raise ValueError("question_scores and present must be equal (n_models, n_questions) arrays")
    n = mask.sum(axis=1).astype(np.int64)
    quantiles = np.full((s.shape[0], 5), np.nan)
    mean = np.full(s.shape[0], np.nan)
    histogram = np.zeros((s.shape[0], len(HISTOGRAM_EDGES) - 1), np.int64)
    for k in range(s.shape[0]):
        values = s[k, mask[k]]
        if values.size == 0:
            continue
        mean[k] = values.mean()
        quantiles[k] = np.percentile(values, [0, 25, 50, 75, 100])
        histogram[k] = np.histogram(np.clip(values, 0.0, 100.0), bins=HISTOGRAM_EDGES)[0]
    return Distribution(n, mean, quantiles, histogram)


def constant_items(hits: ArrayLike) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Rubric items that do not discriminate: (every model hits, every model misses).

    ``hits`` is (n_models, n_items) with 1 hit, 0 miss and -1 no verdict. Only items
    with a verdict from every model, and at least two models, can be constant.
    """
    h = np.asarray(hits)
    if h.ndim != 2:
        raise ValueError("hits must be (n_models, n_items)")
    complete = np.all(h >= 0, axis=0) & (h.shape[0] >= 2)
    return (np.asarray(complete & np.all(h == 1, axis=0), dtype=np.bool_),
            np.asarray(complete & np.all(h == 0, axis=0), dtype=np.bool_))


class Gate(NamedTuple):
    """One gate's verdict: its figure, its bar, pass or fail (None: too few models to tell)."""

    key: str
    value: float | None
    threshold: float
    passed: bool | None


def gates_evaluate(
    *,
    overall: Sequence[float],
    order_keep_share: float | None,
    gap_significant: Sequence[bool],
    rank_near_share: Sequence[float],
    thresholds: Thresholds,
) -> list[Gate]:
    """GrowLoop's five gates on one side's figures, in order: spread, separation, gaps, saturation, stability.

    Spread and saturation are in score points (0-100); the other three are shares.
    With fewer than two models no gate can be told and every verdict is None.
    """
    scores = [float(x) for x in overall if x is not None and np.isfinite(x)]
    t = thresholds
    if len(scores) < 2:
        return [Gate(k, None, v, None) for k, v in (
            ("spread", t.spread_min), ("separation", t.separation_min), ("gaps", t.gaps_significant_min),
            ("saturation", t.saturation_max), ("stability", t.rank_stability_min))]
    spread = max(scores) - min(scores)
    top = max(scores)
    gaps = [bool(g) for g in gap_significant]
    gap_share = sum(gaps) / len(gaps) if gaps else 0.0
    stability = min(float(x) for x in rank_near_share)
    separation = float(order_keep_share) if order_keep_share is not None else 0.0
    # A small tolerance, so that a share stored rounded (0.95) still meets a bar of 0.95.
    eps = 1e-9
    return [
        Gate("spread", spread, t.spread_min, spread + eps >= t.spread_min),
        Gate("separation", separation, t.separation_min, separation + eps >= t.separation_min),
        Gate("gaps", gap_share, t.gaps_significant_min, gap_share + eps >= t.gaps_significant_min),
        Gate("saturation", top, t.saturation_max, top < t.saturation_max),
        Gate("stability", stability, t.rank_stability_min, stability + eps >= t.rank_stability_min),
    ]
