"""Input checks and shared constants of the agreement statistics (label vectors and matrices)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

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
