"""Tests for annotation.agreement.stats (pure numpy, no Django, no database).

scikit-learn and statsmodels appear here only as independent references.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from annotation.agreement import stats
from annotation.agreement.stats.drift import normal_upper_quantile
from bench.drift_calibration import simulate as drift_simulate
from bench.interval_coverage import coverage as interval_coverage

# ------------------------------------------------------------------- fixtures


def correlated_pair(seed: int, n: int, p_same: float, n_cat: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Two label vectors where b copies a with probability p_same, else is random."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_cat, n)
    b = np.where(rng.random(n) < p_same, a, rng.integers(0, n_cat, n))
    return a, b


def panel(seed: int, n_items: int, n_raters: int, n_cat: int, p_missing: float = 0.0) -> np.ndarray:
    """A label matrix around a latent truth, with -1 holes at rate p_missing."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, n_cat, n_items)[:, None]
    noise = rng.integers(0, n_cat, (n_items, n_raters))
    labels = np.where(rng.random((n_items, n_raters)) < 0.7, truth, noise)
    return np.where(rng.random((n_items, n_raters)) < p_missing, -1, labels)


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C:
# 4 observers x 12 units, nominal values 1..5, "." (here -1) missing. Unit 12 has a
# single value and is not pairable. Published nominal alpha: 0.743.
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, -1, -1, -1],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, -1, 3],
        [-1, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, -1],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, -1],
    ]
).T


# ----------------------------------------------------- two raters: sklearn reference


@pytest.mark.parametrize(
    ("seed", "n", "p_same", "n_cat"),
    [(0, 10, 0.5, 2), (1, 57, 0.8, 2), (2, 1000, 0.9, 2), (3, 20000, 0.3, 2), (4, 500, 0.6, 3), (5, 3000, 0.7, 5)],
)
def test_cohen_kappa_matches_sklearn(seed: int, n: int, p_same: float, n_cat: int) -> None:
    a, b = correlated_pair(seed, n, p_same, n_cat)

    ours = stats.cohen_kappa(a, b)

    assert ours == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


@pytest.mark.parametrize(("seed", "n"), [(0, 1), (1, 33), (2, 5000)])
def test_percent_agreement_is_share_of_equal_pairs(seed: int, n: int) -> None:
    a, b = correlated_pair(seed, n, 0.6)

    ours = stats.percent_agreement(a, b)

    assert ours == pytest.approx(np.mean(a == b))


def test_cohen_kappa_ignores_pairs_with_a_missing_label() -> None:
    a, b = correlated_pair(7, 300, 0.7)
    a_holes = np.where(np.arange(300) % 7 == 0, -1, a)
    keep = a_holes >= 0

    ours = stats.cohen_kappa(a_holes, b)

    assert ours == pytest.approx(cohen_kappa_score(a[keep], b[keep]))


def test_cohen_kappa_single_shared_class_is_nan() -> None:
    ones = np.ones(12, dtype=int)

    value = stats.cohen_kappa(ones, ones)

    assert math.isnan(value)


def test_cohen_kappa_constant_on_different_classes_is_zero() -> None:
    # p_o = 0 and p_e = 1*0 + 0*1 = 0, so kappa = 0, not undefined.
    value = stats.cohen_kappa(np.ones(5, dtype=int), np.zeros(5, dtype=int))

    assert value == 0.0


def test_two_rater_statistics_on_empty_input_are_nan() -> None:
    empty = np.zeros(0, dtype=int)

    values = [stats.percent_agreement(empty, empty), stats.cohen_kappa(empty, empty)]

    assert all(math.isnan(v) for v in values)


def test_two_rater_statistics_reject_different_lengths() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        stats.cohen_kappa([0, 1], [0, 1, 1])


# ------------------------------------------------------ Fleiss: statsmodels reference


@pytest.mark.parametrize(
    ("seed", "n_items", "n_raters", "n_cat"),
    [(0, 5, 2, 2), (1, 40, 3, 2), (2, 400, 3, 2), (3, 1000, 5, 4), (4, 25000, 3, 2)],
)
def test_ratings_to_counts_matches_statsmodels_aggregate_raters(seed: int, n_items: int, n_raters: int, n_cat: int) -> None:
    labels = panel(seed, n_items, n_raters, n_cat)
    reference, _ = aggregate_raters(labels, n_cat=n_cat)

    counts = stats.ratings_to_counts(labels, n_categories=n_cat)

    np.testing.assert_array_equal(counts, reference)


@pytest.mark.parametrize(
    ("seed", "n_items", "n_raters", "n_cat"),
    [(0, 5, 2, 2), (1, 40, 3, 2), (2, 400, 3, 2), (3, 1000, 5, 4), (4, 25000, 3, 2)],
)
def test_fleiss_kappa_matches_statsmodels(seed: int, n_items: int, n_raters: int, n_cat: int) -> None:
    labels = panel(seed, n_items, n_raters, n_cat)
    table, _ = aggregate_raters(labels, n_cat=n_cat)

    ours = stats.fleiss_kappa(stats.ratings_to_counts(labels, n_categories=n_cat))

    assert ours == pytest.approx(sm_fleiss_kappa(table, method="fleiss"), abs=1e-12)


