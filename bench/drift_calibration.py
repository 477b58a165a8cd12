"""Calibration of the drift alert: false alerts on stable experts, detection of a planted drop.

Each simulated expert labels a project of ``length`` items, each right with their own
accuracy (drawn uniformly from 0.75..0.95, as the leave-one-out peer agreement of real
experts spreads). A *stable* expert keeps that accuracy; a *drifting* one loses
``drop`` (15 points) from item ``drop_at`` on. The report's rule
(:func:`annotation.agreement.stats.rolling_drift` with the report's window, baseline,
margin and alpha) runs over each whole series, as the dashboard would after the project.

* false_flag_share: stable experts flagged at least once anywhere in the project;
* detection_rate: drifting experts flagged at least once after the drop started.

Prints one JSON line. Usage: .venv/bin/python bench/drift_calibration.py [--experts N] [--seed S]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from annotation.agreement.stats import rolling_drift  # noqa: E402


def simulate(*, experts: int, length: int = 600, window: int = 100, baseline_n: int = 200,
             margin: float = 0.10, alpha: float | None = 0.05, drop: float = 0.15, drop_at: int = 300,
             seed: int = 0) -> dict[str, Any]:
    """Run the stable and the drifting simulation; return the two shares and the settings."""
    rng = np.random.default_rng(seed)
    accuracy = rng.uniform(0.75, 0.95, size=experts)
    stable = rng.random((experts, length)) < accuracy[:, None]
    after = np.arange(length) >= drop_at
    drifting_p = np.where(after[None, :], accuracy[:, None] - drop, accuracy[:, None])
    drifting = rng.random((experts, length)) < drifting_p
    false_flags = 0
    caught = 0
    for e in range(experts):
        if rolling_drift(stable[e].astype(np.float64), None, window, baseline_n, margin,
                         alpha=alpha).alert_positions.size:
            false_flags += 1
        positions = rolling_drift(drifting[e].astype(np.float64), None, window, baseline_n, margin,
                                  alpha=alpha).alert_positions
        if (positions >= drop_at).any():
            caught += 1
    return {
        "experts": experts, "length": length, "window": window, "baseline": baseline_n, "margin": margin,
        "alpha": alpha, "drop": drop, "drop_at": drop_at, "seed": seed,
        "false_flag_share": round(false_flags / experts, 4),
        "detection_rate": round(caught / experts, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--experts", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    started = time.perf_counter()
    calibrated = simulate(experts=args.experts, seed=args.seed)
    plain = simulate(experts=args.experts, seed=args.seed, alpha=None)
    short_baseline = simulate(experts=args.experts, seed=args.seed, baseline_n=100)
    print(json.dumps({
        "bench": "drift_calibration", **calibrated,
        "plain_margin_rule": {"false_flag_share": plain["false_flag_share"],
                              "detection_rate": plain["detection_rate"]},
        "baseline_100": {"false_flag_share": short_baseline["false_flag_share"],
                         "detection_rate": short_baseline["detection_rate"]},
        "seconds": round(time.perf_counter() - started, 2),
    }))


if __name__ == "__main__":
    main()
