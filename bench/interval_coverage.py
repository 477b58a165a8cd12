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

The report's kappa interval (``kappa_ci``: the same cluster bootstrap, percentile) is
checked the same way: each unit's panel majority is a hit with a per-dialogue rate
(Beta, mean ``prevalence``), the judge agrees with it at the per-dialogue rate above,
and the true kappa is the population one, (p_o - p_e) / (1 - p_e) with p_o the mean
agreement and p_e from the two population hit rates. A slice whose kappa is undefined
(one class only) has no interval and counts as a miss.

Prints one JSON line: coverage and mean width of each interval at each size, nominal 95%.
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

from annotation.agreement.stats import (  # noqa: E402
    cluster_jackknife_kappa_interval,
    cluster_weights,
    cluster_wilson_interval,
    percentile_interval,
)
from annotation.agreement.stats.bootstrap import _agreement_kappa_from_cells  # noqa: E402


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


def true_kappa(*, p: float, prevalence: float) -> float:
    """Population kappa of judge vs majority when agreement (mean p) and hit rate (mean prevalence) vary
    independently between dialogues."""
    judge_hit = prevalence * p + (1 - prevalence) * (1 - p)
    chance = prevalence * judge_hit + (1 - prevalence) * (1 - judge_hit)
    return (p - chance) / (1 - chance)


def kappa_coverage(*, dialogues: int, sims: int, p: float = 0.8, prevalence: float = 0.6, icc: float = 0.1,
                   n_boot: int = 500, alpha: float = 0.05, seed: int = 0) -> dict[str, Any]:
    """Share of simulated slices whose kappa interval holds the true kappa: cluster bootstrap percentile
    (the report's ``kappa_ci_bootstrap``) and cluster jackknife-t (its ``kappa_ci``)."""
    rng = np.random.default_rng(seed)
    concentration = 1.0 / icc - 1.0
    truth = true_kappa(p=p, prevalence=prevalence)
    covered, undefined, widths = 0, 0, []
    jk_covered, jk_undefined, jk_widths = 0, 0, []
    for s in range(sims):
        sizes = rng.integers(3, 31, size=dialogues)
        agree_rate = rng.beta(p * concentration, (1 - p) * concentration, size=dialogues)
        hit_rate = rng.beta(prevalence * concentration, (1 - prevalence) * concentration, size=dialogues)
        human_hits = rng.binomial(sizes, hit_rate)
        agree_on_hits = rng.binomial(human_hits, agree_rate)
        agree_on_misses = rng.binomial(sizes - human_hits, agree_rate)
        # Cells as the report lays them out: [n00, n01, n10, n11] with (judge, human).
        cells = np.stack([agree_on_misses, human_hits - agree_on_hits, sizes - human_hits - agree_on_misses,
                          agree_on_hits], axis=1).astype(np.float64)
        jk_low, jk_high = cluster_jackknife_kappa_interval(cells, alpha)
        if np.isfinite(jk_low) and np.isfinite(jk_high):
            jk_covered += int(jk_low <= truth <= jk_high)
            jk_widths.append(jk_high - jk_low)
        else:
            jk_undefined += 1
        boot = np.concatenate([w.astype(np.float64) @ cells
                               for w in cluster_weights(dialogues, n_boot, seed * 1_000_003 + s)])
        _agree, kappa = _agreement_kappa_from_cells(boot)
        if np.isnan(kappa).all():
            undefined += 1
            continue
        low, high = percentile_interval(kappa, alpha)
        if not (np.isfinite(low) and np.isfinite(high)):
            undefined += 1
            continue
        covered += int(low <= truth <= high)
        widths.append(high - low)
    return {"true_kappa": round(truth, 4),
            "bootstrap": {"coverage": round(covered / sims, 4), "undefined": round(undefined / sims, 4),
                          "mean_width": round(float(np.mean(widths)), 4) if widths else None},
            "jackknife_t": {"coverage": round(jk_covered / sims, 4), "undefined": round(jk_undefined / sims, 4),
                            "mean_width": round(float(np.mean(jk_widths)), 4) if jk_widths else None}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    started = time.perf_counter()
    result = {str(k): coverage(dialogues=k, sims=args.sims, seed=args.seed + k) for k in (18, 30, 296)}
    for k in (18, 30, 296):
        result[str(k)]["kappa"] = kappa_coverage(dialogues=k, sims=args.sims, seed=args.seed + 7 * k)
    print(json.dumps({"bench": "interval_coverage", "nominal": 0.95, "sims": args.sims, "p": 0.8, "icc": 0.1,
                      "prevalence": 0.6, "items_per_dialogue": [3, 30], "by_dialogues": result,
                      "seconds": round(time.perf_counter() - started, 2)}))


if __name__ == "__main__":
    main()
