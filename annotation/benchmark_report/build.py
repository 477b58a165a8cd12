"""The benchmark quality report's figures, from one project's label material; no Django import here.

Which units count is the leaderboard's rule (``annotation.agreement.sections``): a task
counts when every one of its units has the full panel and, when a judge run is reported,
the judge labelled all of them, so both sides score the same tasks; a tied or ambiguous
item scores for neither side. Scores come from ``scoring.score_model``; the statistics
from :mod:`annotation.agreement.benchmark`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from annotation.agreement.benchmark import (
    HISTOGRAM_EDGES,
    N_BOOT,
    RANK_TOLERANCE,
    SideFigures,
    bootstrap_sides,
    constant_items,
    layer_scores,
    score_distribution,
)
from annotation.agreement.material import Material, derive, interval, num
from annotation.agreement.scoring import score_model

SCHEMA = 1
# Items listed per kind (all hit, all missed) and side; the counts cover every item.
ITEMS_LISTED = 200


def _usable_units(m: Material) -> tuple[NDArray[np.bool_], bool]:
    d = derive(m)
    with_judge = m.judge is not None and bool((m.judge >= 0).any())
    unusable = ~d["complete"]
    if with_judge:
        unusable = unusable | (m.judge < 0)  # type: ignore[operator]
    bad_task = np.bincount(m.unit_task[unusable], minlength=m.task_id.size) > 0
    return ~bad_task[m.unit_task] & ~d["left_out"], with_judge


def benchmark_sections(m: Material, *, n_boot: int = N_BOOT, seed: int = 0, alpha: float = 0.05) -> dict[str, Any]:
    """Every figure of the report for the material (its judge vector set when a run is reported)."""
    d = derive(m)
    use, with_judge = _usable_units(m)
    gate = next((i for i, dim in enumerate(m.dims) if dim.is_gate), None)
    n_q, n_d = len(m.question_ext), len(m.dims)
    model_ids = [i for i in range(len(m.models)) if (use & (d["unit_model"] == i)).any()]
    base: dict[str, Any] = {"models": [m.models[i] for i in model_ids], "judge": with_judge,
                            # Which expert labels the human side read: "first" or "revised" (annotation.reveal).
                            "labels_used": m.labels_used,
                            "basis": "intersection" if with_judge else "complete",
                            "params": {"n_boot": n_boot, "seed": seed, "alpha": alpha, "cluster": "question",
                                       "rank_tolerance": RANK_TOLERANCE, "ci": "percentile"}}
    if not model_ids:
        return {**base, "n_questions": 0, "n_tasks": 0, "sides": {"human": None, "judge": None}}

    values = {"human": d["majority"].astype(np.int8)}
    if with_judge:
        values["judge"] = m.judge.astype(np.int8)  # type: ignore[union-attr]
    norms: dict[str, list[NDArray[np.float64]]] = {k: [] for k in values}
    qscores: dict[str, list[NDArray[np.float64]]] = {k: [] for k in values}
    abilities: dict[str, list[NDArray[np.float64]]] = {k: [] for k in values}
    present = np.zeros((len(model_ids), n_q), bool)
    n_tasks = 0
    for k, i in enumerate(model_ids):
        u = np.flatnonzero(use & (d["unit_model"] == i))
        q, dim, score = d["unit_question"][u], d["unit_dim"][u], m.item_score[m.unit_item[u]]
        present[k, q] = True
        n_tasks += int(np.unique(m.unit_task[u]).size)
        for side, hits in values.items():
            scored = score_model(q, dim, score, hits[u], n_questions=n_q, n_dims=n_d, gate_dim=gate)
            norms[side].append(scored.dim_norms)
            qscores[side].append(scored.question_scores)
            abilities[side].append(scored.ability_scores)

    stacks = {side: np.stack(v) for side, v in norms.items()}
    keep_q = present.any(axis=0)
    keep_d = ~np.all(np.isnan(stacks["human"]), axis=(0, 1))
    trimmed = [stacks[side][:, keep_q][:, :, keep_d] for side in values]
    figures = dict(zip(values, bootstrap_sides(trimmed, n_boot=n_boot, seed=seed, alpha=alpha)))
    layer_of = m.question_difficulty[keep_q]
    item_hits = _item_hits(m, use, values, model_ids, gate)

    sides: dict[str, Any] = {"human": None, "judge": None}
    for side in values:
        layers = layer_scores(trimmed[list(values).index(side)], layer_of, len(m.difficulties))
        dist = score_distribution(np.stack(qscores[side]), present)
        sides[side] = {
            **_side_payload(figures[side]),
            "distribution": {"n": dist.n.tolist(), "mean": [num(x, 2) for x in dist.mean],
                             "quantiles": [[num(x, 2) for x in row] for row in dist.quantiles],
                             "histogram": dist.histogram.tolist(), "edges": list(HISTOGRAM_EDGES)},
            "layers": {"names": list(m.difficulties),
                       "questions": [int((layer_of == x).sum()) for x in range(len(m.difficulties))],
                       "scores": [[num(x, 2) for x in row] for row in layers]},
            "abilities": {m.dims[x].code: [num(a[x], 2) for a in abilities[side]]
                          for x in range(n_d) if x != gate and any(np.isfinite(a[x]) for a in abilities[side])},
            "constant": _constant_payload(m, item_hits[side]),
        }
    return {**base, "n_questions": int(keep_q.sum()), "n_tasks": n_tasks, "sides": sides}


def _side_payload(f: SideFigures) -> dict[str, Any]:
    return {
        "overall": [num(x, 2) for x in f.overall],
        "overall_ci": [interval(tuple(row), 2) for row in f.overall_ci],
        "order": f.order.tolist(),
        "rank": f.rank.tolist(),
        "order_keep_share": num(f.order_keep_share, 4),
        "gaps": [{"upper": int(f.order[k]), "lower": int(f.order[k + 1]), "gap": num(f.gap[k], 2),
                  "ci": interval(tuple(f.gap_ci[k]), 2), "significant": bool(f.gap_significant[k])}
                 for k in range(f.gap.size)],
        "rank_keep_share": [num(x, 4) for x in f.rank_keep_share],
        "rank_near_share": [num(x, 4) for x in f.rank_near_share],
        "n_boot": f.n_boot,
    }


def _item_hits(m: Material, use: NDArray[np.bool_], values: dict[str, NDArray[np.int8]], model_ids: list[int],
               gate: int | None) -> dict[str, NDArray[np.int8]]:
    """Per side, (n_models, n_items): each model's verdict on each rubric item, -1 where it has none.

    The gate items are not scored, so they are never listed.
    """
    d = derive(m)
    column = {i: k for k, i in enumerate(model_ids)}
    lookup = np.full(len(m.models), -1, np.int64)
    for i, k in column.items():
        lookup[i] = k
    u = np.flatnonzero(use & (lookup[d["unit_model"]] >= 0))
    if gate is not None:
        u = u[m.item_dim[m.unit_item[u]] != gate]
    out = {}
    for side, v in values.items():
        hits = np.full((len(model_ids), m.item_id.size), -1, np.int8)
        hits[lookup[d["unit_model"][u]], m.unit_item[u]] = v[u]
        out[side] = hits
    return out


def _constant_payload(m: Material, hits: NDArray[np.int8]) -> dict[str, Any]:
    all_hit, all_miss = constant_items(hits)
    judged = int(np.all(hits >= 0, axis=0).sum()) if hits.shape[0] >= 2 else 0

    def rows(mask: NDArray[np.bool_]) -> list[dict[str, Any]]:
        picked = np.flatnonzero(mask)[:ITEMS_LISTED]
        return [{"rubric_item_id": int(m.item_id[x]), "position": int(m.item_position[x]),
                 "dimension": m.dims[int(m.item_dim[x])].code, "score": num(m.item_score[x], 0)}
                for x in picked]

    return {"items_compared": judged, "all_hit": int(all_hit.sum()), "all_miss": int(all_miss.sum()),
            "all_hit_items": rows(all_hit), "all_miss_items": rows(all_miss)}
