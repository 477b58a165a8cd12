"""Writing and reading the per-rubric-item agreement rows of a stored report.

The rows are computed from the report's material with a few array operations
(`annotation.agreement.items`) and written with one COPY (bulk insert off PostgreSQL) when the report is
stored, so the items page sorts, filters and pages them in SQL and never reads labels.
"""
from __future__ import annotations

import math
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import F, QuerySet

from annotation.agreement.items import ZONE_COUNTS, item_rows
from annotation.agreement.material import Material, Params
from annotation.exchange.bulk import rows_insert
from annotation.models import AgreementItemStat, AgreementReport, Question
from rubrics.models import RubricItem

PAGE_SIZE = 50
# Sort keys a PM may pick; the first is the default (worst first, then the items resting on most units).
SORTS: dict[str, tuple[Any, ...]] = {
    "worst": (F("strict").asc(), F("units").desc(), "question_ref", "position"),
    "worst_zone_aware": (F("zone_aware").asc(), F("units").desc(), "question_ref", "position"),
    "best": (F("strict").desc(), F("units").desc(), "question_ref", "position"),
    "units": (F("units").desc(), F("strict").asc(), "question_ref", "position"),
    "split": (F("split").desc(), F("strict").asc(), "question_ref", "position"),
    "question": ("question_ref", "position"),
}


def _bound(value: float) -> float | None:
    return value if math.isfinite(value) else None


def item_stats_store(*, report: AgreementReport, material: Material, params: Params) -> int:
    """Replace the report's per-item rows with those of `material` (whose judge vector is set); returns how many."""
    AgreementItemStat.objects.filter(report=report).delete()
    rows = item_rows(material, params)
    if not rows:
        return 0
    scenes = dict(Question.objects.filter(project_id=report.project_id).values_list("external_id", "primary_scene"))
    refs = dict(RubricItem.objects.filter(version_id=report.rubric_version_id).values_list("pk", "question_ref"))
    zone_fields = list(ZONE_COUNTS)
    fields = ["report_id", "rubric_item_id", "question_ref", "position", "dimension_code", "scene", "units",
              "agree", "acceptable", "strict", "strict_low", "strict_high", "zone_aware", "zone_aware_low",
              "zone_aware_high", "judge_hits", "human_hits", *zone_fields]

    def values():
        for r in rows:
            item_id = int(material.item_id[r.item])
            question_ref = refs.get(item_id, "")
            yield (report.pk, item_id, question_ref, int(material.item_position[r.item]),
                   material.dims[int(material.item_dim[r.item])].code, scenes.get(question_ref, "") or "",
                   r.units, r.agree, r.acceptable, r.strict, _bound(r.strict_ci[0]), _bound(r.strict_ci[1]),
                   r.zone_aware, _bound(r.zone_aware_ci[0]), _bound(r.zone_aware_ci[1]), r.judge_hits,
                   r.human_hits, *(r.zones[z] for z in zone_fields))

    # COPY on PostgreSQL: about 31,000 rows at ten times HeartBench, where bulk_create spent
    # several seconds binding parameters in Python.
    return rows_insert(model=AgreementItemStat, fields=fields, rows=values())


def item_stats_for_report(report: AgreementReport, *, dimension: str = "", scene: str = "",
                          sort: str = "worst") -> QuerySet[AgreementItemStat]:
    """The report's rows, filtered by dimension code and scene, in the chosen order (unknown: worst first)."""
    rows = AgreementItemStat.objects.filter(report=report).select_related("rubric_item")
    if dimension:
        rows = rows.filter(dimension_code=dimension)
    if scene:
        rows = rows.filter(scene=scene)
    return rows.order_by(*SORTS.get(sort, SORTS["worst"]))


def item_stats_page(report: AgreementReport, *, dimension: str, scene: str, sort: str, page: Any) -> Page:
    return Paginator(item_stats_for_report(report, dimension=dimension, scene=scene, sort=sort),
                     PAGE_SIZE).get_page(page)


def item_stats_facets(report: AgreementReport) -> tuple[list[str], list[str]]:
    """The dimension codes and scenes present in the report's rows (for the filter pickers)."""
    pairs = list(AgreementItemStat.objects.filter(report=report).values_list("dimension_code", "scene").distinct())
    return sorted({d for d, _ in pairs}), sorted({s for _, s in pairs if s})
