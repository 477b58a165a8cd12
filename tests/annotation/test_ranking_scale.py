"""The O(n log n) ranking statistics of annotation.agreement.scoring, against plain O(n^2) references.

The references are the all-pairs formulas the product code used before it had to rank
thousands of models over a thousand bootstrap replicates; they stay here, independent
of the product code, alongside scipy's own implementations. No Django needed.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.stats import kendalltau, rankdata

from annotation.agreement import scoring
from annotation.agreement.sections import _units_by_model

# ------------------------------------------------------------ O(n^2) references


def reference_competition_ranks(scores: np.ndarray) -> np.ndarray:
    """1 + number of strictly better real scores, every pair compared; nan after every real score."""
    real = np.where(np.isnan(scores), -np.inf, scores)
    ranks = 1 + (real[..., None, :] > real[..., :, None]).sum(axis=-1)
    n_real = (~np.isnan(scores)).sum(axis=-1, keepdims=True)
    return np.where(np.isnan(scores), n_real + 1, ranks)


def reference_tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b along the last axis from the signs of every pair's differences."""
    n = x.shape[-1]
    i, j = np.triu_indices(n, k=1)
    dx = np.sign(x[..., i] - x[..., j])
    dy = np.sign(y[..., i] - y[..., j])
    denom = np.sqrt((dx != 0).sum(axis=-1).astype(np.float64) * (dy != 0).sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denom > 0, (dx * dy).sum(axis=-1) / np.where(denom > 0, denom, 1.0), np.nan)


# ------------------------------------------------------------------ strategies

# Few distinct values, so that ties are common; now and then any finite float.
TIED = st.integers(-3, 3).map(float)
VALUES = st.one_of(TIED, TIED, TIED, st.floats(-1e6, 1e6, allow_nan=False))
WITH_NAN = st.one_of(VALUES, VALUES, st.just(math.nan))


def stacks(elements: st.SearchStrategy[float], max_n: int = 300) -> st.SearchStrategy[np.ndarray]:
    """1-D (n,) or 2-D (replicates, n) float arrays, n from 0 to max_n."""
    shape = st.one_of(st.tuples(st.integers(0, max_n)), st.tuples(st.integers(1, 4), st.integers(0, max_n)))
    return hnp.arrays(np.float64, shape, elements=elements)


@st.composite
def pairs(draw: st.DrawFn, elements: st.SearchStrategy[float] = VALUES) -> tuple[np.ndarray, np.ndarray]:
    """Two equally shaped stacks; y is sometimes a noisy copy of x, so tau spans its whole range."""
    x = draw(stacks(elements))
    other = draw(hnp.arrays(np.float64, x.shape, elements=elements))
    y = draw(st.sampled_from([other, x, -x, np.round(x / 2) + other % 2]))
    return x, y


# ----------------------------------------------------------------------- ranks


@settings(max_examples=100, deadline=None)
@given(scores=stacks(WITH_NAN))
def test_competition_ranks_match_the_all_pairs_reference(scores: np.ndarray) -> None:
    ranks = scoring._competition_ranks(scores)

    assert ranks.dtype == np.int64
    np.testing.assert_array_equal(ranks, reference_competition_ranks(scores))


@settings(max_examples=100, deadline=None)
@given(scores=stacks(VALUES))
def test_competition_ranks_match_scipy_min_ranks_of_the_negated_scores(scores: np.ndarray) -> None:
    ranks = scoring._competition_ranks(scores)

    np.testing.assert_array_equal(ranks, rankdata(-scores, method="min", axis=-1))


def test_competition_ranks_of_a_hand_example_with_ties_and_nans() -> None:
    scores = np.array([[50.0, 70.0, np.nan, 50.0, 10.0, np.nan], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]])

    ranks = scoring._competition_ranks(scores)

    np.testing.assert_array_equal(ranks, [[2, 1, 5, 2, 4, 5], [1, 1, 1, 1, 1, 1]])


