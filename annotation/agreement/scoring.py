"""HeartBench model scores from rubric hits, vectorised, plus rank comparisons.

The formula is HeartBench's (``heartbench/score_answers.py``). For one model's
response to question q and a rubric dimension D of that question:

* raw[D] = sum of the scores of the hit items in D;
* min[D] = sum of the negative scores in D, max[D] = sum of the positive scores;
* span = max[D] - min[D]; norm[D] = 0 when span <= 0, otherwise
  100 * ln(raw - min + 1) / ln(span + 1), with the numerator's base clamped to 1
  when it is <= 0 (it never is: raw >= min by construction);
* the question score is the mean of norm[D] over the question's dimensions, the
  gate dimension excluded;
* a model's score for an ability (dimension) is the mean of its norms over the
  questions that have that dimension, and the overall score is the mean of the
  ability scores (15 abilities on the public question set).

The gate dimension ("其他", "other") holds items such as "the AI answers as the user
instead of replying". Its scores are null in the data. HeartBench's code counts a gate
item as hit only when the item is hit *and its score is > 0*; with null scores read
as 0 that never happens (one public gate item even scores -4), so in HeartBench a gate
hit never zeroes a question. ``gate_zeroes=False`` (the default) reproduces that
exactly; ``gate_zeroes=True`` applies the evident intent: any hit gate item sets every
dimension norm and the question score to 0 (the dimensions still count, as zeros, in
the ability means, as in HeartBench's own zeroing branch).

Quirks of that formula a reader of the scores should know, counted by
:func:`scorer_quirks` so that the report can show them beside the scores:

* the gate item never zeroes a score (above): the count is the questions where a gate
  item was hit and the score stood;
* a dimension holding only penalty items (min < 0, max = 0) scores 100 when none of
  them is hit (ln(span + 1) / ln(span + 1)): a free 100 for saying nothing wrong;
* a failed judge call leaves no verdict; HeartBench drops that answer, and so does the
  report (a task the judge did not label in full is left out of the judge's scores).
  That count comes from the caller, which knows which tasks were judged.

Inputs are flat per-item arrays for one model; :func:`flatten_rubrics` and
:func:`hits_from_details` build them from HeartBench rows and judge ``detail`` vectors.
No Django import here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from annotation.agreement.stats import cluster_weights, percentile_interval

__all__ = [
    "GATE_DIMENSION",
    "FlatRubric",
    "ModelScores",
    "RankStability",
    "ScorerQuirks",
    "flatten_rubrics",
    "hits_from_details",
    "kendall_tau",
    "overall_from_norms",
    "rank_models",
    "rank_stability_bootstrap",
    "score_model",
    "scorer_quirks",
]

GATE_DIMENSION = "其他"


@dataclass(frozen=True)
class FlatRubric:
    """Rubric items of many questions laid out as aligned flat arrays."""

    question_idx: NDArray[np.int64]
    """Question index of each item (position in ``question_ids``)."""
    dim_idx: NDArray[np.int64]
    """Dimension index of each item (position in ``dimensions``)."""
    score: NDArray[np.float64]
    """Item score; nan where the data has null (the gate items)."""
    position: NDArray[np.int64]
    """Position of the item inside its question's rubric (aligns ``detail`` vectors)."""
    question_ids: tuple[str, ...]
    dimensions: tuple[str, ...]
    """Dimension names, sorted (HeartBench reports abilities in sorted order)."""
    gate_dim: int | None
    """Index of the gate dimension, or None when no question has one."""


def flatten_rubrics(
    questions: Iterable[Mapping[str, Any]],
    gate_dimension: str = GATE_DIMENSION,
) -> FlatRubric:
    """Lay out HeartBench question rows (``question_id``, ``rubric``) as flat arrays.

    The gate dimension is identified by name, which is what HeartBench does; an item
    without a dimension is skipped, as HeartBench skips it.
    """
    qids: list[str] = []
    q_of: list[int] = []
    names: list[str] = []
    scores: list[float] = []
    positions: list[int] = []
    for q_index, row in enumerate(questions):
        qids.append(str(row["question_id"]))
        for pos, item in enumerate(row.get("rubric") or ()):
            dim = item.get("dimension")
            if dim is None:
                continue
            raw = item.get("score")
            q_of.append(q_index)
            names.append(str(dim))
            scores.append(float("nan") if raw is None else float(raw))
            positions.append(pos)
    dimensions = tuple(sorted(set(names)))
    lookup = {name: i for i, name in enumerate(dimensions)}
    return FlatRubric(
        question_idx=np.asarray(q_of, dtype=np.int64),
        dim_idx=np.asarray([lookup[n] for n in names], dtype=np.int64),
        score=np.asarray(scores, dtype=np.float64),
        position=np.asarray(positions, dtype=np.int64),
        question_ids=tuple(qids),
        dimensions=dimensions,
        gate_dim=lookup.get(gate_dimension),
    )


