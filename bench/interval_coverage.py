"""Coverage of the report's agreement intervals, measured by simulation at 18, 30 and 296 dialogues.

A slice of judge-vs-panel agreement rests on k dialogues (questions), each holding a
varying number of judged units (3 to 30) whose agreement rate varies between
dialogues (Beta with mean ``p`` and intra-dialogue correlation ``icc``), so units of
one dialogue are correlated, as they are in real data. For each simulated slice both
intervals are built and checked against the true rate:

* ``bootstrap``: the cluster bootstrap percentile interval, by dialogue (the report keeps
  it as ``agreement_ci_bootstrap``);
* ``cluster_wilson``: :func:`annotation.agreement.stats.cluster_wilson_interval` (the
  report's ``agreement_ci``, thin slices included).

Prints one JSON line: coverage and mean width of both at each size, nominal 95%.
Usage: .venv/bin/python bench/interval_coverage.py [--sims N] [--seed S]
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

from annotation.agreement.stats import cluster_weights, cluster_wilson_interval, percentile_interval  # noqa: E402


def coverage(*, dialogues: int, sims: int, p: float = 0.8, icc: float = 0.1, n_boot: int = 500,
             alpha: float = 0.05, seed: int = 0) -> dict[str, Any]:
    """Share of simulated slices whose interval holds the true agreement rate, per method."""
    rng = np.random.default_rng(seed)
    concentration = 1.0 / icc - 1.0
    hits = {"bootstrap": 0, "cluster_wilson": 0}
    widths: dict[str, list[float]] = {"bootstrap": [], "cluster_wilson": []}
    for s in range(sims):
        sizes = rng.integers(3, 31, size=dialogues)
        rates = rng.beta(p * concentration, (1 - p) * concentration, size=dialogues)
        agreed = rng.binomial(sizes, rates)
        boot = np.concatenate([w.astype(np.float64) @ np.stack([agreed, sizes], axis=1).astype(np.float64)
                               for w in cluster_weights(dialogues, n_boot, seed * 1_000_003 + s)])
        intervals = {
            "bootstrap": percentile_interval(boot[:, 0] / boot[:, 1], alpha),
            "cluster_wilson": cluster_wilson_interval(agreed, sizes, alpha),
        }
        for name, (low, high) in intervals.items():
            hits[name] += int(low <= p <= high)
            widths[name].append(high - low)
    return {name: {"coverage": round(hits[name] / sims, 4), "mean_width": round(float(np.mean(widths[name])), 4)}
            for name in hits}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    started = time.perf_counter()
    result = {str(k): coverage(dialogues=k, sims=args.sims, seed=args.seed + k) for k in (18, 30, 296)}
    print(json.dumps({"bench": "interval_coverage", "nominal": 0.95, "sims": args.sims, "p": 0.8, "icc": 0.1,
                      "items_per_dialogue": [3, 30], "by_dialogues": result,
                      "seconds": round(time.perf_counter() - started, 2)}))


if __name__ == "__main__":
    main()
