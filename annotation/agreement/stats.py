"""Agreement statistics for expert and judge labels, as vectorised numpy functions.

Conventions shared by every function here:

* A *label vector* is a 1-D integer array of category codes (0/1 for rubric hits).
  Negative values mean "missing"; pairwise statistics drop a pair in which either
  side is missing.
* A *label matrix* is an ``(n_items, n_raters)`` integer array, one row per rubric
  item (label unit) and one column per rater slot, with ``-1`` for a missing label.
  Columns are slots, not people: in Rubrica the three labels of a task come from
  three randomly chosen experts, so per-person aggregation is left to the caller.
* Statistics that are mathematically undefined return ``float('nan')`` rather than
  raising, so that a report over many slices (dimension, model, zone) never stops
  on one degenerate slice. Malformed input (wrong shapes) raises ``ValueError``.

Nothing here imports Django; the module is safe to use in Celery workers, notebooks
and tests alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "AlternativeAnnotatorResult",
    "AgreementKappaBootstrap",
    "DriftResult",
    "MajorityResult",
    "alternative_annotator_test",
    "bootstrap_agreement_kappa",
    "bootstrap_ci",
    "bootstrap_replicates",
    "cluster_weights",
    "cohen_kappa",
    "fleiss_kappa",
    "gwet_ac1",
    "krippendorff_alpha_nominal",
    "leave_one_out_agreement",
    "majority",
    "observed_agreement_multi",
    "percent_agreement",
    "percentile_interval",
    "ratings_to_counts",
    "rolling_drift",
]

NAN = float("nan")

# Upper bound on the cells of one (replicates x clusters) weight block. It keeps
# the bootstrap's memory flat (about 32 MB of int64) however many clusters there are.
_MAX_WEIGHT_CELLS = 4_000_000


# --------------------------------------------------------------------------- helpers


def _label_vector(values: ArrayLike, name: str) -> NDArray[np.int64]:
    """Return ``values`` as a 1-D int64 array or raise ``ValueError``."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr.astype(np.int64, copy=False)


def _label_matrix(labels: ArrayLike) -> NDArray[np.int64]:
    """Return ``labels`` as an (n_items, n_raters) int64 array or raise ``ValueError``."""
    arr = np.asarray(labels)
    if arr.ndim != 2:
        raise ValueError(f"labels must be (n_items, n_raters), got shape {arr.shape}")
    return arr.astype(np.int64, copy=False)


