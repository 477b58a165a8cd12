"""Agreement before and after the reveal: the judge's headline agreement with the panel majority computed
on the first labels and on the revised ones, side by side, with how many labels were revised.

Both figures come from the report's own statistics (`annotation.agreement.sections.judge_headline`, the
same function and parameters as the report's headline), on two copies of the material that differ only
in the revised cells. No Django import here.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from annotation.agreement.material import Material, Params, derive
from annotation.agreement.sections import judge_headline


def _with_labels(m: Material, values: np.ndarray) -> Material:
    assert m.revisions is not None
    labels = m.labels.copy()
    labels[m.revisions.unit, m.revisions.slot] = values
    return dataclasses.replace(m, labels=labels, derived={})


def reveal_section(m: Material, p: Params) -> dict[str, Any] | None:
    """None while nobody revised a label of this material; else the counts and both headlines."""
    r = m.revisions
    if r is None or r.unit.size == 0:
        return None
    before, after = _with_labels(m, r.first), _with_labels(m, r.revised)
    d_before, d_after = derive(before), derive(after)
    complete = d_before["complete"]
    changed = complete & (d_before["majority"] != d_after["majority"])
    section: dict[str, Any] = {
        "labels_used": m.labels_used,
        "labels_revised": int(r.unit.size),
        "toward_judge_shown": int((r.revised == r.judge_shown).sum()),
        "units_revised": int(np.unique(r.unit).size),
        "majority_changed": int(changed.sum()),
        "toward_reported_judge": None,
        "before": None,
        "after": None,
    }
    if m.judge is not None:
        judge = m.judge[r.unit]
        section["toward_reported_judge"] = int(((judge >= 0) & (judge == r.revised)).sum())
        section["before"] = judge_headline(dataclasses.replace(before, judge=m.judge), p)
        section["after"] = judge_headline(dataclasses.replace(after, judge=m.judge), p)
    return section
