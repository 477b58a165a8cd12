"""Two judge runs on the same units, side by side: agreement with the human verdict, and the paired test.

Both runs are read against one material (the labels are read once). The paired units
are those both runs labelled, on complete panels with a verdict (ties nobody
adjudicated and ambiguous items are left out, as in every judge figure). On them each
run's strict agreement, overall (gate items apart, as the dashboard's headline) and per
dimension, with the cluster Wilson interval by dialogue; the zone-aware acceptability
beside it, under its own name; and the exact McNemar test on the units where exactly
one run matches the verdict. Then the units where the two runs' labels differ.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from annotation.agreement import stats
from annotation.agreement.material import Material, derive
from annotation.agreement.report import judge_vector, material_load
from annotation.agreement.sections import zone_acceptable
from annotation.models import JudgeRun
from core.error_codes import ErrorCode
from core.errors import DomainError
from rubrics.models import RubricItem

DIFFERENCES_SHOWN = 200


@dataclass(frozen=True)
class Share:
    """k of n, as a proportion with its interval."""

    k: int
    n: int
    ci: tuple[float, float]

    @property
    def value(self) -> float | None:
        return self.k / self.n if self.n else None


@dataclass(frozen=True)
class DimensionPair:
    code: str
    name_zh: str
    name_en: str
    a: Share
    b: Share
    test: stats.McNemarResult


@dataclass(frozen=True)
class Difference:
    task_id: int
    question_id: str
    model: str
    rubric_item_id: int
    item_key: str
    content: str
    dimension: str
    a: int
    b: int
    verdict: int
    zone: str


@dataclass(frozen=True)
class RunComparison:
    a: JudgeRun
    b: JudgeRun
    paired_units: int
    strict_a: Share
    strict_b: Share
    zone_aware_a: Share
    zone_aware_b: Share
    test: stats.McNemarResult
    by_dimension: list[DimensionPair]
    labels_differ: int
    differences: list[Difference]


def _share(ok: NDArray[np.bool_], question: NDArray[np.int64], n_questions: int) -> Share:
    successes = np.bincount(question, weights=ok.astype(np.float64), minlength=n_questions)
    totals = np.bincount(question, minlength=n_questions)
    return Share(int(ok.sum()), int(ok.size), stats.cluster_wilson_interval(successes, totals))


def _mcnemar(right_a: NDArray[np.bool_], right_b: NDArray[np.bool_]) -> stats.McNemarResult:
    return stats.mcnemar_exact(int((right_a & ~right_b).sum()), int((~right_a & right_b).sum()))


def judge_runs_compare(*, a: JudgeRun, b: JudgeRun, material: Material | None = None) -> RunComparison:
    """Compare run `a` with run `b` of one project and rubric version (a handful of queries, not per unit)."""
    if a.pk == b.pk:
        raise DomainError("Pick two different judge runs.", code=ErrorCode.COMPARE_SAME_RUN)
    if a.rubric_version_id != b.rubric_version_id:
        raise DomainError("The runs judged different rubric versions.", code=ErrorCode.COMPARE_VERSIONS_DIFFER,
                          params={"version_a": a.rubric_version.number, "version_b": b.rubric_version.number})
    m = material or material_load(project=a.project, version=a.rubric_version)
    d = derive(m)
    judge_a, judge_b = judge_vector(m, a), judge_vector(m, b)
    paired = d["complete"] & ~d["left_out"] & (judge_a >= 0) & (judge_b >= 0)
    verdict = d["majority"]
    m.judge = judge_a
    accept_a = zone_acceptable(m)
    m.judge = judge_b
    accept_b = zone_acceptable(m)
    m.judge = None
    right_a, right_b = (judge_a == verdict), (judge_b == verdict)
    gate_dims = np.array([dim.is_gate for dim in m.dims] or [False], dtype=bool)
    unit_dim = d["unit_dim"]
    question = d["unit_question"]
    n_q = len(m.question_ext)
    head = paired & ~gate_dims[unit_dim] if unit_dim.size else paired

    by_dimension = []
    for i, dim in enumerate(m.dims):
        use = paired & (unit_dim == i)
        if not use.any():
            continue
        by_dimension.append(DimensionPair(dim.code, dim.name_zh, dim.name_en,
                                          _share(right_a[use], question[use], n_q),
                                          _share(right_b[use], question[use], n_q),
                                          _mcnemar(right_a[use], right_b[use])))
    differ = np.flatnonzero(paired & (judge_a != judge_b))
    order = np.lexsort((m.item_position[m.unit_item[differ]], d["unit_model"][differ], question[differ]))
    shown = differ[order][:DIFFERENCES_SHOWN]
    texts = {pk: (key, content) for pk, key, content in
             RubricItem.objects.filter(pk__in=[int(m.item_id[m.unit_item[u]]) for u in shown])
             .values_list("pk", "item_key", "content")}
    zone_of = np.select([d["unanimous"], d["single"]], ["unanimous", "single"], "split")
    differences = []
    for u in shown:
        item_id = int(m.item_id[m.unit_item[u]])
        key, content = texts.get(item_id, ("", ""))
        differences.append(Difference(
            task_id=int(m.task_id[m.unit_task[u]]), question_id=m.question_ext[question[u]],
            model=m.models[d["unit_model"][u]], rubric_item_id=item_id, item_key=key, content=content,
            dimension=m.dims[unit_dim[u]].code, a=int(judge_a[u]), b=int(judge_b[u]), verdict=int(verdict[u]),
            zone=str(zone_of[u])))
    return RunComparison(
        a=a, b=b, paired_units=int(head.sum()),
        strict_a=_share(right_a[head], question[head], n_q), strict_b=_share(right_b[head], question[head], n_q),
        zone_aware_a=_share(accept_a[head], question[head], n_q),
        zone_aware_b=_share(accept_b[head], question[head], n_q),
        test=_mcnemar(right_a[head], right_b[head]), by_dimension=by_dimension,
        labels_differ=int(differ.size), differences=differences)


def comparison_summary(c: RunComparison) -> dict[str, Any]:
    """The figures a test or an API reads, as plain numbers."""
    return {"paired_units": c.paired_units, "strict": [c.strict_a.value, c.strict_b.value],
            "zone_aware": [c.zone_aware_a.value, c.zone_aware_b.value], "b": c.test.b, "c": c.test.c,
            "p_value": c.test.p_value, "labels_differ": c.labels_differ}