def test_fleiss_kappa_hand_computed() -> None:
    # 3 items x 3 raters, counts per (miss, hit): [3,0], [2,1], [0,3]. N=3, n=3.
    # p = (5/9, 4/9); P_i = (9-3)/6 = 1, (4+1-3)/6 = 1/3, 1; P_bar = 7/9.
    # P_e = 25/81 + 16/81 = 41/81; kappa = (63/81 - 41/81) / (40/81) = 22/40 = 0.55.
    counts = np.array([[3, 0], [2, 1], [0, 3]])

    value = stats.fleiss_kappa(counts)

    assert value == pytest.approx(0.55)


def test_fleiss_kappa_single_category_is_nan() -> None:
    value = stats.fleiss_kappa(np.array([[3, 0], [3, 0]]))

    assert math.isnan(value)


def test_fleiss_kappa_rejects_unequal_rater_totals() -> None:
    with pytest.raises(ValueError, match="same number of ratings"):
        stats.fleiss_kappa(np.array([[3, 0], [1, 1]]))


def test_fleiss_kappa_empty_table_is_nan() -> None:
    value = stats.fleiss_kappa(np.zeros((0, 2)))

    assert math.isnan(value)


def test_ratings_to_counts_skips_missing_labels() -> None:
    labels = np.array([[1, -1, 0], [-1, -1, -1], [2, 2, -1]])

    counts = stats.ratings_to_counts(labels)

    np.testing.assert_array_equal(counts, [[1, 1, 0], [0, 0, 0], [0, 0, 2]])


def test_ratings_to_counts_rejects_label_beyond_categories() -> None:
    with pytest.raises(ValueError, match="n_categories"):
        stats.ratings_to_counts(np.array([[0, 2]]), n_categories=2)


# ------------------------------------------------------------------ Krippendorff


def test_krippendorff_alpha_published_example() -> None:
    value = stats.krippendorff_alpha_nominal(KRIPPENDORFF_2011)

    assert round(value, 3) == 0.743


def test_krippendorff_alpha_two_raters_hand_computed() -> None:
    # Units:      1  2  3  4  5
    # Rater A:    0  0  1  1  0
    # Rater B:    0  1  1  1  0
    # Each unit has m_u = 2, so each ordered pair weighs 1/(m_u - 1) = 1.
    # Coincidences: o00 = 2 + 2 = 4 (units 1, 5), o11 = 2 + 2 = 4 (units 3, 4),
    # o01 = o10 = 1 (unit 2). Margins n0 = n1 = 5, n = 10.
    # D_o = (o01 + o10) / n = 0.2; D_e = 2 n0 n1 / (n (n - 1)) = 50/90.
    # alpha = 1 - D_o / D_e = 1 - 0.2 * 90 / 50 = 1 - 0.36 = 0.64.
    labels = np.array([[0, 0], [0, 1], [1, 1], [1, 1], [0, 0]])

    value = stats.krippendorff_alpha_nominal(labels)

    assert value == pytest.approx(0.64)


def test_krippendorff_alpha_perfect_agreement_with_variation_is_one() -> None:
    labels = np.array([[0, 0, 0], [1, 1, -1], [2, 2, 2], [1, 1, 1]])

    value = stats.krippendorff_alpha_nominal(labels)

    assert value == pytest.approx(1.0)


def test_krippendorff_alpha_one_category_everywhere_is_undefined() -> None:
    # Every rater agrees, but on one value only: expected disagreement is 0.
    value = stats.krippendorff_alpha_nominal(np.ones((6, 3), dtype=int))

    assert math.isnan(value)


def test_krippendorff_alpha_drops_units_with_one_label() -> None:
    base = np.array([[0, 0], [0, 1], [1, 1], [1, 1], [0, 0]])
    with_singletons = np.vstack([base, [[1, -1], [-1, 0], [-1, -1]]])

    value = stats.krippendorff_alpha_nominal(with_singletons)

    assert value == pytest.approx(0.64)


def test_krippendorff_alpha_empty_is_nan() -> None:
    value = stats.krippendorff_alpha_nominal(np.zeros((0, 3), dtype=int))

    assert math.isnan(value)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n_items=st.integers(2, 60), n_raters=st.integers(2, 5))
def test_krippendorff_alpha_ignores_rater_order_and_category_names(seed: int, n_items: int, n_raters: int) -> None:
    labels = panel(seed, n_items, n_raters, 3, p_missing=0.2)
    rng = np.random.default_rng(seed)
    renamed = np.where(labels >= 0, np.array([2, 0, 1])[labels], -1)[:, rng.permutation(n_raters)]

    pair = [stats.krippendorff_alpha_nominal(labels), stats.krippendorff_alpha_nominal(renamed)]

    np.testing.assert_allclose(pair[0], pair[1], rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------- Gwet and observed


def test_gwet_ac1_hand_computed_with_missing_labels() -> None:
    # 3 raters, 4 items, binary:
    #   item 1: 1 1 1  -> r=3, agreeing pairs share = (3*2)/(3*2) = 1
    #   item 2: 1 1 0  -> r=3, share = (2*1 + 1*0)/(3*2) = 1/3
    #   item 3: 0 0 .  -> r=2, share = (2*1)/(2*1) = 1
    #   item 4: 1 . .  -> r=1, not in p_a (needs r >= 2) but in pi
    # p_a = (1 + 1/3 + 1) / 3 = 7/9
    # pi_1 = mean(3/3, 2/3, 0/2, 1/1) = (8/3)/4 = 2/3, pi_0 = 1/3
    # p_e = (pi_0 (1 - pi_0) + pi_1 (1 - pi_1)) / (q - 1) = (2/9 + 2/9) / 1 = 4/9
    # AC1 = (7/9 - 4/9) / (1 - 4/9) = (3/9) / (5/9) = 0.6
    labels = np.array([[1, 1, 1], [1, 1, 0], [0, 0, -1], [1, -1, -1]])

    value = stats.gwet_ac1(labels)

    assert value == pytest.approx(0.6)


def test_observed_agreement_multi_hand_computed() -> None:
    # Same matrix as the AC1 example: p_a = 7/9.
    labels = np.array([[1, 1, 1], [1, 1, 0], [0, 0, -1], [1, -1, -1]])

    value = stats.observed_agreement_multi(labels)

    assert value == pytest.approx(7 / 9)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 300))
