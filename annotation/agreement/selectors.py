"""Reads for agreement reports and the units behind their figures, scoped to one project.

Callers fetch the project with `annotation.selectors.project_get_for_user(..., manage=True)`
first; everything here filters by that project, so an id from a request never reaches
another project's rows.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Exists, OuterRef, QuerySet

from annotation.models import AgreementReport, Assignment, ItemConsensus, JudgeLabel, JudgeRun, Label, Project
from core.errors import NotFound

UNITS_PER_PAGE = 50
UNIT_FILTERS = ("dimension", "category", "model", "difficulty", "zone", "disagree", "expert", "task")


def agreement_report_latest(project: Project, *, judge_run_id: int | None = None) -> AgreementReport | None:
    """The newest finished report of the project (of one judge run when given)."""
    reports = AgreementReport.objects.filter(project=project, status=AgreementReport.Status.DONE)
    if judge_run_id is not None:
        reports = reports.filter(judge_run_id=judge_run_id)
    return reports.select_related("judge_run", "rubric_version").order_by("-computed_at", "-pk").first()


def agreement_report_in_flight(project: Project) -> AgreementReport | None:
    """The newest report still waiting or computing, if any (the page says "recompute queued")."""
    return (AgreementReport.objects.filter(project=project, status__in=[AgreementReport.Status.PENDING,
                                                                         AgreementReport.Status.RUNNING])
            .defer("payload").order_by("-requested_at", "-pk").first())


def judge_run_list_for_project(project: Project) -> list[JudgeRun]:
    return list(JudgeRun.objects.filter(project=project).select_related("rubric_version").order_by("-created_at"))


def judge_run_get_for_project(project: Project, run_id: Any) -> JudgeRun:
    """The project's judge run `run_id`, or NotFound (also for another project's run)."""
    try:
        return JudgeRun.objects.get(pk=int(run_id), project=project)
    except (JudgeRun.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such judge run.") from None


@dataclass(frozen=True)
class UnitRow:
    """One (task, rubric item) unit as the items page lists it."""

    task_id: int
    question_id: str
    model: str
    item_key: str
    position: int
    content: str
    dimension_zh: str
    dimension_en: str
    score: int | None
    labels: list[tuple[str, int]]
    majority: int
    zone: str
    judge: int | None
    rubric_item_id: int = 0


def _clean_filters(raw: dict[str, str]) -> dict[str, str]:
    return {k: str(raw[k]).strip() for k in UNIT_FILTERS if str(raw.get(k, "")).strip()}


def quality_units(project: Project, *, run: JudgeRun | None, filters: dict[str, str]) -> QuerySet[ItemConsensus]:
    """The project's complete, non-golden units matching `filters` (the links from the dashboard).

    `disagree=1` keeps units where the judge run's label differs from the panel majority;
    `expert` a user id whose labels are among the unit's; unknown values match nothing.
    """
    f = _clean_filters(filters)
    units = ItemConsensus.objects.filter(task__project=project, task__is_golden=False)
    if "dimension" in f:
        units = units.filter(rubric_item__dimension__code=f["dimension"])
    if "category" in f:
        units = units.filter(rubric_item__dimension__category=f["category"])
    if "model" in f:
        units = units.filter(task__response__model_name=f["model"])
    if "difficulty" in f:
        units = units.filter(task__response__question__difficulty=f["difficulty"])
    if "zone" in f:
        units = units.filter(zone=f["zone"])
    if "task" in f:
        units = units.filter(task_id=int(f["task"])) if f["task"].isdigit() else units.none()
    if "expert" in f:
        labelled = Label.objects.filter(task=OuterRef("task"), rubric_item=OuterRef("rubric_item"),
                                        assignment__status=Assignment.Status.SUBMITTED,
                                        assignment__expert_id=int(f["expert"]) if f["expert"].isdigit() else -1)
        units = units.filter(Exists(labelled))
    if run is not None:
        units = units.filter(task__rubric_version_id=run.rubric_version_id)
        if f.get("disagree") == "1":
            differs = (JudgeLabel.objects.filter(run=run, task=OuterRef("task"), rubric_item=OuterRef("rubric_item"))
                       .exclude(value=OuterRef("majority")))
            units = units.filter(Exists(differs))
    elif f.get("disagree") == "1":
        units = units.none()
    return units.order_by("task__response__question__external_id", "task__response__model_name",
                          "rubric_item__position", "pk")


def quality_units_page(project: Project, *, run: JudgeRun | None, filters: dict[str, str],
                       page: Any = 1) -> tuple[Page, list[UnitRow]]:
    """One page of :func:`quality_units`, with each unit's labels by pseudonym and the judge's label."""
    units = quality_units(project, run=run, filters=filters).select_related(
        "task__response__question", "rubric_item__dimension")
    current = Paginator(units, UNITS_PER_PAGE).get_page(page)
    rows = list(current.object_list)
    pairs = {(u.task_id, u.rubric_item_id) for u in rows}
    task_ids = {u.task_id for u in rows}
    labels: dict[tuple[int, int], list[tuple[str, int]]] = defaultdict(list)
    for task_id, item_id, value, pseudonym, user_id in (
            Label.objects.filter(task_id__in=task_ids, assignment__status=Assignment.Status.SUBMITTED)
            .order_by("assignment__slot")
            .values_list("task_id", "rubric_item_id", "value", "assignment__expert__expert_profile__pseudonym",
                         "assignment__expert_id")):
        if (task_id, item_id) in pairs:
            labels[(task_id, item_id)].append((pseudonym or f"#{user_id}", value))
    judge: dict[tuple[int, int], int] = {}
    if run is not None:
        judge = {(t, i): v for t, i, v in JudgeLabel.objects.filter(run=run, task_id__in=task_ids)
                 .values_list("task_id", "rubric_item_id", "value")}
    return current, [
        UnitRow(task_id=u.task_id, question_id=u.task.response.question.external_id,
                model=u.task.response.model_name, item_key=u.rubric_item.item_key,
                position=u.rubric_item.position, content=u.rubric_item.content,
                dimension_zh=u.rubric_item.dimension.name_zh, dimension_en=u.rubric_item.dimension.name_en,
                score=u.rubric_item.score, labels=labels.get((u.task_id, u.rubric_item_id), []),
                majority=u.majority, zone=u.zone, judge=judge.get((u.task_id, u.rubric_item_id)),
                rubric_item_id=u.rubric_item_id)
        for u in rows
    ]
