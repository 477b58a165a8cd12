"""Intervals for a proportion measured over clustered items (dialogues holding many rubric items).

The cluster bootstrap percentile interval (:mod:`bootstrap`) is what the report uses
for slices resting on many dialogues. With few dialogues it is too narrow: the
bootstrap distribution of a ratio over 18 clusters underestimates the spread, and its
coverage falls below the nominal level (``bench/interval_coverage.py`` measures it).
For those slices the report uses :func:`cluster_wilson_interval`:

* the cluster-robust (linearised ratio) variance of p = sum(successes) / sum(items),
  ``k / (k - 1) * sum_c (a_c - p * m_c)^2 / (sum m)^2`` over the k clusters;
* the effective sample size that variance implies, ``p (1 - p) / variance`` (at most
  the number of items; the number of items when the variance is 0);
* a Wilson score interval at that effective size, with Student's t quantile on k - 1
  degrees of freedom instead of the normal one, since the variance rests on k clusters.

Wilson's interval stays inside [0, 1] and does not collapse at p = 0 or 1, where the
bootstrap gives a zero-width interval.

Cohen's kappa over clustered items has the same trouble with few clusters (the
bootstrap percentile interval covered 92% at 18 dialogues), and is not a proportion.
:func:`cluster_jackknife_kappa_interval` is the delete-one-cluster jackknife: kappa
recomputed without each dialogue in turn, the jackknife variance
``(k - 1) / k * sum_i (kappa_(i) - mean)^2``, and kappa ± t(k - 1) times its root,
clipped to [-1, 1]. No Django import here.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from annotation.agreement.stats._arrays import NAN
from annotation.agreement.stats.drift import normal_upper_quantile

__all__ = ["cluster_jackknife_kappa_interval", "cluster_wilson_interval", "student_t_upper_quantile"]

# The expansion is poor below 5 degrees of freedom; the 97.5% quantiles there, exact.
_T_975 = {1: 12.706204736174705, 2: 4.302652729749464, 3: 3.182446305283709, 4: 2.7764451051977934}


def student_t_upper_quantile(tail: float, df: float) -> float:
    """t with P(T > t) = tail for Student's t on ``df`` degrees of freedom (Cornish-Fisher).

    The four-term expansion of Abramowitz & Stegun 26.7.5 around the normal quantile;
    for df >= 5 and tails >= 0.001 it is within 0.01 of the exact value, and within
    1e-4 for df >= 10 at the 2.5% tail (checked against scipy in the tests); below 5
    degrees of freedom the 2.5% tail comes from a table of exact values.
    """
    if df <= 0:
        raise ValueError("df must be positive")
    if tail == 0.025 and df in _T_975:
        return _T_975[int(df)]
    z = normal_upper_quantile(tail)
    g1 = (z**3 + z) / 4.0
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96.0
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384.0
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160.0
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def cluster_wilson_interval(successes: ArrayLike, totals: ArrayLike, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson interval for sum(successes)/sum(totals) with a cluster-robust effective size.

    ``successes`` and ``totals`` hold one count per cluster (clusters with no item are
    ignored). Returns (nan, nan) without any item; with one cluster only the
    variance is unknown and the interval is (0, 1).
    """
    a = np.asarray(successes, dtype=np.float64)
    m = np.asarray(totals, dtype=np.float64)
    if a.shape != m.shape or a.ndim != 1:
        raise ValueError("successes and totals must be aligned 1-D arrays")
    keep = m > 0
    a, m = a[keep], m[keep]
    k = int(m.size)
    n = float(m.sum())
    if n == 0:
        return (NAN, NAN)
    if k < 2:
        return (0.0, 1.0)
    p = float(a.sum()) / n
    variance = k / (k - 1) * float(((a - p * m) ** 2).sum()) / n**2
    n_eff = n if variance <= 0 else min(n, p * (1.0 - p) / variance)
    n_eff = max(n_eff, 1.0)
    z = student_t_upper_quantile(alpha / 2.0, k - 1)
    z2 = z * z
    centre = (p + z2 / (2 * n_eff)) / (1 + z2 / n_eff)
    half = z / (1 + z2 / n_eff) * math.sqrt(p * (1 - p) / n_eff + z2 / (4 * n_eff**2))
    return (max(0.0, centre - half), min(1.0, centre + half))


def _kappa_of_cells(cells: np.ndarray) -> np.ndarray:
    """Cohen's kappa from 2x2 counts laid out as (..., [n00, n01, n10, n11]); nan when undefined."""
    n00, n01, n10, n11 = (cells[..., i] for i in range(4))
    n = n00 + n01 + n10 + n11
    with np.errstate(divide="ignore", invalid="ignore"):
        p_o = (n00 + n11) / n
        a1 = (n10 + n11) / n
        b1 = (n01 + n11) / n
        p_e = a1 * b1 + (1.0 - a1) * (1.0 - b1)
        kappa = (p_o - p_e) / (1.0 - p_e)
    result: np.ndarray = np.where((n > 0) & (p_e < 1.0), kappa, NAN)
    return result


def cluster_jackknife_kappa_interval(cells: ArrayLike, alpha: float = 0.05) -> tuple[float, float]:
    """Jackknife-t interval for Cohen's kappa of two 0/1 raters over clustered items.

    ``cells`` holds one row of 2x2 counts per cluster, ``[n00, n01, n10, n11]`` (first
    rater's value, second's). Clusters without items are ignored. (nan, nan) when kappa
    is undefined (no item, or one class only) or fewer than two clusters hold items; a
    leave-one-out kappa that is undefined makes the interval (nan, nan) too, rather
    than resting on the clusters that remain.
    """
    c = np.asarray(cells, dtype=np.float64)
    if c.ndim != 2 or c.shape[1] != 4:
        raise ValueError("cells must have one row of four counts per cluster")
    c = c[c.sum(axis=1) > 0]
    k = int(c.shape[0])
    if k < 2:
        return (NAN, NAN)
    total = c.sum(axis=0)
    point = float(_kappa_of_cells(total))
    leave_out = _kappa_of_cells(total[None, :] - c)
    if not math.isfinite(point) or not np.isfinite(leave_out).all():
        return (NAN, NAN)
    variance = (k - 1) / k * float(((leave_out - leave_out.mean()) ** 2).sum())
    half = student_t_upper_quantile(alpha / 2.0, k - 1) * math.sqrt(variance)
    return (max(-1.0, point - half), min(1.0, point + half))