def test_gwet_ac1_two_raters_matches_closed_form(seed: int, n: int) -> None:
    # Two raters, binary, complete: AC1 = (p_o - p_e) / (1 - p_e) with
    # p_e = 2 pi (1 - pi) and pi the mean of the two raters' hit rates.
    a, b = correlated_pair(seed, n, 0.7)
    pi = (a.mean() + b.mean()) / 2
    p_e = 2 * pi * (1 - pi)
    expected = (np.mean(a == b) - p_e) / (1 - p_e)

    value = stats.gwet_ac1(np.column_stack([a, b]))

    assert value == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("seed", "n_items", "n_raters"), [(0, 10, 3), (1, 500, 3), (2, 2000, 6)])
def test_observed_agreement_complete_data_equals_mean_over_rater_pairs(seed: int, n_items: int, n_raters: int) -> None:
    labels = panel(seed, n_items, n_raters, 2)
    i, j = np.triu_indices(n_raters, k=1)
    pairwise = (labels[:, i] == labels[:, j]).mean()

    value = stats.observed_agreement_multi(labels)

    assert value == pytest.approx(pairwise)


def test_gwet_ac1_single_class_is_defined() -> None:
    # Unlike kappa, AC1 stays defined: p_a = 1, pi = (0, 1), p_e = 0 -> AC1 = 1.
    value = stats.gwet_ac1(np.ones((4, 3), dtype=int))

    assert value == pytest.approx(1.0)


def test_multi_rater_statistics_without_pairs_are_nan() -> None:
    lonely = np.array([[1, -1, -1], [-1, 0, -1]])

    values = [stats.gwet_ac1(lonely), stats.observed_agreement_multi(lonely), stats.krippendorff_alpha_nominal(lonely)]

    assert all(math.isnan(v) for v in values)


def test_multi_rater_statistics_on_empty_input_are_nan() -> None:
    empty = np.zeros((0, 3), dtype=int)

    values = [stats.gwet_ac1(empty), stats.observed_agreement_multi(empty)]

    assert all(math.isnan(v) for v in values)


# -------------------------------------------------------------------- majority


def test_majority_missing_third_label_is_pending_not_tied() -> None:
    labels = np.array([[1, 0, -1]])

    result = stats.majority(labels)

    assert (result.majority[0], result.hits[0], result.total[0], result.pending[0]) == (-1, 1, 2, True)


def test_majority_votes_and_zones() -> None:
    labels = np.array([[1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 1, 0], [1, 1, -1], [0, 0, -1], [-1, -1, -1]])

    result = stats.majority(labels)

    np.testing.assert_array_equal(result.majority, [1, 0, 1, 0, 1, 0, -1])
    np.testing.assert_array_equal(result.hits, [2, 0, 3, 1, 2, 0, 0])
    np.testing.assert_array_equal(result.total, [3, 3, 3, 3, 2, 2, 0])
    np.testing.assert_array_equal(result.pending, [False, False, False, False, True, True, True])
    np.testing.assert_array_equal(result.unanimous, [False, True, True, False, False, False, False])


def test_majority_of_empty_matrix_is_empty() -> None:
    result = stats.majority(np.zeros((0, 3), dtype=int))

    assert [len(field) for field in result] == [0, 0, 0, 0, 0]


# ---------------------------------------------------------------- leave one out


def reference_leave_one_out(labels: np.ndarray) -> np.ndarray:
    """Plain loop version of the leave-one-out definition, for comparison."""
    out = np.full(labels.shape, np.nan)
    for i, row in enumerate(labels):
        for j, own in enumerate(row):
            others = [v for k, v in enumerate(row) if k != j and v >= 0]
            winners = [c for c in set(others) if 2 * others.count(c) > len(others)]
            if own >= 0 and winners:
                out[i, j] = float(winners[0] == own)
    return out