def _paired(a: ArrayLike, b: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Validate two label vectors and keep only the positions where both are present."""
    x = _label_vector(a, "a")
    y = _label_vector(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"a and b differ in length: {x.shape[0]} != {y.shape[0]}")
    keep = (x >= 0) & (y >= 0)
    return x[keep], y[keep]


def _chance_corrected(observed: ArrayLike, expected: ArrayLike) -> NDArray[np.float64]:
    """Return ``(observed - expected) / (1 - expected)``, nan where expected is 1.

    Expected agreement of 1 means every rater used one and the same category, so
    there is no variation to be reliable about and the ratio is 0/0.
    """
    observed = np.asarray(observed, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    denom = 1.0 - expected
    # A tolerance only guards against round-off; a genuine expected agreement of
    # 1 - 1e-12 would need on the order of 1e12 items.
    undefined = ~(denom > 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (observed - expected) / np.where(undefined, 1.0, denom)
    return np.where(undefined | np.isnan(observed), np.nan, value)


# ---------------------------------------------------------------- two-rater statistics


def percent_agreement(a: ArrayLike, b: ArrayLike) -> float:
    """Return the share of positions where two label vectors agree.

    Positions where either label is negative (missing) are ignored. Returns nan when
    no position has both labels.
    """
    x, y = _paired(a, b)
    if x.size == 0:
        return NAN
    return float(np.mean(x == y))


def cohen_kappa(a: ArrayLike, b: ArrayLike) -> float:
    """Return Cohen's kappa between two label vectors (e.g. judge vs human majority).

    kappa = (p_o - p_e) / (1 - p_e), where p_o is the observed agreement and p_e the
    agreement expected from the two raters' marginal distributions. Works for any
    non-negative category codes; 0/1 is the common case. Positions where either
    label is negative (missing) are ignored.

    Kappa is undefined, and nan is returned, when p_e == 1: that happens exactly
    when both vectors contain one and the same single class (for example the judge
    and the majority both say "hit" on every item). It is also nan for empty input.
    When the two vectors are constant on *different* classes, p_e == 0 and kappa is
    0 - 0 = 0 (scikit-learn agrees).
    """
    x, y = _paired(a, b)
    n = x.size
    if n == 0:
        return NAN
    k = int(max(x.max(), y.max())) + 1
    confusion = np.bincount(x * k + y, minlength=k * k).reshape(k, k)
    row = confusion.sum(axis=1)
    col = confusion.sum(axis=0)
    # The p_e == 1 test is done in exact integers, not floats.
    if int(row @ col) == n * n:
        return NAN
    p_o = np.trace(confusion) / n
    p_e = float(row @ col) / (n * n)
    return float(_chance_corrected(np.float64(p_o), np.float64(p_e)))


# ------------------------------------------------------------- many-rater statistics


def ratings_to_counts(labels: ArrayLike, n_categories: int | None = None) -> NDArray[np.int64]:
    """Turn an (n_items, n_raters) label matrix into an (n_items, n_categories) count table.

    Cell (i, k) is the number of raters who put item i in category k; ``-1`` (any
    negative value) is missing and not counted. ``n_categories`` defaults to the
    largest label + 1 (0 when there is no label at all); labels at or above an
    explicit ``n_categories`` raise ``ValueError``.
    """
    mat = _label_matrix(labels)
    n_items = mat.shape[0]
    present = mat >= 0
    observed_max = int(mat[present].max()) if present.any() else -1
    k = observed_max + 1 if n_categories is None else int(n_categories)
    if observed_max >= k:
        raise ValueError(f"label {observed_max} does not fit n_categories={k}")
    rows = np.broadcast_to(np.arange(n_items)[:, None], mat.shape)
    flat = rows[present] * k + mat[present]
    return np.bincount(flat, minlength=n_items * k).reshape(n_items, k)


def fleiss_kappa(counts: ArrayLike) -> float:
    """Return Fleiss' kappa from an (n_items, n_categories) table of rater counts.

    Every row must sum to the same number of raters n >= 2 (Fleiss' design); use
    :func:`krippendorff_alpha_nominal` or :func:`gwet_ac1` when labels are missing.
    With p_j the overall share of category j, P_i = (sum_j c_ij^2 - n) / (n(n-1)),
    P_bar the mean of P_i and P_e = sum_j p_j^2, kappa = (P_bar - P_e) / (1 - P_e).
    Returns nan for an empty table, fewer than two raters, or P_e == 1 (every rating
    in one category).
    """
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"counts must be (n_items, n_categories), got shape {table.shape}")
    if table.shape[0] == 0 or table.shape[1] == 0:
        return NAN
    totals = table.sum(axis=1)
    n = totals[0]
    if not np.allclose(totals, n):
        raise ValueError("every item must have the same number of ratings for Fleiss' kappa")
    if n < 2:
        return NAN
    p_j = table.sum(axis=0) / (table.shape[0] * n)
    p_i = ((table * table).sum(axis=1) - n) / (n * (n - 1.0))
    return float(_chance_corrected(p_i.mean(), np.dot(p_j, p_j)))


def krippendorff_alpha_nominal(labels: ArrayLike) -> float:
    """Return Krippendorff's alpha for nominal data, allowing missing labels.

    Built on the coincidence matrix: a unit u with m_u >= 2 labels contributes
    n_uc * n_uk / (m_u - 1) to cell (c, k) for c != k and n_uc (n_uc - 1) / (m_u - 1)
    to cell (c, c). Units with fewer than two labels are not pairable and are
    dropped. With n_c the coincidence margins and n their total,

        alpha = 1 - (n - 1) * (n - sum_c o_cc) / (n^2 - sum_c n_c^2).

    Returns nan when fewer than two pairable values exist, or when every pairable
    value is in one category: the expected disagreement is then zero and
    Krippendorff leaves alpha undefined (no variation to be reliable about).
    Raters agreeing perfectly on data that does vary gives alpha == 1.
    """
    counts = ratings_to_counts(labels).astype(np.float64)
    m = counts.sum(axis=1)
    pairable = m >= 2
    counts, m = counts[pairable], m[pairable]
    n = counts.sum()
    if n < 2:
        return NAN
    n_c = counts.sum(axis=0)
    diagonal = ((counts * (counts - 1.0)) / (m - 1.0)[:, None]).sum()
    expected_pairs = n * n - np.dot(n_c, n_c)
    if expected_pairs <= 0:
        return NAN
    return float(1.0 - (n - 1.0) * (n - diagonal) / expected_pairs)


def _pairwise_agreement_terms(counts: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Per-item share of agreeing rater pairs, and the mask of items with >= 2 labels."""
    r = counts.sum(axis=1)
    multi = r >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        share = (counts * (counts - 1.0)).sum(axis=1) / (r * (r - 1.0))
    return share, multi


def observed_agreement_multi(labels: ArrayLike) -> float:
    """Return the mean pairwise percent agreement among raters.

    For each item with at least two labels, the share of (ordered) rater pairs that
    gave the same label; then the plain mean over those items. This is Fleiss'
    P_bar and Gwet's p_a. Averaging per item rather than per rater pair is deliberate:
    columns are rater slots, not fixed people. Returns nan when no item has two labels.
    """
    counts = ratings_to_counts(labels).astype(np.float64)
    share, multi = _pairwise_agreement_terms(counts)
    if not multi.any():
        return NAN
    return float(share[multi].mean())


def gwet_ac1(labels: ArrayLike, n_categories: int | None = None) -> float:
    """Return Gwet's AC1 for any number of raters, nominal categories and missing labels.

    Following Gwet (Handbook of Inter-Rater Reliability), with r_i the number of
    labels on item i and r_ik those in category k:

    * p_a = mean over items with r_i >= 2 of sum_k r_ik (r_ik - 1) / (r_i (r_i - 1));
    * pi_k = mean over items with r_i >= 1 of r_ik / r_i;
    * p_e = sum_k pi_k (1 - pi_k) / (q - 1), with q the number of categories;
    * AC1 = (p_a - p_e) / (1 - p_e).

    q is part of the definition (it scales p_e), so pass ``n_categories`` when the
    scheme has categories nobody used; by default q = max(2, largest label + 1),
    which is right for 0/1 rubric hits. p_e never exceeds 1/q, so AC1 is defined
    whenever some item has two labels; otherwise nan is returned.
    """
    counts = ratings_to_counts(labels).astype(np.float64)
    q = max(2, counts.shape[1]) if n_categories is None else int(n_categories)
    if q < 2:
        raise ValueError("Gwet's AC1 needs at least two categories")
    if counts.shape[1] < q:
        counts = np.pad(counts, ((0, 0), (0, q - counts.shape[1])))
    elif counts.shape[1] > q:
        raise ValueError(f"labels use {counts.shape[1]} categories but n_categories={q}")
    share, multi = _pairwise_agreement_terms(counts)
    if not multi.any():
        return NAN
    p_a = share[multi].mean()
    r = counts.sum(axis=1)
    rated = r >= 1
    pi = (counts[rated] / r[rated][:, None]).mean(axis=0)
    p_e = float(np.dot(pi, 1.0 - pi)) / (q - 1)
    return float(_chance_corrected(np.float64(p_a), np.float64(p_e)))


class MajorityResult(NamedTuple):
    """Per-item vote summary returned by :func:`majority`."""

    majority: NDArray[np.int8]
    """1 when hits reach the majority threshold, 0 when misses do, -1 while undecided."""
    hits: NDArray[np.int64]
    """Number of 1 labels."""
    total: NDArray[np.int64]
    """Number of labels present."""
    pending: NDArray[np.bool_]
    """True while fewer labels than rater slots have arrived."""
    unanimous: NDArray[np.bool_]
    """True for complete items whose labels all agree (the consensus zone)."""


def majority(labels: ArrayLike) -> MajorityResult:
    """Return the majority vote, vote counts and pending state of 0/1 labels.

    ``labels`` is (n_items, n_slots) with -1 for a label not yet submitted; the
    Rubrica default is three slots, where the threshold is 2 (hit when hits >= 2).
    In general the threshold is n_slots // 2 + 1.

    An item missing any label is *pending*, never a tie: a 1-1 split with the third
    label outstanding is reported as ``majority == -1`` and ``pending == True``.
    A pending item whose outcome is already settled (two hits, or two misses, out
    of three) does get its 0/1 majority, but stays pending, so callers that need
    final consensus should filter on ``~pending``. Complete items always get 0 or 1
    (with an even slot count a complete tie counts as a miss).
    """
    mat = _label_matrix(labels)
    slots = mat.shape[1]
    hits = (mat == 1).sum(axis=1)
    total = (mat >= 0).sum(axis=1)
    misses = total - hits
    need = slots // 2 + 1
    pending = total < slots
    result = np.full(mat.shape[0], -1, dtype=np.int8)
    result[misses >= need] = 0
    result[hits >= need] = 1
    # A complete even-sized panel can split evenly; the hit threshold is not met.
    result[~pending & (result == -1)] = 0
    unanimous = ~pending & ((hits == 0) | (hits == total))
    return MajorityResult(result, hits, total, pending, unanimous)


def leave_one_out_agreement(labels: ArrayLike) -> NDArray[np.float64]:
    """Return, per (item, rater slot), whether the rater matched the other raters' majority.

    Cell (i, j) is 1.0 when rater j's label on item i equals the label held by a
    strict majority (more than half) of the *other* raters present on item i, and
    0.0 when another label holds that strict majority. It is nan when rater j has no
    label, when nobody else labelled the item, or when no label holds a strict
    majority of the others (with two others, a 1-1 split): such a tie says nothing
    about rater j, so it is excluded rather than counted either way.

    The output has the shape of ``labels`` so that callers can gather cells per
    expert and per submission time (consistency curves, :func:`rolling_drift`).
    """
    mat = _label_matrix(labels)
    out = np.full(mat.shape, np.nan)
    if mat.size == 0:
        return out
    counts = ratings_to_counts(mat)
    k = counts.shape[1]
    present = mat >= 0
    others = present.sum(axis=1, keepdims=True) - 1
    # The others' table for slot j is the item's table minus slot j's own vote.
    own_onehot = (np.arange(k) == mat[..., None]) & present[..., None]
    others_table = counts[:, None, :] - own_onehot
    same_as_own = np.take_along_axis(others_table, np.where(present, mat, 0)[..., None], axis=2)[..., 0]
    top_other = others_table.max(axis=2)
    usable = present & (others > 0)
    agree = usable & (2 * same_as_own > others)
    # A strict majority can be held by one label only; if it is not rater j's, it
    # is another label's.
    disagree = usable & ~agree & (2 * top_other > others)
    out[agree] = 1.0
    out[disagree] = 0.0
    return out


class AlternativeAnnotatorResult(NamedTuple):
    """Outcome of :func:`alternative_annotator_test`."""

    judge_agreement: NDArray[np.float64]
    """(n_items, n_experts): share of the other experts the judge matches, nan if unusable."""
    expert_agreement: NDArray[np.float64]
    """(n_items, n_experts): share of the other experts expert j matches, nan if unusable."""
    win_rate: NDArray[np.float64]
    """(n_experts,): share of usable items where judge_agreement >= expert_agreement."""
    judge_mean: NDArray[np.float64]
    """(n_experts,): mean judge_agreement over the items usable for expert j."""
    expert_mean: NDArray[np.float64]
    """(n_experts,): mean expert_agreement over the same items."""
    advantage_probability: float
    """Share of experts j for which judge_mean[j] >= expert_mean[j]."""
    average_win_rate: float
    """Mean of win_rate over experts (the paper's average advantage probability rho)."""


def alternative_annotator_test(judge: ArrayLike, experts: ArrayLike) -> AlternativeAnnotatorResult:
    """Compare the judge with each expert, both measured against the remaining experts.

    After the alternative annotator test of Calderon, Reichart and Dror (2025), without
    its hypothesis test. Exact definition, for an (n_items, m) expert matrix X
    (-1 missing; m = 3 in Rubrica) and a judge vector J (-1 missing):

    * For each excluded expert column j and item i, let O_ij be the other expert
      columns k != j with a label on item i. Item i is *usable* for j when J_i and
      X_ij are present and O_ij is not empty. Then
      judge_agreement[i, j] = mean over k in O_ij of [J_i == X_ik] and
      expert_agreement[i, j] = mean over k in O_ij of [X_ij == X_ik]
      (with two others: 0, 0.5 or 1, the "mean match with the two others");
      both are nan when the item is not usable.
    * win_rate[j] = share of usable items with judge_agreement >= expert_agreement
      (ties count for the judge). This is the paper's per-annotator advantage
      probability rho_j, and ``average_win_rate`` (their mean) is the paper's rho.
    * judge_mean[j] and expert_mean[j] = means of the two arrays over the usable items.
    * advantage_probability = share of experts j (among those with a usable item)
      for which judge_mean[j] >= expert_mean[j]. This plays the role of the paper's
      winning rate omega, but without its per-annotator one-sided paired t-test and
      cost margin epsilon; run such a test on the raw arrays if it is needed.

    Columns are slots: "expert j" is whoever filled slot j. Pass a matrix whose
    columns are fixed people when a per-person verdict is wanted.
    """
    mat = _label_matrix(experts)
    jud = _label_vector(judge, "judge")
    n_items = mat.shape[0]
    if jud.shape[0] != n_items:
        raise ValueError("judge and experts must have the same number of items")
    # At least one category column, so the gathers below stay valid on label-free input.
    top = max(int(mat.max(initial=0)), int(jud.max(initial=0)))
    counts = ratings_to_counts(mat, n_categories=top + 1)
    present = mat >= 0
    judged = jud >= 0
    others = present.sum(axis=1, keepdims=True) - present
    usable = present & judged[:, None] & (others > 0)
    # Experts sharing the judge's label, minus expert j when j is one of them.
    judge_votes = np.take_along_axis(counts, np.where(judged, jud, 0)[:, None], axis=1)
    judge_matches = judge_votes - (present & (mat == jud[:, None]))
    # Experts sharing expert j's label, minus expert j.
    own_votes = np.take_along_axis(counts, np.where(present, mat, 0), axis=1)
    expert_matches = own_votes - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        judge_agreement = np.where(usable, judge_matches / others, np.nan)
        expert_agreement = np.where(usable, expert_matches / others, np.nan)
    n_usable = usable.sum(axis=0)
    defined = n_usable > 0
    wins = (usable & (judge_agreement >= expert_agreement)).sum(axis=0)
    denom = np.where(defined, n_usable, 1)
    win_rate = np.where(defined, wins / denom, np.nan)
    judge_sum = np.where(usable, judge_agreement, 0.0).sum(axis=0)
    expert_sum = np.where(usable, expert_agreement, 0.0).sum(axis=0)
    judge_mean = np.where(defined, judge_sum / denom, np.nan)
    expert_mean = np.where(defined, expert_sum / denom, np.nan)
    if defined.any():
        advantage = float(np.mean(judge_mean[defined] >= expert_mean[defined]))
        average = float(np.mean(win_rate[defined]))
    else:
        advantage = average = NAN
    return AlternativeAnnotatorResult(
        judge_agreement, expert_agreement, win_rate, judge_mean, expert_mean, advantage, average
    )


# ------------------------------------------------------------------------ drift


class DriftResult(NamedTuple):
    """Outcome of :func:`rolling_drift`; positions refer to the time-ordered series."""

    order: NDArray[np.int64]
    """Permutation that puts the input in time order (stable)."""
    rolling: NDArray[np.float64]
    """Rolling mean ending at each ordered position; nan before the first full window."""
    baseline: float
    """Mean of the first ``baseline_n`` ordered values; nan when there are fewer."""
    alert_positions: NDArray[np.int64]
    """Ordered positions whose rolling mean is below ``baseline - margin``."""
    alert_indices: NDArray[np.int64]
    """The same alerts as indices into the caller's original arrays."""


def rolling_drift(
    values: ArrayLike,
    timestamps_order: ArrayLike | None,
    window: int,
    baseline_n: int,
    margin: float,
    *,
    skip_baseline: bool = True,
) -> DriftResult:
    """Flag where an expert's rolling accuracy falls below their own early baseline.

    ``values`` is one expert's 0/1 correctness series (golden or leave-one-out
    agreement; nan entries are not allowed, drop them first). ``timestamps_order`` is
    a sort key of the same length (timestamps, sequence numbers; ``None`` when the
    series is already in order); ties keep input order. After ordering:

    * rolling[t] = mean of values[t - window + 1 .. t] (nan for t < window - 1);
    * baseline = mean of the first ``baseline_n`` values (nan if the series is shorter,
      in which case nothing can alert);
    * an alert is every t with rolling[t] < baseline - margin. With ``skip_baseline``
      (the default) only positions t >= baseline_n can alert, since windows inside
      the baseline period measure the baseline itself.
    """
    if window < 1 or baseline_n < 1:
        raise ValueError("window and baseline_n must be positive")
    series = np.asarray(values, dtype=np.float64)
    if series.ndim != 1:
        raise ValueError("values must be one-dimensional")
    if timestamps_order is None:
        order = np.arange(series.size, dtype=np.int64)
    else:
        keys = np.asarray(timestamps_order)
        if keys.shape != series.shape:
            raise ValueError("timestamps_order must match values in length")
        order = np.argsort(keys, kind="stable").astype(np.int64)
    ordered = series[order]
    n = ordered.size
    rolling = np.full(n, np.nan)
    if n >= window:
        csum = np.concatenate([[0.0], np.cumsum(ordered)])
        rolling[window - 1 :] = (csum[window:] - csum[:-window]) / window
    baseline = float(ordered[:baseline_n].mean()) if n >= baseline_n else NAN
    alert = rolling < baseline - margin  # nan compares False, so no alert
    if skip_baseline:
        alert[:baseline_n] = False
    positions = np.flatnonzero(alert).astype(np.int64)
    return DriftResult(order, rolling, baseline, positions, order[positions])


# -------------------------------------------------------------------- bootstrap


def _cluster_codes(cluster_ids: ArrayLike) -> tuple[NDArray[np.int64], int]:
    """Map arbitrary cluster ids (ints, strings) to codes 0..n_clusters-1."""
    ids = np.asarray(cluster_ids)
    if ids.ndim != 1:
        raise ValueError("cluster_ids must be one-dimensional")
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64), 0
    uniques, codes = np.unique(ids, return_inverse=True)
    return codes.astype(np.int64).reshape(-1), int(uniques.size)


def cluster_weights(
    n_clusters: int,
    n_boot: int,
    seed: int | np.random.Generator | None = 0,
) -> Iterator[NDArray[np.int64]]:
    """Yield blocks of bootstrap cluster multiplicities, (block_size, n_clusters) each.

    Each row is one replicate: n_clusters clusters drawn with replacement, expressed
    as how many times each cluster was drawn (rows sum to n_clusters). Blocks keep
    memory bounded. Both the generic and the fast bootstrap consume this same
    stream, so for one seed they see identical replicates.
    """
    rng = np.random.default_rng(seed)
    if n_clusters <= 0:
        return
    block = max(1, _MAX_WEIGHT_CELLS // n_clusters)
    done = 0
    while done < n_boot:
        size = min(block, n_boot - done)
        draws = rng.integers(0, n_clusters, size=(size, n_clusters))
        rows = np.arange(size)[:, None] * n_clusters
        weights = np.bincount((rows + draws).ravel(), minlength=size * n_clusters)
        yield weights.reshape(size, n_clusters)
        done += size


def percentile_interval(replicates: ArrayLike, alpha: float = 0.05) -> tuple[float, float]:
    """Return the (alpha/2, 1 - alpha/2) percentile interval of the finite replicates.

    Replicates where the statistic was undefined (nan) are ignored; when none is
    finite the interval is (nan, nan).
    """
    reps = np.asarray(replicates, dtype=np.float64)
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return (NAN, NAN)
    low, high = np.percentile(reps, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    return (float(low), float(high))


def bootstrap_replicates(
    stat_fn: Callable[..., float],
    cluster_ids: ArrayLike,
    *arrays: ArrayLike,
    n_boot: int = 1000,
    seed: int | np.random.Generator | None = 0,
) -> NDArray[np.float64]:
    """Return ``n_boot`` cluster-bootstrap replicates of ``stat_fn(*arrays)``.

    Whole clusters (dialogues, question ids) are drawn with replacement, never single
    items, because labels within a dialogue are correlated and item-level resampling
    would understate the uncertainty. ``arrays`` are indexed along their first axis
    (1-D vectors and 2-D label matrices both work), one row per item, aligned with
    ``cluster_ids``. Each replicate concatenates the item rows of the drawn clusters
    (a cluster drawn twice appears twice) and calls ``stat_fn`` once on them.
    """
    codes, n_clusters = _cluster_codes(cluster_ids)
    data = [np.asarray(arr) for arr in arrays]
    if any(arr.shape[0] != codes.shape[0] for arr in data):
        raise ValueError("every array must have one row per cluster id")
    out = np.full(n_boot, np.nan)
    if n_clusters == 0:
        return out
    # Items grouped by cluster once; each cluster is then a contiguous slice.
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=n_clusters)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    cluster_range = np.arange(n_clusters)
    row = 0
    for block in cluster_weights(n_clusters, n_boot, seed):
        for weights in block:
            drawn = np.repeat(cluster_range, weights)
            drawn_sizes = sizes[drawn]
            ends = np.cumsum(drawn_sizes)
            # Concatenated ranges without a Python loop: the k-th output item of a
            # drawn cluster c sits at starts[c] + (position - where c's run begins).
            shift = np.repeat(starts[drawn] - (ends - drawn_sizes), drawn_sizes)
            idx = order[np.arange(ends[-1] if ends.size else 0) + shift]
            out[row] = stat_fn(*(arr[idx] for arr in data))
            row += 1
    return out


def bootstrap_ci(
    stat_fn: Callable[..., float],
    cluster_ids: ArrayLike,
    *arrays: ArrayLike,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int | np.random.Generator | None = 0,
) -> tuple[float, float]:
    """Return a cluster-bootstrap percentile confidence interval (low, high).

    See :func:`bootstrap_replicates` for the resampling and :func:`percentile_interval`
    for nan handling. Works with any statistic; for agreement and Cohen's kappa
    prefer :func:`bootstrap_agreement_kappa`, which gives the same replicates for the
    same seed, much faster.
    """
    reps = bootstrap_replicates(stat_fn, cluster_ids, *arrays, n_boot=n_boot, seed=seed)
    return percentile_interval(reps, alpha)


class AgreementKappaBootstrap(NamedTuple):
    """Outcome of :func:`bootstrap_agreement_kappa`."""

    agreement: float
    kappa: float
    agreement_ci: tuple[float, float]
    kappa_ci: tuple[float, float]
    agreement_replicates: NDArray[np.float64]
    kappa_replicates: NDArray[np.float64]


def _agreement_kappa_from_cells(
    cells: NDArray[np.int64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Agreement and kappa from 2x2 cell counts laid out as (..., [n00, n01, n10, n11])."""
    n00, n01, n10, n11 = (cells[..., i].astype(np.float64) for i in range(4))
    n = n00 + n01 + n10 + n11
    with np.errstate(divide="ignore", invalid="ignore"):
        p_o = (n00 + n11) / n
        a1 = (n10 + n11) / n
        b1 = (n01 + n11) / n
    p_e = a1 * b1 + (1.0 - a1) * (1.0 - b1)
    # p_e == 1 exactly when one row margin and the matching column margin hold all
    # items; test it on the integer cells to avoid round-off.
    single_class = ((n00 == n) | (n11 == n)) & (n > 0)
    kappa = np.where(single_class, np.nan, _chance_corrected(p_o, p_e))
    return p_o, kappa


def bootstrap_agreement_kappa(
    a: ArrayLike,
    b: ArrayLike,
    cluster_ids: ArrayLike,
    n_boot: int = 1000,
    seed: int | np.random.Generator | None = 0,
    alpha: float = 0.05,
) -> AgreementKappaBootstrap:
    """Percent agreement and Cohen's kappa of two 0/1 vectors with cluster-bootstrap CIs.

    The fast path: per-cluster 2x2 contingency counts are built once with
    ``np.bincount``; each block of replicates is then a single matrix product of the
    (replicates, clusters) multiplicity matrix by the (clusters, 4) count matrix, and
    agreement and kappa follow for every replicate at once. Pairs with a missing
    label (negative) are dropped before resampling, but clusters are those of the
    full input. Replicates equal those of ``bootstrap_ci(percent_agreement, ...)`` and
    ``bootstrap_ci(cohen_kappa, ...)`` for the same seed.
    """
    x = _label_vector(a, "a")
    y = _label_vector(b, "b")
    codes, n_clusters = _cluster_codes(cluster_ids)
    if not (x.shape == y.shape == codes.shape):
        raise ValueError("a, b and cluster_ids must have the same length")
    if np.any(x > 1) or np.any(y > 1):
        raise ValueError("the fast path takes 0/1 labels; use bootstrap_ci for more categories")
    keep = (x >= 0) & (y >= 0)
    cell = x[keep] * 2 + y[keep]
    per_cluster = np.bincount(codes[keep] * 4 + cell, minlength=n_clusters * 4).reshape(n_clusters, 4)
    point_agreement, point_kappa = _agreement_kappa_from_cells(per_cluster.sum(axis=0))
    agreement_reps = np.full(n_boot, np.nan)
    kappa_reps = np.full(n_boot, np.nan)
    row = 0
    for weights in cluster_weights(n_clusters, n_boot, seed):
        # Integer product keeps cell counts exact (they are small enough for int64).
        totals = weights @ per_cluster
        agree, kappa = _agreement_kappa_from_cells(totals)
        agreement_reps[row : row + len(weights)] = agree
        kappa_reps[row : row + len(weights)] = kappa
        row += len(weights)
    return AgreementKappaBootstrap(
        float(point_agreement),
        float(point_kappa),
        percentile_interval(agreement_reps, alpha),
        percentile_interval(kappa_reps, alpha),
        agreement_reps,
        kappa_reps,
    )
