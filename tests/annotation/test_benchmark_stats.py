"""The benchmark statistics (annotation/agreement/benchmark.py) against references worked by hand."""
import numpy as np
import pytest

from annotation.agreement.benchmark import (
    Thresholds,
    bootstrap_sides,
    constant_items,
    gates_evaluate,
    layer_scores,
    score_distribution,
)
from annotation.agreement.scoring import overall_from_norms
from annotation.agreement.stats import cluster_weights

# Two models, two questions, one dimension. Model A scores 100 then 0, model B 60 then 20:
# on the full data A = 50, B = 40. With two questions a replicate draws (q0, q0), (q0, q1)
# or (q1, q1); A - B is then 40, 10 or -20, and only (q1, q1) turns the order round.
TWO = np.array([[[100.0], [0.0]], [[60.0], [20.0]]])


def replicate_weights(n_questions: int, n_boot: int, seed: int) -> np.ndarray:
    return np.concatenate(list(cluster_weights(n_questions, n_boot, seed)))


def test_the_order_is_kept_unless_a_replicate_draws_only_the_second_question():
    weights = replicate_weights(2, 1000, 7)
    only_q1 = int((weights[:, 1] == 2).sum())

    (side,) = bootstrap_sides([TWO], n_boot=1000, seed=7)

    assert side.overall.tolist() == [50.0, 40.0]
    assert side.order.tolist() == [0, 1] and side.rank.tolist() == [1, 2]
    assert side.order_keep_share == pytest.approx(1 - only_q1 / 1000)
    assert 200 < only_q1 < 300  # about a quarter of the draws
    assert side.rank_keep_share.tolist() == pytest.approx([1 - only_q1 / 1000] * 2)
    # Two models are never more than one place off.
    assert side.rank_near_share.tolist() == [1.0, 1.0]


def test_the_gap_interval_is_the_percentile_interval_of_the_replicate_gaps():
    weights = replicate_weights(2, 1000, 7)
    gaps = np.select([weights[:, 0] == 2, weights[:, 0] == 1], [40.0, 10.0], -20.0)

    (side,) = bootstrap_sides([TWO], n_boot=1000, seed=7)

    assert side.gap.tolist() == [10.0]
    assert side.gap_ci[0].tolist() == pytest.approx(np.percentile(gaps, [2.5, 97.5]).tolist())
    assert side.gap_ci[0].tolist() == pytest.approx([-20.0, 40.0])
    # A quarter of the replicates put B first: the interval holds 0, the gap is not significant.
    assert side.gap_significant.tolist() == [False]
    assert side.overall_ci[0].tolist() == pytest.approx([0.0, 100.0])


def test_a_clear_lead_on_every_question_is_significant_and_always_kept():
    norms = np.array([[[90.0], [80.0], [70.0]], [[40.0], [30.0], [20.0]], [[10.0], [5.0], [0.0]]])

    (side,) = bootstrap_sides([norms], n_boot=1000, seed=1)

    assert side.order.tolist() == [0, 1, 2]
    assert side.order_keep_share == 1.0
    assert side.gap.tolist() == pytest.approx([50.0, 25.0])
    assert side.gap_significant.tolist() == [True, True]
    # A leads B by 50 on every question, so by 50 on any draw of them; B leads C by 20 to 30.
    assert side.gap_ci[0].tolist() == pytest.approx([50.0, 50.0])
    assert 20.0 <= side.gap_ci[1][0] <= side.gap_ci[1][1] <= 30.0


def test_the_fast_replicates_equal_the_scoring_modules_weighted_overall():
    rng = np.random.default_rng(3)
    norms = rng.uniform(0, 100, (5, 40, 6))
    norms[rng.random(norms.shape) < 0.4] = np.nan
    judge = np.where(np.isnan(norms), np.nan, np.clip(norms + rng.normal(0, 10, norms.shape), 0, 100))
    weights = replicate_weights(40, 300, 11)
    reference = overall_from_norms(norms, weights)
    reference_judge = overall_from_norms(judge, weights)

    human, judged = bootstrap_sides([norms, judge], n_boot=300, seed=11)

    assert human.overall.tolist() == pytest.approx(overall_from_norms(norms).tolist())
    np.testing.assert_allclose(human.overall_ci, np.percentile(reference, [2.5, 97.5], axis=0).T)
    np.testing.assert_allclose(judged.overall_ci, np.percentile(reference_judge, [2.5, 97.5], axis=0).T)