def hits_from_details(flat: FlatRubric, details: Sequence[Sequence[int] | None]) -> NDArray[np.int8]:
    """Return per-item 0/1 hits from one ``detail`` vector per question.

    As in HeartBench, a detail shorter than the rubric is padded with misses and a
    longer one is truncated; ``None`` (no verdict) counts as all misses. Any non-zero
    entry is a hit.
    """
    if len(details) != len(flat.question_ids):
        raise ValueError("one detail vector per question is required")
    lengths = np.asarray([0 if d is None else len(d) for d in details], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    chunks = [np.asarray(d, dtype=np.int64).ravel() for d in details if d is not None]
    values = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
    inside = flat.position < lengths[flat.question_idx]
    flat_pos = offsets[flat.question_idx] + np.where(inside, flat.position, 0)
    hits = np.zeros(flat.position.shape[0], dtype=np.int8)
    hits[inside] = values[flat_pos[inside]] != 0
    return hits


class ModelScores(NamedTuple):
    """HeartBench scores of one model, from :func:`score_model`."""

    question_scores: NDArray[np.float64]
    """(n_questions,): mean non-gate dimension norm; 0 for a question without one."""
    dim_norms: NDArray[np.float64]
    """(n_questions, n_dims): 0..100 norm, nan where the question lacks the dimension (and for the gate)."""
    dim_raw: NDArray[np.float64]
    """(n_questions, n_dims): raw hit score sum per dimension, nan where absent."""
    ability_scores: NDArray[np.float64]
    """(n_dims,): mean norm over questions having the dimension; nan if none (and for the gate)."""
    overall: float
    """Mean of the defined ability scores; nan when there is none."""
    gate_hit: NDArray[np.bool_]
    """(n_questions,): whether the gate rule zeroed the question."""


def _gate_mask(
    dim_idx: NDArray[np.int64],
    score: NDArray[np.float64],
    gate_dim: int | None,
    n_dims: int,
) -> NDArray[np.bool_]:
    """Items of the gate dimension: ``gate_dim`` if given, else any dimension with a nan score."""
    if gate_dim is not None:
        # numpy types an array comparison as Any; asarray of a bool array is the array itself.
        return np.asarray(dim_idx == gate_dim, dtype=np.bool_)
    gate_dims = np.zeros(n_dims, dtype=bool)
    gate_dims[dim_idx[np.isnan(score)]] = True
    return gate_dims[dim_idx]


def score_model(
    question_idx: ArrayLike,
    dim_idx: ArrayLike,
    score: ArrayLike,
    hit: ArrayLike,
    *,
    n_questions: int | None = None,
    n_dims: int | None = None,
    gate_dim: int | None = None,
    gate_zeroes: bool = False,
) -> ModelScores:
    """Score one model's rubric hits with HeartBench's formula (see the module docstring).

    ``question_idx``, ``dim_idx``, ``score`` and ``hit`` are aligned per rubric item.
    ``score`` is nan for null scores; a nan score counts as 0 everywhere, as in
    HeartBench. The gate dimension is ``gate_dim`` when given (recommended: that is
    how HeartBench finds it, by name); otherwise every dimension holding a nan-scored
    item is taken as the gate. Gate items never contribute to any norm. With
    ``gate_zeroes=False`` a question is zeroed only by a hit gate item whose score is
    > 0 (HeartBench parity: never, on the public data); with ``True`` by any hit gate item.
    """
    q = np.asarray(question_idx, dtype=np.int64)
    d = np.asarray(dim_idx, dtype=np.int64)
    s_raw = np.asarray(score, dtype=np.float64)
    h = np.asarray(hit) != 0
    if not (q.shape == d.shape == s_raw.shape == h.shape) or q.ndim != 1:
        raise ValueError("question_idx, dim_idx, score and hit must be aligned 1-D arrays")
    n_q = int(n_questions) if n_questions is not None else (int(q.max()) + 1 if q.size else 0)
    n_d = int(n_dims) if n_dims is not None else (int(d.max()) + 1 if d.size else 0)
    if gate_dim is not None:
        n_d = max(n_d, gate_dim + 1)
    s = np.nan_to_num(s_raw, nan=0.0)
    gate = _gate_mask(d, s_raw, gate_dim, n_d)

    # Per-question gate verdict, from the gate items only.
    zeroing = gate & h if gate_zeroes else gate & h & (s > 0)
    gate_hit = np.bincount(q[zeroing], minlength=n_q).astype(bool)

    # Per (question, dimension) sums over the non-gate items, on a dense grid.
    body = ~gate
    cell = q[body] * n_d + d[body]
    size = n_q * n_d
    sb, hb = s[body], h[body]
    present = np.bincount(cell, minlength=size).reshape(n_q, n_d) > 0
    low = np.bincount(cell, weights=np.minimum(sb, 0.0), minlength=size).reshape(n_q, n_d)
    high = np.bincount(cell, weights=np.maximum(sb, 0.0), minlength=size).reshape(n_q, n_d)
    raw = np.bincount(cell, weights=np.where(hb, sb, 0.0), minlength=size).reshape(n_q, n_d)

    span = high - low
    scorable = span > 0
    numerator_base = np.where(raw - low + 1.0 > 0, raw - low + 1.0, 1.0)
    denominator = np.log(np.where(scorable, span + 1.0, 2.0))
    norm = np.where(scorable, 100.0 * np.log(numerator_base) / denominator, 0.0)
    norm[gate_hit] = 0.0
    dim_norms = np.where(present, norm, np.nan)
    dim_raw = np.where(present, raw, np.nan)

    n_present = present.sum(axis=1)
    norm_sum = np.where(present, norm, 0.0).sum(axis=1)
    # HeartBench scores a question without any non-gate dimension as 0.
    question_scores = np.where(n_present > 0, norm_sum / np.maximum(n_present, 1), 0.0)
    ability_scores = _ability_means(np.where(present, norm, 0.0), present.astype(np.float64))
    defined = ~np.isnan(ability_scores)
    overall = float(ability_scores[defined].mean()) if defined.any() else float("nan")
    return ModelScores(question_scores, dim_norms, dim_raw, ability_scores, overall, gate_hit)


class ScorerQuirks(NamedTuple):
    """Counts of :func:`scorer_quirks` (see the module docstring)."""

    gate_hits_not_zeroing: int
    """Questions with a hit gate item whose score was not zeroed."""
    penalty_only_cells: int
    """(question, dimension) cells holding only penalty items."""
    penalty_only_untouched: int
    """Of those, cells where no penalty was hit: each scored 100."""


def scorer_quirks(
    question_idx: ArrayLike,
    dim_idx: ArrayLike,
    score: ArrayLike,
    hit: ArrayLike,
    *,
    gate_dim: int | None = None,
    gate_zeroes: bool = False,
) -> ScorerQuirks:
    """Count where HeartBench's formula behaves surprisingly for one model's hits.

    Arguments as for :func:`score_model` (same alignment, same gate identification).
    """
    q = np.asarray(question_idx, dtype=np.int64)
    d = np.asarray(dim_idx, dtype=np.int64)
    s_raw = np.asarray(score, dtype=np.float64)
    h = np.asarray(hit) != 0
    if not (q.shape == d.shape == s_raw.shape == h.shape) or q.ndim != 1:
        raise ValueError("question_idx, dim_idx, score and hit must be aligned 1-D arrays")
    if q.size == 0:
        return ScorerQuirks(0, 0, 0)
    n_d = int(d.max()) + 1 if gate_dim is None else max(int(d.max()) + 1, gate_dim + 1)
    s = np.nan_to_num(s_raw, nan=0.0)
    gate = _gate_mask(d, s_raw, gate_dim, n_d)
    zeroing = gate & h if gate_zeroes else gate & h & (s > 0)
    hit_gate_questions = np.unique(q[gate & h])
    zeroed_questions = np.unique(q[zeroing])
    body = ~gate
    cells, cell_of = np.unique(q[body] * n_d + d[body], return_inverse=True)
    cell_of = cell_of.reshape(-1)
    low = np.bincount(cell_of, weights=np.minimum(s[body], 0.0), minlength=cells.size)
    high = np.bincount(cell_of, weights=np.maximum(s[body], 0.0), minlength=cells.size)
    hits = np.bincount(cell_of, weights=h[body].astype(np.float64), minlength=cells.size)
    penalty_only = (low < 0) & (high <= 0)
    return ScorerQuirks(
        int(np.setdiff1d(hit_gate_questions, zeroed_questions).size),
        int(penalty_only.sum()),
        int((penalty_only & (hits == 0)).sum()),
    )


def _ability_means(norm_sums: NDArray[np.float64], counts: NDArray[np.float64]) -> NDArray[np.float64]:
    """Column means norm_sums.sum(0) / counts.sum(0) over any leading axes, nan where empty."""
    total = norm_sums.sum(axis=-2)
    n = counts.sum(axis=-2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, total / np.where(n > 0, n, 1.0), np.nan)


def overall_from_norms(
    dim_norms: ArrayLike,
    question_weights: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Return HeartBench overall scores from per-question dimension norms.

    ``dim_norms`` is (..., n_questions, n_dims) with nan where a question lacks a
    dimension (the ``dim_norms`` of :func:`score_model`, possibly stacked over
    models). ``question_weights`` (n_questions,) or (n_replicates, n_questions) gives
    each question a multiplicity, as a bootstrap does; ability means and the overall
    mean are taken with those weights. The result drops the last two axes (and gains
    a leading replicate axis for 2-D weights).
    """
    norms = np.asarray(dim_norms, dtype=np.float64)
    present = ~np.isnan(norms)
    filled = np.where(present, norms, 0.0)
    if question_weights is None:
        abilities = _ability_means(filled, present.astype(np.float64))
    else:
        w = np.asarray(question_weights, dtype=np.float64)
        # Weighted sums over questions as one matrix product per quantity (BLAS; a plain
        # einsum of the same contraction took 0.3 s per call at ten times HeartBench).
        stacked = filled.reshape(-1, *filled.shape[-2:])
        n_stack, n_q, n_d = stacked.shape
        num = (w @ stacked.transpose(1, 0, 2).reshape(n_q, n_stack * n_d)).reshape(*w.shape[:-1], n_stack, n_d)
        mask = present.reshape(-1, *present.shape[-2:]).astype(np.float64)
        den = (w @ mask.transpose(1, 0, 2).reshape(n_q, n_stack * n_d)).reshape(*w.shape[:-1], n_stack, n_d)
        with np.errstate(divide="ignore", invalid="ignore"):
            abilities = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
        abilities = abilities.reshape(*w.shape[:-1], *norms.shape[:-2], norms.shape[-1])
    defined = ~np.isnan(abilities)
    n_def = defined.sum(axis=-1)
    ability_sum = np.where(defined, abilities, 0.0).sum(axis=-1)
    return np.where(n_def > 0, ability_sum / np.maximum(n_def, 1), np.nan)


# -------------------------------------------------------------------- ranking


def _sorted_runs(values: NDArray[Any]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Sort along the last axis and find the runs of equal values.

    Returns ``order`` (the argsort) and ``start``: for each sorted position, the
    position where its run of equal values begins, i.e. how many values are strictly
    smaller. A nan is unequal to everything, so each nan (sorted last) is a run of its own.
    """
    order = np.argsort(values, axis=-1)
    ordered = np.take_along_axis(values, order, axis=-1)
    position = np.arange(values.shape[-1])
    begins = np.ones(values.shape, dtype=bool)
    begins[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    start = np.maximum.accumulate(np.where(begins, position, 0), axis=-1)
    return order, start


def _tied_pairs(start: NDArray[np.intp]) -> NDArray[np.int64]:
    """Pairs of equal values along the last axis, from :func:`_sorted_runs`'s ``start``.

    The k-th value of a run has k - start earlier equal values, so the sum over a run of
    t values is t(t-1)/2.
    """
    tied: NDArray[np.int64] = (np.arange(start.shape[-1]) - start).sum(axis=-1, dtype=np.int64)
    return tied


def _competition_ranks(scores: NDArray[np.float64]) -> NDArray[np.int64]:
    """Rank along the last axis: 1 + number of strictly better scores; nan ranks last.

    One sort per row, O(n log n): the number of strictly better scores is where a
    score's run of equal values begins in descending order. Comparing all n^2 pairs
    took 3.5 s of a 44 s report over 1,000 replicates of 2,000 models (5.3 s for a
    synthetic (1,000, 2,000) array, against 0.07-0.1 s now).
    """
    nan = np.isnan(scores)
    order, start = _sorted_runs(-scores)
    ranks = np.empty(scores.shape, dtype=np.int64)
    np.put_along_axis(ranks, order, start + 1, axis=-1)
    # nan scores rank below every real score, tied among themselves.
    n_real = (~nan).sum(axis=-1, keepdims=True)
    ranked: NDArray[np.int64] = np.where(nan, n_real + 1, ranks)
    return ranked


def rank_models(scores_by_model: Mapping[str, float]) -> dict[str, int]:
    """Rank models by score, best = 1, with competition ranking for ties (1, 2, 2, 4).

    A nan score ranks after every real score.
    """
    names = list(scores_by_model)
    values = np.asarray([scores_by_model[n] for n in names], dtype=np.float64)
    ranks = _competition_ranks(values) if names else np.zeros(0, np.int64)
    return {name: int(r) for name, r in zip(names, ranks)}


# Width of the blocks whose inversions _inversions counts by comparing every pair: merging
# from width 1 instead cost 30% more at 1,000 x 2,000 (a stable argsort over millions of
# two-value rows is mostly per-row overhead).
_PAIRWISE_BLOCK = 8


def _inversions(values: NDArray[np.int64]) -> NDArray[np.int64]:
    """Pairs i < j with values[..., i] > values[..., j] (strictly), per row of a 2-D integer array.

    Bottom-up merge sort over every row at once. Rows are padded to a power-of-two
    multiple of :data:`_PAIRWISE_BLOCK` with a value above all others, which adds no
    inversion; blocks of that width count their pairs directly and are sorted. Then,
    at width w, each row is a sequence of sorted runs of w values, merged in pairs by a
    stable argsort (numpy's timsort finds the two runs and merges them in linear time).
    A right-hand value at merged position p, k-th of its run, has p - k left-hand values
    at or below it, so w - (p - k) above it: summed over the run, w*w + w(w-1)/2 minus
    the sum of the right-hand positions. Stability puts equal values left first, so
    ties never count.
    """
    rows, n = values.shape
    size = _PAIRWISE_BLOCK
    while size < n:
        size *= 2
    runs = np.full((rows, size), values.max(initial=0) + 1, dtype=np.int64)
    runs[:, :n] = values
    blocks = runs.reshape(-1, _PAIRWISE_BLOCK)
    first, second = np.triu_indices(_PAIRWISE_BLOCK, 1)
    inverted = (blocks[:, first] > blocks[:, second]).reshape(rows, -1)
    total: NDArray[np.int64] = np.count_nonzero(inverted, axis=-1).astype(np.int64)
    runs = np.sort(blocks, axis=-1).reshape(rows, size)
    width = _PAIRWISE_BLOCK
    while width < size:
        pairs = runs.reshape(-1, 2 * width)
        order = np.argsort(pairs, axis=-1, kind="stable")
        right_positions = np.where(order >= width, np.arange(2 * width), 0).sum(axis=-1)
        above = width * width + width * (width - 1) // 2 - right_positions
        total += above.reshape(rows, -1).sum(axis=-1)
        runs = np.take_along_axis(pairs, order, axis=-1).reshape(rows, size)
        width *= 2
    return total


def _kendall_tau_b(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    """Kendall's tau-b along the last axis of two equally shaped arrays; nan where undefined.

    Knight's O(n log n) algorithm, as ``scipy.stats.kendalltau`` computes it, vectorised
    over the leading axes: count the pairs tied in x, in y and in both from sorted runs,
    sort by (x, y), and count the discordant pairs as the inversions of y in that order.
    Comparing all n^2 pairs instead took 38 s of a 44 s report (1,000 bootstrap
    replicates of 2,000 models), and 84 s for a synthetic (1,000, 2,000) pair of arrays
    that this does in 0.4-0.6 s. A row holding a nan gives nan, as it did; infinities
    are ordinary values, tied when equal, as in scipy (the all-pairs differences made
    two equal infinities a nan; overall scores are never infinite).
    """
    shape = x.shape
    n = shape[-1]
    if n < 2:
        return np.full(shape[:-1], np.nan)
    x2, y2 = x.reshape(-1, n), y.reshape(-1, n)
    # 0-based min ranks (number of strictly smaller values) replace the values: integers
    # that sort like them, so that (x, y) becomes one integer key.
    x_order, x_start = _sorted_runs(x2)
    y_order, y_start = _sorted_runs(y2)
    rank_x = np.empty(x2.shape, dtype=np.int64)
    rank_y = np.empty(y2.shape, dtype=np.int64)
    np.put_along_axis(rank_x, x_order, x_start, axis=-1)
    np.put_along_axis(rank_y, y_order, y_start, axis=-1)
    key = rank_x * n + rank_y
    order, key_start = _sorted_runs(key)
    # Within a run of equal x the y ranks are ascending, so only pairs untied in x can
    # be inversions: exactly the discordant pairs.
    discordant = _inversions(np.take_along_axis(rank_y, order, axis=-1))
    total = n * (n - 1) // 2
    x_tied, y_tied = _tied_pairs(x_start), _tied_pairs(y_start)
    concordant_minus_discordant = total - x_tied - y_tied + _tied_pairs(key_start) - 2 * discordant
    # (untied-in-x pairs) * (untied-in-y pairs) is tau-b's denominator squared.
    denom = np.sqrt((total - x_tied).astype(np.float64) * (total - y_tied))
    undefined = (denom == 0) | np.isnan(x2).any(axis=-1) | np.isnan(y2).any(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = np.where(undefined, np.nan, concordant_minus_discordant / np.where(undefined, 1.0, denom))
    return tau.reshape(shape[:-1])


def kendall_tau(x: ArrayLike, y: ArrayLike) -> float:
    """Return Kendall's tau-b between two score (or rank) vectors; nan when undefined.

    Tau-b corrects for ties, matching ``scipy.stats.kendalltau``'s default; O(n log n).
    A nan on either side makes the result nan; rank nan models with
    :func:`rank_models` first.
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("x and y must be 1-D and of equal length")
    if a.size < 2:
        return float("nan")
    return float(_kendall_tau_b(a, b))


class RankStability(NamedTuple):
    """Outcome of :func:`rank_stability_bootstrap`; arrays follow the model axis."""

    human_overall: NDArray[np.float64]
    judge_overall: NDArray[np.float64]
    human_rank: NDArray[np.int64]
    judge_rank: NDArray[np.int64]
    human_keep_share: NDArray[np.float64]
    """Share of replicates in which a model keeps its full-data human-consensus rank."""
    judge_keep_share: NDArray[np.float64]
    """Same for the judge ranking."""
    tau: float
    """Kendall tau-b between the human and judge overall scores on the full data."""
    tau_ci: tuple[float, float]
    """Percentile interval of tau over replicates (nan replicates ignored)."""
    tau_replicates: NDArray[np.float64]


def rank_stability_bootstrap(
    human_norms: ArrayLike,
    judge_norms: ArrayLike,
    *,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int | np.random.Generator | None = 0,
) -> RankStability:
    """Bootstrap questions to see how stable the model rankings are.

    ``human_norms`` and ``judge_norms`` are (n_models, n_questions, n_dims) stacks of
    :func:`score_model`'s ``dim_norms``, from the human majority and from the judge,
    for the same models and questions in the same order. Questions are the clusters:
    each replicate draws n_questions questions with replacement (the multiplicities
    of :func:`annotation.agreement.stats.cluster_weights`), recomputes every model's
    overall score with those weights, ranks the models (competition ranking, best 1)
    and computes Kendall's tau-b between the human and judge overall scores.
    """
    human = np.asarray(human_norms, dtype=np.float64)
    judge = np.asarray(judge_norms, dtype=np.float64)
    if human.shape != judge.shape or human.ndim != 3:
        raise ValueError("human_norms and judge_norms must be equal (n_models, n_questions, n_dims) arrays")
    n_questions = human.shape[1]
    human_overall = overall_from_norms(human)
    judge_overall = overall_from_norms(judge)
    human_rank = _competition_ranks(human_overall)
    judge_rank = _competition_ranks(judge_overall)
    tau = float(_kendall_tau_b(human_overall, judge_overall)) if human.shape[0] >= 2 else float("nan")

    human_keep = np.zeros(human.shape[0])
    judge_keep = np.zeros(human.shape[0])
    taus = np.full(n_boot, np.nan)
    row = 0
    for weights in cluster_weights(n_questions, n_boot, seed):
        h_boot = overall_from_norms(human, weights)
        j_boot = overall_from_norms(judge, weights)
        human_keep += (_competition_ranks(h_boot) == human_rank).sum(axis=0)
        judge_keep += (_competition_ranks(j_boot) == judge_rank).sum(axis=0)
        if human.shape[0] >= 2:
            taus[row : row + len(weights)] = _kendall_tau_b(h_boot, j_boot)
        row += len(weights)
    done = max(row, 1)
    nan_share = np.full(human.shape[0], np.nan)
    return RankStability(
        human_overall,
        judge_overall,
        human_rank,
        judge_rank,
        human_keep / done if row else nan_share,
        judge_keep / done if row else nan_share,
        tau,
        percentile_interval(taus, alpha),
        taus,
    )
