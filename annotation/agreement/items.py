"""Judge-vs-human agreement per rubric item (question x position), across models. No Django import here.

One row per rubric item the judge labelled on complete units: how many units, how many
the judge matched (strict) and how many were acceptable (zone-aware, see
`sections.zone_acceptable`), each with its interval, and the zone mix of the units. A
rubric item's units are its question's responses from different models: one dialogue,
so the interval treats each unit (one model's response) as its own cluster: the Wilson
interval of `stats.cluster_wilson_interval` on units, with Student's t on n - 1
degrees of freedom, which is honest about how few responses an item rests on.

Everything is computed with a few bincounts over all units at once; only the interval
runs per item.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from annotation.agreement import stats
from annotation.agreement.material import Material, Params, derive
from annotation.agreement.sections import zone_acceptable

ZONE_COUNTS = ("unanimous", "split", "tied", "single", "ambiguous")


@dataclass(frozen=True)
class ItemRow:
    item: int  # index into the material's rubric items
    units: int  # judged, complete units outside the left-out ones
    agree: int
    acceptable: int
    strict: float
    strict_ci: tuple[float, float]
    zone_aware: float
    zone_aware_ci: tuple[float, float]
    judge_hits: int
    human_hits: int
    zones: dict[str, int]


@lru_cache(maxsize=65536)
def _unit_interval(hits: int, n: int, alpha: float) -> tuple[float, float]:
    """The interval of `hits` out of `n` units, each its own cluster.

    It depends on nothing else, and most items rest on the same few unit counts (one
    per model), so 31,000 items need a few hundred distinct intervals.
    """
    successes = np.zeros(n)
    successes[:hits] = 1.0
    return stats.cluster_wilson_interval(successes, np.ones(n), alpha)


def item_rows(m: Material, p: Params) -> list[ItemRow]:
    """Per rubric item with at least one judged complete unit, in rubric item order."""
    if m.judge is None or m.unit_task.size == 0:
        return []
    d = derive(m)
    judged = d["complete"] & (m.judge >= 0)
    use = judged & ~d["left_out"]
    n_items = m.item_id.size
    item = m.unit_item

    def count(mask: NDArray[np.bool_]) -> NDArray[np.int64]:
        return np.bincount(item[mask], minlength=n_items).astype(np.int64)

    units = count(use)
    agree = count(use & (m.judge == d["majority"]))
    acceptable = count(use & zone_acceptable(m))
    judge_hits = count(use & (m.judge == 1))
    human_hits = count(use & (d["majority"] == 1))
    # The zone mix counts every judged complete unit, the left-out ties and ambiguous ones included.
    split = d["complete"] & ~d["unanimous"] & ~d["single"] & ~d["tied"] & ~d["ambiguous"]
    zones = {
        "unanimous": count(judged & d["unanimous"] & ~d["ambiguous"]),
        "split": count(judged & split),
        "tied": count(judged & d["tied"] & ~d["ambiguous"]),
        "single": count(judged & d["single"] & ~d["ambiguous"]),
        "ambiguous": count(judged & d["ambiguous"]),
    }
    rows = []
    for i in np.flatnonzero(units):
        n = int(units[i])
        rows.append(ItemRow(
            item=int(i), units=n, agree=int(agree[i]), acceptable=int(acceptable[i]),
            strict=float(agree[i]) / n,
            strict_ci=_unit_interval(int(agree[i]), n, p.alpha),
            zone_aware=float(acceptable[i]) / n,
            zone_aware_ci=_unit_interval(int(acceptable[i]), n, p.alpha),
            judge_hits=int(judge_hits[i]), human_hits=int(human_hits[i]),
            zones={z: int(zones[z][i]) for z in ZONE_COUNTS},
        ))
    return rows
