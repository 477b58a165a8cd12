"""Drift: a rater's rolling agreement over time against their own baseline."""

from __future__ import annotations

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
