"""Per-expert consistency: throughput, speed, golden accuracy and peer agreement over time, drift.

Peer agreement is leave-one-out (each label against the strict majority of the other
experts on the same unit); golden accuracy compares labels on golden (control) tasks
with their reference. Both are ordered by submission time per expert, bucketed into a
curve, and checked for drift against the expert's own baseline
(:func:`stats.rolling_drift`). No Django import here.
"""
from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from annotation.agreement import stats
from annotation.agreement.material import Material, Params, day_text, derive, group_bounds, local_days, num


def _series(values: NDArray[np.float64], times: NDArray[np.float64], p: Params) -> dict[str, Any]:
    """One expert's time-ordered 0/1 series: mean, bucketed curve and drift alerts."""
    n = values.size
    out: dict[str, Any] = {"n": int(n), "mean": num(values.mean()) if n else None, "curve": None, "alerts": [],
                           "baseline": None, "alert_active": False, "alert_count": 0}
    if n == 0:
        return out
    drift = stats.rolling_drift(values, None, p.drift_window, p.drift_baseline, p.drift_margin,
                               alpha=p.drift_alpha)
    size = max(p.curve_bucket, math.ceil(n / p.curve_max_points))
    starts = np.arange(0, n, size)
    ends = np.minimum(starts + size, n) - 1
    sums = np.add.reduceat(values, starts)
    counts = ends - starts + 1
    days = local_days(times[ends], p.tz)
    alert = np.zeros(n, dtype=bool)
    alert[drift.alert_positions] = True
    any_alert = np.add.reduceat(alert.astype(np.int64), starts) > 0
    # Columns rather than one object per point: the curves are most of the payload.
    out["curve"] = {
        "end": [int(e) + 1 for e in ends],
        "date": [day_text(day) for day in days],
        "n": [int(c) for c in counts],
        "value": [num(s / c) for s, c in zip(sums, counts)],
        "rolling": [num(drift.rolling[e]) for e in ends],
        "alert": [bool(a) for a in any_alert],
    }
    out["baseline"] = num(drift.baseline)
    out["limit"] = num(drift.limit)
    positions = drift.alert_positions
    if positions.size:
        # Alerting positions form runs (episodes); only the latest few are spelled out.
        run_starts = np.concatenate([[0], np.flatnonzero(np.diff(positions) != 1) + 1])
        run_ends = np.concatenate([run_starts[1:] - 1, [positions.size - 1]])
        lowest = np.minimum.reduceat(drift.rolling[positions], run_starts)[-5:]
        first, last = positions[run_starts][-5:], positions[run_ends][-5:]
        first_days, last_days = local_days(times[first], p.tz), local_days(times[last], p.tz)
        out["alerts"] = [{"from_item": int(a) + 1, "to_item": int(b) + 1, "from_date": day_text(da),
                          "to_date": day_text(db), "lowest": num(low)}
                         for a, b, da, db, low in zip(first, last, first_days, last_days, lowest)]
        out["alert_count"] = int(run_starts.size)
        out["alert_active"] = bool(positions[-1] == n - 1)
    return out


def _per_expert_series(
    expert: NDArray[np.int64], value: NDArray[np.float64], time: NDArray[np.float64],
    tiebreak: NDArray[np.int64], n_experts: int, p: Params,
) -> list[dict[str, Any] | None]:
    """Split flat (expert, value, time) cells into one time-ordered series per expert."""
    order = np.lexsort((tiebreak, time, expert))
    expert, value, time = expert[order], value[order], time[order]
    bounds = group_bounds(expert, n_experts)
    return [
        _series(value[bounds[i]:bounds[i + 1]], time[bounds[i]:bounds[i + 1]], p)
        if bounds[i + 1] > bounds[i] else None
        for i in range(n_experts)
    ]


def expert_rows(m: Material, p: Params) -> list[dict[str, Any]]:
    """The expert table: throughput, speed, golden accuracy and peer agreement over time, drift alerts."""
    d = derive(m)
    n_experts = len(m.experts)
    complete = np.flatnonzero(d["complete"])
    loo = stats.leave_one_out_agreement(m.labels[complete])
    who = m.unit_expert[complete]
    cells = ~np.isnan(loo) & (who >= 0)
    unit_of_cell = np.broadcast_to(complete[:, None], loo.shape)[cells]
    peer = _per_expert_series(who[cells], loo[cells], m.unit_time[complete][cells], unit_of_cell, n_experts, p)

    graded = (m.golden_ref >= 0) & (m.golden_expert >= 0)
    correct = (m.golden_value[graded] == m.golden_ref[graded]).astype(np.float64)
    golden = _per_expert_series(m.golden_expert[graded], correct, m.golden_time[graded],
                                m.golden_task[graded] * max(1, m.item_id.size) + m.golden_item[graded],
                                n_experts, p)

    items_per_task = d["task_items"]
    tasks = np.bincount(m.a_expert, minlength=n_experts)
    items = np.bincount(m.a_expert, weights=items_per_task[m.a_task], minlength=n_experts)
    per_item = (m.a_submitted - m.a_leased) / np.maximum(items_per_task[m.a_task], 1)
    days = local_days(m.a_submitted, p.tz)
    order = np.lexsort((per_item, m.a_expert))
    bounds = group_bounds(m.a_expert[order], n_experts)
    rows = []
    for i, ex in enumerate(m.experts):
        mine = order[bounds[i]:bounds[i + 1]]
        active_days = int(np.unique(days[mine]).size)
        last = float(m.a_submitted[mine].max()) if mine.size else None
        rows.append({
            "user_id": ex.user_id,
            "pseudonym": ex.pseudonym,
            "tier": ex.tier,
            "status": ex.status,
            "tasks": int(tasks[i]),
            "items": int(items[i]),
            "active_days": active_days,
            "tasks_per_day": num(tasks[i] / active_days, 2) if active_days else None,
            "median_seconds_per_item": num(np.median(per_item[mine]), 1) if mine.size else None,
            "last_submitted_at": None if last is None else datetime.fromtimestamp(last, p.tz).isoformat(),
            "peer": peer[i],
            "golden": golden[i],
        })
    rows.sort(key=lambda r: r["pseudonym"])
    return rows
