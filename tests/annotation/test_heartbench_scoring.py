"""Tests for annotation.agreement.scoring (HeartBench scores), no Django needed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau

from annotation.agreement import scoring, stats

HEARTBENCH = Path("/work/shared/heartbench/question_all.jsonl")
GATE = "其他"


@pytest.fixture(scope="module")
def questions() -> list[dict]:
    with HEARTBENCH.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def flat(questions: list[dict]) -> scoring.FlatRubric:
    return scoring.flatten_rubrics(questions)


# --------------------------------------------------- plain reference (from the formula)


def reference_question(rubric: list[dict], detail: list[int], gate_zeroes: bool) -> dict[str, float]:
    """Per-dimension norms of one question, written as a plain loop from the formula."""
    low: dict[str, float] = {}
    high: dict[str, float] = {}
    raw: dict[str, float] = {}
    gate_hit = False
    for item, hit in zip(rubric, detail):
        dim = item["dimension"]
        score = 0.0 if item["score"] is None else float(item["score"])
        if dim == GATE:
            gate_hit = gate_hit or bool(hit and (gate_zeroes or score > 0))
            continue
        low[dim] = low.get(dim, 0.0) + min(score, 0.0)
        high[dim] = high.get(dim, 0.0) + max(score, 0.0)
        raw[dim] = raw.get(dim, 0.0) + (score if hit else 0.0)
    norms = {}
    for dim in low:
        span = high[dim] - low[dim]
        base = max(raw[dim] - low[dim] + 1.0, 1.0)
        norms[dim] = 0.0 if (gate_hit or span <= 0) else 100.0 * math.log(base) / math.log(span + 1.0)
    return norms


def reference_model(questions: list[dict], details: list[list[int]], gate_zeroes: bool) -> tuple[list[float], dict[str, float], float]:
    """Question scores, ability scores and overall score, plainly."""
    per_question = [reference_question(q["rubric"], d, gate_zeroes) for q, d in zip(questions, details)]
    question_scores = [sum(n.values()) / len(n) if n else 0.0 for n in per_question]
    by_ability: dict[str, list[float]] = {}
    for norms in per_question:
        for dim, value in norms.items():
            by_ability.setdefault(dim, []).append(value)
    abilities = {dim: sum(v) / len(v) for dim, v in by_ability.items()}
    return question_scores, abilities, sum(abilities.values()) / len(abilities)


def random_details(questions: list[dict], seed: int, p_hit: float) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [list((rng.random(len(q["rubric"])) < p_hit).astype(int)) for q in questions]


def score_flat(flat: scoring.FlatRubric, details: list[list[int]], gate_zeroes: bool = False) -> scoring.ModelScores:
    hits = scoring.hits_from_details(flat, details)
    return scoring.score_model(
        flat.question_idx,
        flat.dim_idx,
        flat.score,
        hits,
        n_questions=len(flat.question_ids),
        n_dims=len(flat.dimensions),
        gate_dim=flat.gate_dim,
        gate_zeroes=gate_zeroes,
    )


# ------------------------------------------------------------------ real data


def test_public_data_has_fifteen_abilities_and_a_gate(flat: scoring.FlatRubric) -> None:
    abilities = [d for d in flat.dimensions if d != GATE]

    assert (len(flat.question_ids), len(abilities), flat.dimensions[flat.gate_dim]) == (296, 15, GATE)


@pytest.mark.parametrize(("seed", "p_hit", "gate_zeroes"), [(0, 0.5, False), (1, 0.2, False), (2, 0.8, True), (3, 0.5, True)])
def test_score_model_matches_plain_reference_on_heartbench(
    questions: list[dict], flat: scoring.FlatRubric, seed: int, p_hit: float, gate_zeroes: bool
) -> None:
    details = random_details(questions, seed, p_hit)
    ref_questions, ref_abilities, ref_overall = reference_model(questions, details, gate_zeroes)

    result = score_flat(flat, details, gate_zeroes)

    ours_abilities = dict(zip(flat.dimensions, result.ability_scores))
    gate_ability = ours_abilities.pop(GATE)
    assert math.isnan(gate_ability)
    np.testing.assert_allclose(result.question_scores, ref_questions, rtol=1e-12, atol=1e-9)
    assert ours_abilities == pytest.approx(ref_abilities, rel=1e-12)
    assert result.overall == pytest.approx(ref_overall, rel=1e-12)


def test_gate_zeroing_changes_scores_only_when_enabled(questions: list[dict], flat: scoring.FlatRubric) -> None:
    details = random_details(questions, 5, 0.6)

    parity = score_flat(flat, details, gate_zeroes=False)
    strict = score_flat(flat, details, gate_zeroes=True)

    gate_hit_expected = np.array([any(h and it["dimension"] == GATE for it, h in zip(q["rubric"], d)) for q, d in zip(questions, details)])
    assert not parity.gate_hit.any()
    np.testing.assert_array_equal(strict.gate_hit, gate_hit_expected)
    np.testing.assert_array_equal(strict.question_scores[gate_hit_expected], 0.0)
    np.testing.assert_array_equal(strict.question_scores[~gate_hit_expected], parity.question_scores[~gate_hit_expected])


def test_gate_inferred_from_nan_scores_equals_named_gate(questions: list[dict], flat: scoring.FlatRubric) -> None:
    # The public gate dimension also holds one item scored -4; inference by nan still
    # finds the whole dimension.
    hits = scoring.hits_from_details(flat, random_details(questions, 6, 0.5))

    named = scoring.score_model(flat.question_idx, flat.dim_idx, flat.score, hits, gate_dim=flat.gate_dim)
    inferred = scoring.score_model(flat.question_idx, flat.dim_idx, flat.score, hits)

    np.testing.assert_array_equal(named.question_scores, inferred.question_scores)
    assert named.overall == inferred.overall


def test_overall_from_norms_reproduces_score_model(questions: list[dict], flat: scoring.FlatRubric) -> None:
    result = score_flat(flat, random_details(questions, 7, 0.4))

    overall = scoring.overall_from_norms(result.dim_norms)

    assert float(overall) == pytest.approx(result.overall, rel=1e-12)


def test_overall_from_norms_weights_are_question_multiplicities(questions: list[dict], flat: scoring.FlatRubric) -> None:
    result = score_flat(flat, random_details(questions, 8, 0.5))
    weights = np.zeros(len(questions), dtype=int)
    weights[:10] = 2
    weights[10:30] = 1
    repeated = np.repeat(result.dim_norms, weights, axis=0)

    overall = scoring.overall_from_norms(result.dim_norms, weights)

    assert float(overall) == pytest.approx(float(scoring.overall_from_norms(repeated)), rel=1e-12)


# ------------------------------------------------------------- hand-worked example


def hand_example() -> tuple[np.ndarray, ...]:
    # One question, dimensions 0 = A, 1 = B, 2 = gate.
    #   A: +3 (hit), +2 (miss), -1 (hit)     B: -2 (miss)      gate: null (hit)
    # A: raw = 3 - 1 = 2, min = -1, max = 5, span = 6
    #    norm = 100 ln(2 + 1 + 1) / ln(6 + 1) = 100 ln 4 / ln 7 = 71.2414...
    # B: only a penalty: min = -2, max = 0, span = 2, raw = 0
    #    norm = 100 ln(0 + 2 + 1) / ln(3) = 100; hit, it would be 100 ln 1 / ln 3 = 0.
    # Question score = (71.2414 + 100) / 2 = 85.6207...
    q = np.zeros(5, dtype=int)
    d = np.array([0, 0, 0, 1, 2])
    s = np.array([3.0, 2.0, -1.0, -2.0, np.nan])
    h = np.array([1, 0, 1, 0, 1])
    return q, d, s, h


def test_hand_example_norms_and_question_score() -> None:
    q, d, s, h = hand_example()
    a_norm = 100 * math.log(4) / math.log(7)

    result = scoring.score_model(q, d, s, h, gate_dim=2)

    np.testing.assert_allclose(result.dim_norms[0, :2], [a_norm, 100.0])
    assert math.isnan(result.dim_norms[0, 2])
    assert result.question_scores[0] == pytest.approx((a_norm + 100.0) / 2)
    assert result.overall == pytest.approx((a_norm + 100.0) / 2)


def test_hand_example_penalty_only_dimension_drops_to_zero_when_hit() -> None:
    q, d, s, h = hand_example()
    h = np.array([1, 0, 1, 1, 0])

    result = scoring.score_model(q, d, s, h, gate_dim=2)

    assert result.dim_norms[0, 1] == 0.0


def test_hand_example_gate_hit_zeroes_only_with_flag() -> None:
    q, d, s, h = hand_example()

    parity = scoring.score_model(q, d, s, h, gate_dim=2)
    strict = scoring.score_model(q, d, s, h, gate_dim=2, gate_zeroes=True)

    assert parity.question_scores[0] > 0
    assert (strict.question_scores[0], strict.overall) == (0.0, 0.0)
    np.testing.assert_array_equal(strict.dim_norms[0, :2], [0.0, 0.0])


def test_positive_gate_score_zeroes_even_in_parity_mode() -> None:
    # HeartBench's own rule: a hit gate item with score > 0 zeroes the question.
    q, d, s, h = hand_example()
    s = np.array([3.0, 2.0, -1.0, -2.0, 1.0])

    result = scoring.score_model(q, d, s, h, gate_dim=2)

    assert result.question_scores[0] == 0.0 and bool(result.gate_hit[0])


def test_zero_span_dimension_scores_zero_and_counts_in_the_mean() -> None:
    # Dimension 1 has only a 0-point item: span 0 -> norm 0, still averaged (HeartBench).
    result = scoring.score_model([0, 0], [0, 1], [2.0, 0.0], [1, 1])

    np.testing.assert_allclose(result.dim_norms[0], [100.0, 0.0])
    assert result.question_scores[0] == pytest.approx(50.0)


def test_question_with_only_a_gate_scores_zero() -> None:
    result = scoring.score_model([0, 1], [0, 1], [3.0, np.nan], [1, 0], gate_dim=1)

    assert (result.question_scores[1], result.overall) == (0.0, 100.0)


def test_empty_model_has_nan_overall() -> None:
    empty = np.zeros(0)

    result = scoring.score_model(empty, empty, empty, empty)

    assert result.question_scores.size == 0 and math.isnan(result.overall)


def test_hits_from_details_pads_and_truncates_like_heartbench() -> None:
    rows = [
        {"question_id": "a", "rubric": [{"dimension": "X", "score": 1}] * 3},
        {"question_id": "b", "rubric": [{"dimension": "X", "score": 1}] * 2},
        {"question_id": "c", "rubric": [{"dimension": "X", "score": 1}]},
    ]
    flat = scoring.flatten_rubrics(rows)

    hits = scoring.hits_from_details(flat, [[1], [0, 1, 1, 1], None])

    np.testing.assert_array_equal(hits, [1, 0, 0, 0, 1, 0])


# ---------------------------------------------------------------------- ranking


def test_rank_models_uses_competition_ranking() -> None:
    ranks = scoring.rank_models({"a": 50.0, "b": 70.0, "c": 50.0, "d": 10.0, "e": float("nan")})

    assert ranks == {"b": 1, "a": 2, "c": 2, "d": 4, "e": 5}


@pytest.mark.parametrize(("seed", "n"), [(0, 2), (1, 5), (2, 8), (3, 12)])
def test_kendall_tau_matches_scipy_with_ties(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, n).astype(float)
    y = x + rng.integers(-2, 3, n)

    ours = scoring.kendall_tau(x, y)

    assert ours == pytest.approx(kendalltau(x, y).statistic, nan_ok=True)


def stacked_norms(questions: list[dict], flat: scoring.FlatRubric, rates: list[float], seed: int) -> np.ndarray:
    return np.stack([score_flat(flat, random_details(questions, seed + i, p)).dim_norms for i, p in enumerate(rates)])


def test_rank_stability_identical_sources_agree_perfectly(questions: list[dict], flat: scoring.FlatRubric) -> None:
    norms = stacked_norms(questions, flat, [0.2, 0.4, 0.6, 0.8], seed=10)

    result = scoring.rank_stability_bootstrap(norms, norms, n_boot=200, seed=1)

    assert result.tau == 1.0 and result.tau_ci == (1.0, 1.0)
    np.testing.assert_array_equal(result.human_keep_share, result.judge_keep_share)


def test_rank_stability_well_separated_models_keep_their_ranks(questions: list[dict], flat: scoring.FlatRubric) -> None:
    human = stacked_norms(questions, flat, [0.1, 0.5, 0.9], seed=20)
    judge = stacked_norms(questions, flat, [0.15, 0.55, 0.85], seed=30)

    result = scoring.rank_stability_bootstrap(human, judge, n_boot=300, seed=2)

    np.testing.assert_array_equal(result.human_rank, [3, 2, 1])
    np.testing.assert_array_equal(result.human_keep_share, [1.0, 1.0, 1.0])
    assert result.tau == 1.0


def test_rank_stability_close_models_swap_sometimes(questions: list[dict], flat: scoring.FlatRubric) -> None:
    human = stacked_norms(questions, flat, [0.50, 0.51, 0.9], seed=40)
    judge = stacked_norms(questions, flat, [0.51, 0.50, 0.9], seed=50)

    result = scoring.rank_stability_bootstrap(human, judge, n_boot=300, seed=3)

    assert 0.0 < result.human_keep_share[0] < 1.0
    assert result.human_keep_share[2] == 1.0
    assert result.tau_ci[0] < result.tau_ci[1]


def test_rank_stability_tau_replicates_match_direct_computation(questions: list[dict], flat: scoring.FlatRubric) -> None:
    human = stacked_norms(questions, flat, [0.3, 0.5, 0.52, 0.7], seed=60)
    judge = stacked_norms(questions, flat, [0.35, 0.45, 0.6, 0.65], seed=70)
    weights = next(iter(stats.cluster_weights(len(questions), 1, seed=4)))[0]

    result = scoring.rank_stability_bootstrap(human, judge, n_boot=1, seed=4)

    direct = kendalltau(scoring.overall_from_norms(human, weights), scoring.overall_from_norms(judge, weights)).statistic
    assert result.tau_replicates[0] == pytest.approx(direct)


# ------------------------------------------------------------------ scorer quirks


def test_quirks_of_the_hand_example() -> None:
    q, d, s, h = hand_example()

    quirks = scoring.scorer_quirks(q, d, s, h, gate_dim=2)

    # The null-scored gate item is hit and the score stands; B (only a penalty, missed) scores 100.
    assert quirks == scoring.ScorerQuirks(gate_hits_not_zeroing=1, penalty_only_cells=1, penalty_only_untouched=1)


def test_a_hit_penalty_is_no_free_hundred() -> None:
    q, d, s, _ = hand_example()

    quirks = scoring.scorer_quirks(q, d, s, np.array([1, 0, 1, 1, 0]), gate_dim=2)

    assert quirks == scoring.ScorerQuirks(gate_hits_not_zeroing=0, penalty_only_cells=1, penalty_only_untouched=0)


def test_a_gate_that_zeroes_is_no_quirk() -> None:
    q, d, s, h = hand_example()
    positive_gate = np.array([3.0, 2.0, -1.0, -2.0, 1.0])

    assert scoring.scorer_quirks(q, d, s, h, gate_dim=2, gate_zeroes=True).gate_hits_not_zeroing == 0
    assert scoring.scorer_quirks(q, d, positive_gate, h, gate_dim=2).gate_hits_not_zeroing == 0


def test_quirk_counts_match_a_plain_count_on_heartbench(questions: list[dict], flat: scoring.FlatRubric) -> None:
    details = random_details(questions, seed=5, p_hit=0.2)
    gate_not_zeroing = cells = untouched = 0
    for q, detail in zip(questions, details):
        by_dim: dict[str, list[tuple[float, int]]] = {}
        gate_hit = False
        for item, hit in zip(q["rubric"], detail):
            if item["dimension"] == GATE:
                gate_hit = gate_hit or bool(hit)
                continue
            by_dim.setdefault(item["dimension"], []).append((0.0 if item["score"] is None else item["score"], hit))
        gate_not_zeroing += gate_hit  # parity mode: a gate never zeroes on the public data
        for pairs in by_dim.values():
            if all(score <= 0 for score, _ in pairs) and any(score < 0 for score, _ in pairs):
                cells += 1
                untouched += not any(hit for _, hit in pairs)

    hits = scoring.hits_from_details(flat, details)
    quirks = scoring.scorer_quirks(flat.question_idx, flat.dim_idx, flat.score, hits, gate_dim=flat.gate_dim)

    assert quirks == scoring.ScorerQuirks(gate_not_zeroing, cells, untouched)
    assert quirks.gate_hits_not_zeroing > 0 and quirks.penalty_only_untouched > 0


def test_scorer_quirks_refuses_misaligned_input_and_counts_nothing_on_nothing() -> None:
    with pytest.raises(ValueError):
        scoring.scorer_quirks([0, 0], [0], [1.0, 2.0], [1, 0])
    assert scoring.scorer_quirks([], [], [], []) == scoring.ScorerQuirks(0, 0, 0)
