"""Paired comparisons and zone-aware acceptability of a judge's labels. No Django import here.

Two judge runs labelling the same units are paired: on each unit each run either agrees
with the human verdict or not. Only the *discordant* units (one run right, the other
wrong) say anything about which run is better; under "no difference" each discordant
unit goes either way with probability 1/2. The exact McNemar test is therefore the
two-sided binomial test of b successes in b + c trials at p = 1/2:
``p = min(1, 2 * P(X <= min(b, c)))`` with ``X ~ Binomial(b + c, 1/2)``.

The sum is done in log space with ``math.lgamma`` so that a few hundred thousand
discordant pairs neither overflow nor lose the tail to rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["McNemarResult", "mcnemar_exact", "within_expert_range"]


@dataclass(frozen=True)
class McNemarResult:
    """b: units only the first run got right; c: only the second; the exact two-sided p-value."""

    b: int
    c: int
    p_value: float

    @property
    def discordant(self) -> int:
        return self.b + self.c


def _log_binom_pmf(k: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    lg = np.vectorize(math.lgamma, otypes=[np.float64])
    return lg(n + 1.0) - lg(k + 1.0) - lg(n - k + 1.0) - n * math.log(2.0)  # type: ignore[no-any-return]


def mcnemar_exact(b: int, c: int) -> McNemarResult:
    """Exact McNemar test on the discordant counts ``b`` and ``c`` (see the module docstring).

    With no discordant pair there is no evidence of a difference: p = 1.
    """
    b, c = int(b), int(c)
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be non-negative")
    n = b + c
    if n == 0:
        return McNemarResult(b, c, 1.0)
    k = min(b, c)
    logs = _log_binom_pmf(np.arange(k + 1, dtype=np.float64), n)
    top = float(logs.max())
    tail = math.exp(top) * float(np.exp(logs - top).sum())
    return McNemarResult(b, c, min(1.0, 2.0 * tail))


def within_expert_range(judge: ArrayLike, labels: ArrayLike) -> NDArray[np.bool_]:
    """Per unit, whether the judge's label lies between the lowest and highest expert label.

    ``labels`` is the ``(n_units, n_slots)`` label matrix (``-1`` missing); ``judge`` the
    judge's label per unit (``-1`` missing). A unit with no expert label or no judge
    label is not within range. For 0/1 labels a split panel's range is [0, 1], so any
    judge label is inside it; for graded labels the range is the panel's span.
    """
    j = np.asarray(judge, dtype=np.int64)
    m = np.asarray(labels, dtype=np.int64)
    if m.ndim != 2 or j.shape != (m.shape[0],):
        raise ValueError("judge must hold one label per row of the label matrix")
    present = m >= 0
    big = np.iinfo(np.int64).max
    low = np.where(present, m, big).min(axis=1, initial=big)
    high = np.where(present, m, -1).max(axis=1, initial=-1)
    has = present.any(axis=1) & (j >= 0)
    result: NDArray[np.bool_] = has & (low <= j) & (j <= high)
    return result