# ------------------------------------------------------------------------- tau


@settings(max_examples=100, deadline=None)
@given(xy=pairs())
def test_tau_b_matches_the_all_pairs_reference(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = xy

    tau = scoring._kendall_tau_b(x, y)

    assert tau.shape == x.shape[:-1]
    np.testing.assert_allclose(tau, reference_tau_b(x, y), rtol=1e-12, atol=1e-12, equal_nan=True)


@settings(max_examples=100, deadline=None)
@given(xy=pairs())
def test_tau_b_matches_scipy_row_by_row(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = (np.atleast_2d(a) for a in xy)
    expected = [kendalltau(a, b).statistic if a.size >= 2 else math.nan for a, b in zip(x, y)]

    tau = scoring._kendall_tau_b(x, y)

    np.testing.assert_allclose(tau, expected, rtol=1e-12, atol=1e-12, equal_nan=True)


@settings(max_examples=100, deadline=None)
@given(xy=pairs(WITH_NAN))
def test_tau_b_with_nans_matches_the_reference(xy: tuple[np.ndarray, np.ndarray]) -> None:
    # Any nan in a row makes its tau nan, as with the all-pairs formula.
    x, y = xy

    tau = scoring._kendall_tau_b(x, y)

    np.testing.assert_allclose(tau, reference_tau_b(x, y), rtol=1e-12, atol=1e-12, equal_nan=True)


@settings(max_examples=50, deadline=None)
@given(xy=pairs())
def test_kendall_tau_is_the_one_row_case(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = (np.atleast_2d(a)[0] for a in xy)

    tau = scoring.kendall_tau(x, y)

    np.testing.assert_allclose(tau, reference_tau_b(x, y) if x.size >= 2 else math.nan, rtol=1e-12,
                               atol=1e-12, equal_nan=True)


def test_tau_b_of_a_hand_example() -> None:
    # Pairs of x = 1 1 2 3, y = 1 3 4 2: (1,2) tied in x; (1,3), (1,4), (2,3) concordant;
    # (2,4), (3,4) discordant. C - D = 1, over sqrt(5 untied in x * 6 untied in y).
    x = np.array([1.0, 1.0, 2.0, 3.0])
    y = np.array([1.0, 3.0, 4.0, 2.0])

    tau = scoring._kendall_tau_b(np.vstack([x, x]), np.vstack([y, x]))

    np.testing.assert_allclose(tau, [1 / math.sqrt(30), 1.0])


@settings(max_examples=100, deadline=None)
@given(values=hnp.arrays(np.int64, st.tuples(st.integers(1, 4), st.integers(0, 80)), elements=st.integers(0, 5)))
def test_inversions_count_strictly_decreasing_pairs(values: np.ndarray) -> None:
    i, j = np.triu_indices(values.shape[-1], k=1)

    counted = scoring._inversions(values)

    np.testing.assert_array_equal(counted, (values[:, i] > values[:, j]).sum(axis=-1))


# ------------------------------------------------------------ units by model


@settings(max_examples=100, deadline=None)
@given(n_models=st.integers(1, 30), owners=st.lists(st.integers(0, 29), max_size=200), data=st.data())
def test_units_by_model_equals_one_mask_per_model(n_models: int, owners: list[int], data: st.DataObject) -> None:
    unit_model = np.asarray([o % n_models for o in owners], dtype=np.int64)
    use = np.asarray(data.draw(st.lists(st.booleans(), min_size=len(owners), max_size=len(owners))), dtype=bool)
    material = SimpleNamespace(derived={"unit_model": unit_model}, models=[f"m{i}" for i in range(n_models)])
    expected = [(i, np.flatnonzero(use & (unit_model == i))) for i in range(n_models)
                if (use & (unit_model == i)).any()]

    grouped = _units_by_model(material, use)

    assert [i for i, _ in grouped] == [i for i, _ in expected]
    for (_, got), (_, want) in zip(grouped, expected):
        np.testing.assert_array_equal(got, want)
