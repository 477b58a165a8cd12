"""Drift: a rater's rolling agreement over time against their own baseline.

Calibration (``bench/drift_calibration.py``). The plain rule "rolling mean below
baseline - margin" looks at every position of a long series, and both the baseline
and each window are noisy: with a window and a baseline of 100 items at 85% accuracy
the difference has a standard error of about 5 points, so a 10-point margin is two
standard errors at one position, and over a 600-item project about 20% of stable
experts cross it somewhere (measured with a 100-item baseline; 14% with 200). With ``alpha`` given, the rule becomes a
control limit aware of the many looks:

* the comparison is made on the arcsine square-root scale, where a binomial mean has
  the same variance 1/(4n) whatever the accuracy (at 95% accuracy the plain normal
  approximation understates how far a window can dip, and flags too often);
* the limit is ``asin(sqrt(baseline)) - z * sqrt(1/(4 window) + 1/(4 baseline_n))``,
  with ``z`` the one-sided normal quantile for ``alpha / (4 * looks)``; ``looks`` is the
  number of disjoint windows after the baseline. Bonferroni over the disjoint windows
  alone is not enough, since overlapping windows give a series more chances to dip;
  the factor 4 was chosen by simulation (factor 2 flagged 5.8% of stable experts);
* the limit is never closer to the baseline than ``margin``, the smallest drop worth
  telling a PM about; an expert whose baseline is perfect is still judged this way.

Measured by the bench (4,000 experts, accuracy 0.75-0.95, 600 items, window 100,
baseline 200, alpha 0.05, seed 20261201): 3.5% of stable experts flagged over the
project, 95.5% of planted 15-point drops (from item 300 on) caught; the plain margin
rule flagged 13.9%. With a baseline of 100 items the false-flag share is 3.3% but only
81.3% of the drops are caught, hence the default baseline of 200. The tests repeat the
simulation on a fixed seed (under 5% flagged, over 90% caught).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from annotation.agreement.stats._arrays import NAN

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
    limit: float = NAN
    """The control limit the rolling mean was compared with (nan when nothing could alert)."""


def normal_upper_quantile(tail: float) -> float:
    """z with P(Z > z) = tail for a standard normal Z, by bisection on ``erfc`` (0 < tail < 1)."""
    if not 0.0 < tail < 1.0:
        raise ValueError("tail must be strictly between 0 and 1")
    low, high = -40.0, 40.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if 0.5 * math.erfc(mid / math.sqrt(2.0)) > tail:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def drift_limit(baseline: float, n: int, window: int, baseline_n: int, margin: float,
                alpha: float | None) -> float:
    """The control limit of :func:`rolling_drift` on the accuracy scale (see the module docstring)."""
    if math.isnan(baseline):
        return NAN
    plain = baseline - margin
    if alpha is None:
        return plain
    looks = max(1, (n - baseline_n) // window)
    z = normal_upper_quantile(alpha / (4.0 * looks))
    se = math.sqrt(1.0 / (4.0 * window) + 1.0 / (4.0 * baseline_n))
    angle = math.asin(math.sqrt(min(max(baseline, 0.0), 1.0))) - z * se
    # Below angle 0 no rolling mean can fall: the limit is then 0 and nothing alerts.
    transformed = math.sin(angle) ** 2 if angle > 0 else 0.0
    return min(plain, transformed)


def rolling_drift(
    values: ArrayLike,
    timestamps_order: ArrayLike | None,
    window: int,
    baseline_n: int,
    margin: float,
    *,
    skip_baseline: bool = True,
    alpha: float | None = None,
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

    With ``alpha`` (a project-wide false-alert rate per expert, e.g. 0.05) the limit
    is widened to ``baseline - max(margin, z * se)``, multiple-testing aware (module
    docstring); ``None`` keeps the plain margin rule.
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
    limit = drift_limit(baseline, n, window, baseline_n, margin, alpha)
    alert = rolling < limit  # nan compares False, so no alert
    if skip_baseline:
        alert[:baseline_n] = False
    positions = np.flatnonzero(alert).astype(np.int64)
    return DriftResult(order, rolling, baseline, positions, order[positions], limit)