def test_the_same_seed_gives_the_same_figures_and_another_seed_others():
    rng = np.random.default_rng(5)
    norms = rng.uniform(0, 100, (6, 30, 4))

    first = bootstrap_sides([norms, norms * 0.8], n_boot=1000, seed=42)
    again = bootstrap_sides([norms, norms * 0.8], n_boot=1000, seed=42)
    other = bootstrap_sides([norms, norms * 0.8], n_boot=1000, seed=43)

    for a, b in zip(first, again):
        for x, y in zip(a, b):
            assert np.array_equal(np.asarray(x), np.asarray(y))
    assert not np.array_equal(first[0].overall_ci, other[0].overall_ci)


def test_layer_scores_use_only_each_layers_questions():
    # Model 0: normal questions 80 and 60, hard 20; model 1: 50, 50, 50.
    norms = np.array([[[80.0], [60.0], [20.0]], [[50.0], [50.0], [50.0]]])

    scores = layer_scores(norms, [0, 0, 1], 2)

    assert scores.tolist() == [[70.0, 50.0], [20.0, 50.0]]


def test_a_layer_without_questions_scores_nan():
    scores = layer_scores(np.array([[[80.0], [60.0]]]), [0, 0], 2)

    assert scores[0].tolist() == [70.0] and np.isnan(scores[1, 0])


def test_the_score_distribution_is_the_five_number_summary_and_a_ten_point_histogram():
    scores = np.array([[0.0, 10.0, 20.0, 30.0, 100.0], [50.0, 50.0, 0.0, 0.0, 0.0]])
    present = np.array([[True] * 5, [True, True, False, False, False]])

    dist = score_distribution(scores, present)

    assert dist.n.tolist() == [5, 2]
    assert dist.mean.tolist() == [32.0, 50.0]
    assert dist.quantiles[0].tolist() == [0.0, 10.0, 20.0, 30.0, 100.0]
    assert dist.quantiles[1].tolist() == [50.0] * 5
    assert dist.histogram[0].tolist() == [1, 1, 1, 1, 0, 0, 0, 0, 0, 1]
    assert dist.histogram[1].tolist() == [0, 0, 0, 0, 0, 2, 0, 0, 0, 0]


def test_constant_items_need_a_verdict_from_every_model():
    hits = np.array([[1, 0, 1, 1, -1], [1, 0, 0, 1, 1], [1, 0, 1, 1, 1]])

    all_hit, all_miss = constant_items(hits)

    assert all_hit.tolist() == [True, False, False, True, False]
    assert all_miss.tolist() == [False, True, False, False, False]


def test_one_model_has_no_constant_items():
    all_hit, all_miss = constant_items(np.array([[1, 0]]))

    assert not all_hit.any() and not all_miss.any()


def test_the_five_gates_on_figures_worked_by_hand():
    gates = gates_evaluate(overall=[72.0, 60.0, 58.5], order_keep_share=0.95, gap_significant=[True, False],
                           rank_near_share=[1.0, 0.97, 0.94], thresholds=Thresholds())

    assert [(g.key, g.value, g.passed) for g in gates] == [
        ("spread", 13.5, True),
        ("separation", 0.95, True),
        ("gaps", 0.5, False),
        ("saturation", 72.0, True),
        ("stability", 0.94, False),
    ]


def test_the_gates_follow_the_bars():
    bars = Thresholds(spread_min=20, separation_min=0.5, gaps_significant_min=0.5, saturation_max=70,
                      rank_stability_min=0.9)

    gates = gates_evaluate(overall=[72.0, 60.0, 58.5], order_keep_share=0.49, gap_significant=[True, False],
                           rank_near_share=[1.0, 0.97, 0.94], thresholds=bars)

    assert [g.passed for g in gates] == [False, False, True, False, True]
    assert [g.threshold for g in gates] == [20, 0.5, 0.5, 70, 0.9]


def test_with_one_model_no_gate_can_be_told():
    gates = gates_evaluate(overall=[72.0], order_keep_share=1.0, gap_significant=[], rank_near_share=[1.0],
                           thresholds=Thresholds())

    assert [g.passed for g in gates] == [None] * 5


def test_sides_of_different_shapes_are_refused():
    with pytest.raises(ValueError, match="one shape"):
        bootstrap_sides([np.zeros((2, 3, 1)), np.zeros((2, 4, 1))])
