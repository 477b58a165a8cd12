"""Cluster bootstrap: resampling whole dialogues for confidence intervals, with a weighted fast path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from annotation.agreement.stats._arrays import _MAX_WEIGHT_CELLS, NAN, _chance_corrected, _label_vector

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


class PanelBootstrap(NamedTuple):
    """Outcome of :func:`bootstrap_alpha_ac1`: replicates of the panel's alpha and AC1."""

    alpha_replicates: NDArray[np.float64]
    ac1_replicates: NDArray[np.float64]


def bootstrap_alpha_ac1(
    labels: ArrayLike,
    cluster_ids: ArrayLike,
    n_boot: int = 1000,
    seed: int | np.random.Generator | None = 0,
) -> PanelBootstrap:
    """Cluster-bootstrap replicates of Krippendorff's alpha (nominal) and Gwet's AC1 (q = 2) of 0/1 labels.

    The fast path of ``bootstrap_replicates`` with ``krippendorff_alpha_nominal`` and
    ``gwet_ac1(rows, 2)``: both statistics are ratios of sums over units of per-unit
    terms (for alpha the pairable values, their category margins and the coincidence
    diagonal; for AC1 the pairwise agreement share and the category shares), so each
    cluster's sums are taken once and every replicate is the product of its
    multiplicity row by those sums. ``labels`` is an (n_items, n_raters) matrix with -1
    for missing. For one seed the replicates are those of the generic path (the same
    cluster draws), up to floating-point summation order.
    """
    mat = np.asarray(labels)
    if mat.ndim != 2:
        raise ValueError(f"labels must be (n_items, n_raters), got shape {mat.shape}")
    codes, n_clusters = _cluster_codes(cluster_ids)
    if codes.shape[0] != mat.shape[0]:
        raise ValueError("labels and cluster_ids must have one row per item")
    if np.any(mat > 1):
        raise ValueError("the fast path takes 0/1 labels; use bootstrap_replicates for more categories")
    alpha_reps = np.full(n_boot, np.nan)
    ac1_reps = np.full(n_boot, np.nan)
    if n_clusters == 0:
        return PanelBootstrap(alpha_reps, ac1_reps)
    c1 = (mat == 1).sum(axis=1).astype(np.float64)
    c0 = (mat == 0).sum(axis=1).astype(np.float64)
    m = c0 + c1
    pairable = m >= 2
    rated = m >= 1
    same = c0 * (c0 - 1.0) + c1 * (c1 - 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        diagonal = np.where(pairable, same / (m - 1.0), 0.0)
        share = np.where(pairable, same / (m * (m - 1.0)), 0.0)
        pi0 = np.where(rated, c0 / m, 0.0)
        pi1 = np.where(rated, c1 / m, 0.0)
    terms = np.stack([m * pairable, c0 * pairable, c1 * pairable, diagonal,
                      pairable.astype(np.float64), share, rated.astype(np.float64), pi0, pi1], axis=1)
    per_cluster = np.zeros((n_clusters, terms.shape[1]))
    np.add.at(per_cluster, codes, terms)
    row = 0
    for weights in cluster_weights(n_clusters, n_boot, seed):
        sums = weights @ per_cluster
        n, n0, n1, diag, n_multi, share_sum, n_rated, pi0_sum, pi1_sum = sums.T
        expected = n * n - (n0 * n0 + n1 * n1)
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = 1.0 - (n - 1.0) * (n - diag) / expected
            p_a = share_sum / n_multi
            p0, p1 = pi0_sum / n_rated, pi1_sum / n_rated
        p_e = p0 * (1.0 - p0) + p1 * (1.0 - p1)
        size = len(weights)
        alpha_reps[row:row + size] = np.where((n >= 2) & (expected > 0), alpha, np.nan)
        ac1_reps[row:row + size] = np.where(n_multi > 0, _chance_corrected(p_a, p_e), np.nan)
        row += size
    return PanelBootstrap(alpha_reps, ac1_reps)
