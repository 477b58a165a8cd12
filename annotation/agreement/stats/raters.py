"""Agreement between raters: two-rater agreement and kappa, many-rater kappa, alpha and AC1,
the majority, leave-one-out agreement, and the alternative-annotator test."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from annotation.agreement.stats._arrays import NAN, _chance_corrected, _label_matrix, _label_vector, _paired

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