def test_leave_one_out_hand_cases() -> None:
    labels = np.array([[1, 1, 0], [1, 0, -1], [1, -1, -1], [0, 0, 0]])

    result = stats.leave_one_out_agreement(labels)

    # Row 1: slots 0 and 1 see a 1-1 split among the others (tie -> nan);
    # slot 2 sees two hits and said miss -> 0.
    # Row 2: each rater has one other rater who disagrees -> 0, 0; slot 2 missing.
    # Row 3: nobody else labelled -> nan.
    expected = np.array([[np.nan, np.nan, 0.0], [0.0, 0.0, np.nan], [np.nan] * 3, [1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize(("seed", "n_raters", "n_cat"), [(0, 3, 2), (1, 4, 2), (2, 5, 3)])
def test_leave_one_out_matches_plain_loop(seed: int, n_raters: int, n_cat: int) -> None:
    labels = panel(seed, 300, n_raters, n_cat, p_missing=0.25)

    result = stats.leave_one_out_agreement(labels)

    np.testing.assert_array_equal(result, reference_leave_one_out(labels))


# ------------------------------------------------------ alternative annotator test


def reference_alt_test(judge: np.ndarray, experts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Plain loop version of the judge/expert agreement arrays."""
    n, m = experts.shape
    ja = np.full((n, m), np.nan)
    ea = np.full((n, m), np.nan)
    for i in range(n):
        for j in range(m):
            others = [experts[i, k] for k in range(m) if k != j and experts[i, k] >= 0]
            if judge[i] >= 0 and experts[i, j] >= 0 and others:
                ja[i, j] = np.mean([judge[i] == o for o in others])
                ea[i, j] = np.mean([experts[i, j] == o for o in others])
    return ja, ea


def test_alternative_annotator_test_hand_case() -> None:
    experts = np.array([[1, 1, 0], [1, 0, 1], [0, 0, 0], [1, 1, 1]])
    judge = np.array([1, 1, 0, 0])
    # Item 0: vs slot 0 others (1, 0): judge 0.5, expert 0.5; slot 2 others (1, 1): judge 1, expert 0.
    # Item 1: slot 1 others (1, 1): judge 1, expert 0.
    # Item 3: judge says 0 against unanimous 1s: judge 0, expert 1 for every slot.
    # Means over the 4 items, judge vs expert: slot 0 0.5 < 0.75 (loss),
    # slot 1 0.625 >= 0.625, slot 2 0.625 >= 0.625 (wins) -> advantage 2/3.

    result = stats.alternative_annotator_test(judge, experts)

    np.testing.assert_allclose(result.judge_agreement[0], [0.5, 0.5, 1.0])
    np.testing.assert_allclose(result.expert_agreement[0], [0.5, 0.5, 0.0])
    # Slot 0 wins on items 0, 1, 2 of 4; slot 1 on 0, 1, 2; slot 2 on 0, 1, 2.
    np.testing.assert_allclose(result.win_rate, [0.75, 0.75, 0.75])
    np.testing.assert_allclose(result.judge_mean, [0.5, 0.625, 0.625])
    np.testing.assert_allclose(result.expert_mean, [0.75, 0.625, 0.625])
    assert result.advantage_probability == pytest.approx(2 / 3)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_alternative_annotator_arrays_match_plain_loop(seed: int) -> None:
    experts = panel(seed, 200, 3, 2, p_missing=0.2)
    judge = np.where(np.random.default_rng(seed).random(200) < 0.1, -1, panel(seed + 50, 200, 1, 2)[:, 0])
    ja, ea = reference_alt_test(judge, experts)

    result = stats.alternative_annotator_test(judge, experts)

    np.testing.assert_allclose(result.judge_agreement, ja)
    np.testing.assert_allclose(result.expert_agreement, ea)
    np.testing.assert_allclose(result.win_rate, np.nanmean(ja >= ea, axis=0, where=~np.isnan(ja)))


def test_alternative_annotator_judge_equal_to_majority_always_wins() -> None:
    experts = panel(11, 400, 3, 2)
    judge = stats.majority(experts).majority

    result = stats.alternative_annotator_test(judge, experts)

    assert (result.advantage_probability, result.average_win_rate) == (1.0, 1.0)


def test_alternative_annotator_empty_input_is_nan() -> None:
    result = stats.alternative_annotator_test(np.zeros(0, dtype=int), np.zeros((0, 3), dtype=int))

    assert math.isnan(result.advantage_probability) and result.judge_agreement.shape == (0, 3)


# ------------------------------------------------------------------------- drift


def test_rolling_drift_flags_a_decline_after_the_baseline() -> None:
    values = np.array([1, 1, 1, 1, 0, 0, 0, 1, 0, 0])
    # Baseline = mean of first 4 = 1.0; window 3 rolling means from t=2:
    # 1, 1, 2/3, 1/3, 0, 1/3, 1/3, 1/3. Threshold 1.0 - 0.2 = 0.8; alerts at t >= 4.

    result = stats.rolling_drift(values, None, window=3, baseline_n=4, margin=0.2)

    assert result.baseline == 1.0
    np.testing.assert_allclose(result.rolling[2:5], [1.0, 1.0, 2 / 3])
    np.testing.assert_array_equal(result.alert_positions, [4, 5, 6, 7, 8, 9])


def test_rolling_drift_orders_by_timestamp_and_maps_back() -> None:
    values = np.array([0, 1, 1, 0, 1])
    stamps = np.array([50, 10, 20, 40, 30])
    # Time order: indices 1, 2, 4, 3, 0 -> values 1, 1, 1, 0, 0.
    # Baseline (first 2) = 1; window 2 means: nan, 1, 1, 0.5, 0 -> alerts at positions 3, 4.

    result = stats.rolling_drift(values, stamps, window=2, baseline_n=2, margin=0.1)

    np.testing.assert_array_equal(result.alert_positions, [3, 4])
    np.testing.assert_array_equal(result.alert_indices, [3, 0])


def test_rolling_drift_short_series_has_no_alerts() -> None:
    result = stats.rolling_drift(np.array([0, 0]), None, window=5, baseline_n=10, margin=0.0)

    assert math.isnan(result.baseline) and result.alert_indices.size == 0


def test_rolling_drift_can_include_the_baseline_period() -> None:
    values = np.array([1, 0, 0, 1, 1, 1])
    # Baseline = 4/6, threshold 4/6 - 0.1 ~= 0.567; window 2 means: nan, 0.5, 0, 0.5, 1, 1.

    result = stats.rolling_drift(values, None, window=2, baseline_n=6, margin=0.1, skip_baseline=False)

    np.testing.assert_array_equal(result.alert_positions, [1, 2, 3])


# --------------------------------------------------------------------- bootstrap


def clustered_pair(seed: int, n_clusters: int, per_cluster: int, p_same: float) -> tuple[np.ndarray, ...]:
    """0/1 judge and majority vectors whose agreement varies by cluster."""
    rng = np.random.default_rng(seed)
    clusters = np.repeat(np.arange(n_clusters), per_cluster)
    cluster_p = np.clip(rng.normal(p_same, 0.15, n_clusters), 0, 1)[clusters]
    a = rng.integers(0, 2, clusters.size)
    b = np.where(rng.random(clusters.size) < cluster_p, a, 1 - a)
    return a, b, clusters


def test_cluster_weights_rows_are_draws_of_all_clusters() -> None:
    blocks = list(stats.cluster_weights(7, 50, seed=1))
    weights = np.vstack(blocks)

    assert weights.shape == (50, 7) and set(weights.sum(axis=1)) == {7}


def test_bootstrap_single_cluster_never_varies_but_items_do() -> None:
    a, b, _ = clustered_pair(0, 1, 400, 0.7)
    one_cluster = np.zeros(a.size, dtype=int)
    each_item = np.arange(a.size)

    cluster_ci = stats.bootstrap_ci(stats.percent_agreement, one_cluster, a, b, n_boot=300, seed=1)
    item_ci = stats.bootstrap_ci(stats.percent_agreement, each_item, a, b, n_boot=300, seed=1)

    assert cluster_ci[1] - cluster_ci[0] == 0.0
    assert item_ci[1] - item_ci[0] > 0.05


def test_bootstrap_huge_homogeneous_cluster_widens_the_cluster_interval() -> None:
    # One dialogue of 600 identical, agreeing items plus 30 small mixed dialogues.
    # Item resampling treats the 600 as independent evidence and gives a narrow
    # interval; cluster resampling sees that they are one draw and swings with it.
    a_small, b_small, c_small = clustered_pair(3, 30, 10, 0.5)
    a = np.concatenate([np.ones(600, dtype=int), a_small])
    b = np.concatenate([np.ones(600, dtype=int), b_small])
    clusters = np.concatenate([np.full(600, 999), c_small])

    cluster_ci = stats.bootstrap_ci(stats.percent_agreement, clusters, a, b, n_boot=500, seed=2)
    item_ci = stats.bootstrap_ci(stats.percent_agreement, np.arange(a.size), a, b, n_boot=500, seed=2)

    assert (cluster_ci[1] - cluster_ci[0]) > 5 * (item_ci[1] - item_ci[0])


def test_bootstrap_ci_contains_the_point_estimate() -> None:
    a, b, clusters = clustered_pair(4, 200, 12, 0.75)
    point = stats.cohen_kappa(a, b)

    low, high = stats.bootstrap_ci(stats.cohen_kappa, clusters, a, b, n_boot=400, seed=3)

    assert low < point < high


def test_bootstrap_is_reproducible_for_a_seed() -> None:
    a, b, clusters = clustered_pair(5, 40, 5, 0.6)

    first = stats.bootstrap_replicates(stats.percent_agreement, clusters, a, b, n_boot=100, seed=9)
    second = stats.bootstrap_replicates(stats.percent_agreement, clusters, a, b, n_boot=100, seed=9)

    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize(("seed", "n_clusters", "per_cluster"), [(0, 5, 3), (1, 80, 10), (2, 300, 4)])
def test_fast_agreement_kappa_bootstrap_equals_generic_path(seed: int, n_clusters: int, per_cluster: int) -> None:
    a, b, clusters = clustered_pair(seed, n_clusters, per_cluster, 0.8)
    # String ids, shuffled rows: the fast path must not depend on either.
    ids = np.array([f"dialogue-{c}" for c in clusters])
    perm = np.random.default_rng(seed).permutation(a.size)
    a, b, ids = a[perm], b[perm], ids[perm]

    fast = stats.bootstrap_agreement_kappa(a, b, ids, n_boot=300, seed=seed)
    generic_agreement = stats.bootstrap_replicates(stats.percent_agreement, ids, a, b, n_boot=300, seed=seed)
    generic_kappa = stats.bootstrap_replicates(stats.cohen_kappa, ids, a, b, n_boot=300, seed=seed)

    np.testing.assert_allclose(fast.agreement_replicates, generic_agreement, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.kappa_replicates, generic_kappa, rtol=0, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(fast.kappa_ci, stats.percentile_interval(generic_kappa), atol=1e-12)
    assert (fast.agreement, fast.kappa) == (pytest.approx(stats.percent_agreement(a, b)), pytest.approx(stats.cohen_kappa(a, b)))


@pytest.mark.parametrize(("seed", "n_items", "missing"), [(0, 12, 0.0), (1, 400, 0.2), (2, 2000, 0.45)])
def test_fast_alpha_ac1_bootstrap_equals_generic_path(seed: int, n_items: int, missing: float) -> None:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_items)
    labels = np.where(rng.random((n_items, 3)) < 0.8, truth[:, None], 1 - truth[:, None]).astype(np.int8)
    labels[rng.random(labels.shape) < missing] = -1  # units with one label or none are not pairable
    ids = np.array([f"dialogue-{c}" for c in rng.integers(0, max(2, n_items // 6), n_items)])
    alphas: list[float] = []
    ac1s: list[float] = []

    def both(rows: np.ndarray) -> float:
        alphas.append(stats.krippendorff_alpha_nominal(rows))
        ac1s.append(stats.gwet_ac1(rows, 2))
        return 0.0

    stats.bootstrap_replicates(both, ids, labels, n_boot=250, seed=seed)
    fast = stats.bootstrap_alpha_ac1(labels, ids, n_boot=250, seed=seed)

    np.testing.assert_allclose(fast.alpha_replicates, alphas, rtol=0, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(fast.ac1_replicates, ac1s, rtol=0, atol=1e-12, equal_nan=True)


def test_fast_alpha_ac1_bootstrap_is_undefined_where_the_statistics_are() -> None:
    # Every label a hit: alpha has no expected disagreement (nan), AC1 is 1 (p_e = 0).
    everyone_hits = np.ones((30, 3), np.int8)
    reps = stats.bootstrap_alpha_ac1(everyone_hits, np.arange(30) // 3, n_boot=50, seed=1)
    assert np.isnan(reps.alpha_replicates).all()
    np.testing.assert_allclose(reps.ac1_replicates, 1.0)
    # One label per unit: nothing is pairable, both undefined; no unit at all: all nan too.
    lonely = np.array([[1, -1, -1], [0, -1, -1]], np.int8)
    assert np.isnan(stats.bootstrap_alpha_ac1(lonely, [0, 1], n_boot=20).ac1_replicates).all()
    assert np.isnan(stats.bootstrap_alpha_ac1(np.zeros((0, 3), np.int8), [], n_boot=20).alpha_replicates).all()
    with pytest.raises(ValueError, match="0/1 labels"):
        stats.bootstrap_alpha_ac1(np.full((3, 3), 2), [0, 1, 2], n_boot=5)


def test_fast_bootstrap_drops_missing_pairs_like_the_generic_path() -> None:
    a, b, clusters = clustered_pair(8, 50, 6, 0.7)
    b_holes = np.where(np.arange(b.size) % 5 == 0, -1, b)

    fast = stats.bootstrap_agreement_kappa(a, b_holes, clusters, n_boot=200, seed=4)
    generic = stats.bootstrap_replicates(stats.cohen_kappa, clusters, a, b_holes, n_boot=200, seed=4)

    np.testing.assert_allclose(fast.kappa_replicates, generic, atol=1e-12, equal_nan=True)


def test_bootstrap_ignores_nan_replicates() -> None:
    # Kappa is nan in replicates that draw only the all-hit clusters.
    a = np.array([1, 1, 1, 1, 0, 1])
    b = np.array([1, 1, 1, 1, 0, 0])
    clusters = np.array([0, 0, 1, 1, 2, 2])

    fast = stats.bootstrap_agreement_kappa(a, b, clusters, n_boot=500, seed=5)

    assert np.isnan(fast.kappa_replicates).any() and np.isfinite(fast.kappa_ci).all()


def test_bootstrap_all_nan_gives_nan_interval() -> None:
    ones = np.ones(10, dtype=int)

    interval = stats.bootstrap_ci(stats.cohen_kappa, np.arange(10) // 2, ones, ones, n_boot=50)

    assert all(math.isnan(v) for v in interval)


def test_bootstrap_empty_input_gives_nan_interval() -> None:
    empty = np.zeros(0, dtype=int)

    generic = stats.bootstrap_ci(stats.percent_agreement, empty, empty, empty, n_boot=20)
    fast = stats.bootstrap_agreement_kappa(empty, empty, empty, n_boot=20)

    assert all(math.isnan(v) for v in (*generic, *fast.agreement_ci, *fast.kappa_ci))


def test_bootstrap_resamples_label_matrices_row_wise() -> None:
    labels = panel(6, 300, 3, 2, p_missing=0.1)
    clusters = np.arange(300) // 6
    point = stats.krippendorff_alpha_nominal(labels)

    low, high = stats.bootstrap_ci(stats.krippendorff_alpha_nominal, clusters, labels, n_boot=200, seed=6)

    assert low < point < high


# ---------------------------------------------------------------------- timing


def timed(fn: object) -> float:
    """Seconds taken by one call of fn."""
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def test_timing_at_production_scale(capsys: pytest.CaptureFixture[str]) -> None:
    # ~400,000 label units; prints durations only, no timing assertion.
    n = 400_000
    labels = panel(42, n, 3, 2, p_missing=0.02)
    judge = panel(43, n, 1, 2)[:, 0]
    clusters = np.arange(n) // 40
    maj = stats.majority(labels).majority
    jobs = {
        "majority": lambda: stats.majority(labels),
        "cohen": lambda: stats.cohen_kappa(judge, maj),
        "fleiss": lambda: stats.fleiss_kappa(stats.ratings_to_counts(np.where(labels < 0, 0, labels))),
        "alpha": lambda: stats.krippendorff_alpha_nominal(labels),
        "ac1": lambda: stats.gwet_ac1(labels),
        "leave_one_out": lambda: stats.leave_one_out_agreement(labels),
        "alt_test": lambda: stats.alternative_annotator_test(judge, labels),
        "fast_bootstrap_1000": lambda: stats.bootstrap_agreement_kappa(judge, maj, clusters, n_boot=1000),
    }

    timings = {name: round(timed(job), 3) for name, job in jobs.items()}

    with capsys.disabled():
        print("\nagreement timings at 400k units (s):", timings)
    assert set(timings) == set(jobs)


# ------------------------------------------------------------- drift calibration


def test_normal_upper_quantile_matches_scipy() -> None:
    for tail in (0.5, 0.025, 0.05 / 12, 1e-6):
        assert abs(normal_upper_quantile(tail) - scipy_stats.norm.isf(tail)) < 1e-9


def test_normal_upper_quantile_refuses_a_tail_outside_zero_one() -> None:
    with pytest.raises(ValueError):
        normal_upper_quantile(0.0)


def test_the_calibrated_limit_is_never_closer_to_the_baseline_than_the_margin() -> None:
    # A perfect baseline: the arcsine limit sin(pi/2 - 2.2414 * sqrt(1/400 + 1/800))^2 = 0.981
    # would sit closer than the margin, so the margin (0.9) is the limit.
    values = np.r_[np.ones(200), np.ones(50), np.zeros(50)]
    calibrated = stats.rolling_drift(values, None, window=100, baseline_n=200, margin=0.10, alpha=0.05)
    assert calibrated.limit == 0.9
    assert calibrated.alert_positions[0] == 260  # rolling 89/100 first at the 261st item


def test_the_calibrated_limit_widens_with_the_looks_and_the_noise() -> None:
    # Baseline 0.8 over 200 items; one look: z(0.05/4) = 2.2414, limit
    # sin(asin(sqrt(0.8)) - 2.2414 * sqrt(1/400 + 1/800))^2 = 0.6713; five looks: z(0.05/20) = 2.8070.
    base = np.r_[np.ones(160), np.zeros(40)]
    one = stats.rolling_drift(np.r_[base, np.ones(100)], None, window=100, baseline_n=200, margin=0.10,
                              alpha=0.05)
    five = stats.rolling_drift(np.r_[base, np.ones(500)], None, window=100, baseline_n=200, margin=0.10,
                               alpha=0.05)
    expected_one = math.sin(math.asin(math.sqrt(0.8)) - scipy_stats.norm.isf(0.05 / 4) * math.sqrt(3 / 800)) ** 2
    expected_five = math.sin(math.asin(math.sqrt(0.8)) - scipy_stats.norm.isf(0.05 / 20) * math.sqrt(3 / 800)) ** 2
    assert one.limit == pytest.approx(expected_one, abs=1e-9)
    assert five.limit == pytest.approx(expected_five, abs=1e-9)
    assert five.limit < one.limit < 0.7


def test_stable_experts_are_flagged_under_five_percent_of_the_time_on_a_fixed_seed() -> None:
    result = drift_simulate(experts=1500, seed=7)
    assert result["false_flag_share"] < 0.05


def test_the_plain_margin_rule_flags_stable_experts_too_often() -> None:
    # The reason for the calibration: the same simulation breaks the 5% bound without alpha.
    result = drift_simulate(experts=1500, seed=7, alpha=None)
    assert result["false_flag_share"] > 0.10


def test_a_planted_fifteen_point_drop_is_caught() -> None:
    result = drift_simulate(experts=1500, seed=7)
    assert result["detection_rate"] > 0.90



# ------------------------------------------------------------ thin-slice intervals


def test_student_t_quantile_matches_scipy() -> None:
    for df in (1, 2, 3, 4, 10, 17, 29, 295):
        assert abs(stats.student_t_upper_quantile(0.025, df) - scipy_stats.t.isf(0.025, df)) < 1e-4
    for df in (5, 6, 9):
        assert abs(stats.student_t_upper_quantile(0.025, df) - scipy_stats.t.isf(0.025, df)) < 1e-3
    assert abs(stats.student_t_upper_quantile(0.005, 8) - scipy_stats.t.isf(0.005, 8)) < 0.01


def test_cluster_wilson_on_single_item_clusters_is_wilson_at_the_robust_size() -> None:
    # One item per cluster: the robust variance is k/(k-1) p(1-p)/n, so the interval is
    # Wilson's at n (k-1)/k with the t quantile on k-1 degrees of freedom.
    outcomes = np.r_[np.ones(14), np.zeros(6)]
    low, high = stats.cluster_wilson_interval(outcomes, np.ones(20))
    t = scipy_stats.t.isf(0.025, 19)
    ref = proportion_confint(14 * 19 / 20, 20 * 19 / 20, alpha=2 * scipy_stats.norm.sf(t), method="wilson")
    assert low == pytest.approx(ref[0], abs=1e-6) and high == pytest.approx(ref[1], abs=1e-6)


def test_cluster_wilson_widens_when_dialogues_disagree_among_themselves() -> None:
    # Same 60 of 100 agreements: spread evenly over dialogues, or all in some dialogues.
    even = stats.cluster_wilson_interval(np.full(10, 6), np.full(10, 10))
    lumped = stats.cluster_wilson_interval(np.r_[np.full(6, 10), np.zeros(4)], np.full(10, 10))
    assert (lumped[1] - lumped[0]) > 2 * (even[1] - even[0])


def test_cluster_wilson_does_not_collapse_at_perfect_agreement() -> None:
    low, high = stats.cluster_wilson_interval(np.full(5, 4), np.full(5, 4))
    assert high == 1.0 and 0.7 < low < 1.0


def test_cluster_wilson_degenerate_inputs() -> None:
    assert all(math.isnan(v) for v in stats.cluster_wilson_interval([], []))
    assert stats.cluster_wilson_interval([3], [5]) == (0.0, 1.0)
    assert stats.cluster_wilson_interval([3, 0], [5, 0]) == (0.0, 1.0)  # an empty cluster is no cluster
    with pytest.raises(ValueError):
        stats.cluster_wilson_interval([1, 2], [3])


def test_thin_slice_interval_covers_near_ninety_five_percent_at_eighteen_dialogues() -> None:
    result = interval_coverage(dialogues=18, sims=500, n_boot=300, seed=11)
    assert 0.925 <= result["cluster_wilson"]["coverage"] <= 0.975
    # And the reason for it: the bootstrap percentile interval falls short there.
    assert result["bootstrap"]["coverage"] < result["cluster_wilson"]["coverage"]


def test_wide_slice_bootstrap_covers_near_ninety_five_percent_at_296_dialogues() -> None:
    result = interval_coverage(dialogues=296, sims=300, n_boot=300, seed=11)
    assert 0.925 <= result["bootstrap"]["coverage"] <= 0.975


def _jackknife_kappa_by_hand(judge: np.ndarray, human: np.ndarray, clusters: np.ndarray,
                             alpha: float = 0.05) -> tuple[float, float]:
    """Delete-one-cluster jackknife of sklearn's kappa, with scipy's t quantile: an independent route."""
    ids = np.unique(clusters)
    k = ids.size
    point = cohen_kappa_score(judge, human)
    leave_out = np.array([cohen_kappa_score(judge[clusters != c], human[clusters != c]) for c in ids])
    se = math.sqrt((k - 1) / k * ((leave_out - leave_out.mean()) ** 2).sum())
    t = scipy_stats.t.ppf(1 - alpha / 2, k - 1)
    return max(-1.0, point - t * se), min(1.0, point + t * se)


def _cells(judge: np.ndarray, human: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    ids = np.unique(clusters)
    return np.array([[((judge == a) & (human == b) & (clusters == c)).sum() for a, b in ((0, 0), (0, 1), (1, 0), (1, 1))]
                     for c in ids])


def test_cluster_jackknife_kappa_matches_a_hand_computation_with_sklearn_and_scipy() -> None:
    rng = np.random.default_rng(7)
    clusters = np.repeat(np.arange(18), rng.integers(3, 12, size=18))
    human = rng.integers(0, 2, size=clusters.size)
    judge = np.where(rng.random(clusters.size) < 0.8, human, 1 - human)

    got = stats.cluster_jackknife_kappa_interval(_cells(judge, human, clusters))

    want = _jackknife_kappa_by_hand(judge, human, clusters)
    # The t quantile is the Cornish-Fisher one (within 1e-3 at 17 df); the rest is exact.
    np.testing.assert_allclose(got, want, atol=2e-3)
    assert got[0] < cohen_kappa_score(judge, human) < got[1]


def test_cluster_jackknife_kappa_is_wider_than_the_bootstrap_on_few_dialogues() -> None:
    rng = np.random.default_rng(11)
    clusters = np.repeat(np.arange(18), 8)
    human = rng.integers(0, 2, size=clusters.size)
    judge = np.where(rng.random(clusters.size) < 0.8, human, 1 - human)

    jack = stats.cluster_jackknife_kappa_interval(_cells(judge, human, clusters))
    boot = stats.bootstrap_agreement_kappa(judge, human, clusters, n_boot=2000, seed=0).kappa_ci

    assert jack[1] - jack[0] > boot[1] - boot[0]


def test_cluster_jackknife_kappa_degenerate_inputs() -> None:
    one_class = np.array([[5, 0, 0, 0], [3, 0, 0, 0]])
    one_cluster = np.array([[2, 1, 1, 2]])
    # Dropping the only dialogue holding hits leaves one class: no interval, rather than one
    # resting on what remains.
    fragile = np.array([[4, 0, 0, 0], [3, 0, 0, 0], [0, 1, 1, 2]])

    for cells in (one_class, one_cluster, fragile, np.zeros((0, 4))):
        assert all(math.isnan(v) for v in stats.cluster_jackknife_kappa_interval(cells))
    with pytest.raises(ValueError):
        stats.cluster_jackknife_kappa_interval(np.zeros((3, 3)))
