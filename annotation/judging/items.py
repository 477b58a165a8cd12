"""The judge under the microscope, per rubric item: one item's units side by side, and sending it to the rubric draft.

The table of items comes from the stored report (`annotation.agreement.item_stats`);
this module reads one item's units (a fixed handful of queries whatever the number of
models or experts) and writes a rubric suggestion from it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction

from annotation.consultations.services import SUGGESTION_MAX
from annotation.models import (
    AgreementItemStat,
    AgreementReport,
    Assignment,
    Consultation,
    ItemConsensus,
    JudgeLabel,
    JudgeRun,
    JudgeTaskResult,
    Label,
    Project,
    RubricItemSuggestion,
    Task,
)
from annotation.projects.rules import project_check_writable
from core.error_codes import ErrorCode
from core.errors import DomainError, NotFound
from experts.models import User
from rubrics.models import RubricItem


@dataclass
class ExpertNote:
    pseudonym: str
    value: int
    note: str


@dataclass
class UnitView:
    """One model's response on the item: the experts' labels and notes, the verdict, the judge's label and reason."""

    task_id: int
    model: str
    experts: list[ExpertNote] = field(default_factory=list)
    majority: int | None = None
    zone: str = ""
    judge: int | None = None
    judge_reason: str = ""
    consultation_id: int | None = None

    @property
    def strict_match(self) -> bool | None:
        if self.judge is None or self.majority is None:
            return None
        return self.judge == self.majority

    @property
    def zone_aware_ok(self) -> bool | None:
        """Acceptable in the zone-aware sense: a match, or in a split panel a label inside the experts' range."""
        if self.judge is None or self.majority is None:
            return None
        if self.zone == ItemConsensus.Zone.SPLIT and self.experts:
            values = [e.value for e in self.experts]
            return min(values) <= self.judge <= max(values)
        return self.judge == self.majority


def judge_item_get(*, project: Project, run: JudgeRun, rubric_item_id: object) -> RubricItem:
    """A rubric item of the run's rubric version in `project`, else NotFound."""
    try:
        return RubricItem.objects.select_related("dimension", "version").get(
            pk=int(str(rubric_item_id)), version_id=run.rubric_version_id, version__rubric__project=project)
    except (RubricItem.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such rubric item.") from None


def judge_item_stat(*, report: AgreementReport | None, item: RubricItem) -> AgreementItemStat | None:
    if report is None:
        return None
    return AgreementItemStat.objects.filter(report=report, rubric_item=item).first()


def judge_item_units(*, run: JudgeRun, item: RubricItem) -> list[UnitView]:
    """Every regular task of the item's question under the run's version, one per model (six queries)."""
    tasks = list(Task.objects.filter(project_id=run.project_id, rubric_version_id=item.version_id, is_golden=False,
                                     response__question__external_id=item.question_ref)
                 .order_by("response__model_name", "pk").values_list("pk", "response__model_name"))
    units = {pk: UnitView(task_id=pk, model=model) for pk, model in tasks}
    ids = list(units)
    for task_id, value, note, pseudonym in (
            Label.objects.counted().filter(task_id__in=ids, rubric_item=item,
                                           assignment__status=Assignment.Status.SUBMITTED)
            .order_by("assignment__slot").values_list("task_id", "value", "note",
                                                      "assignment__expert__expert_profile__pseudonym")):
        units[task_id].experts.append(ExpertNote(pseudonym or "—", value, note))
    for task_id, majority, zone in ItemConsensus.objects.filter(task_id__in=ids, rubric_item=item).values_list(
            "task_id", "majority", "zone"):
        units[task_id].majority, units[task_id].zone = majority, zone
    for task_id, value in JudgeLabel.objects.filter(run=run, task_id__in=ids, rubric_item=item).values_list(
            "task_id", "value"):
        units[task_id].judge = value
    for task_id, reason in JudgeTaskResult.objects.filter(run=run, task_id__in=ids).exclude(reason="").values_list(
            "task_id", "reason"):
        units[task_id].judge_reason = reason
    for task_id, pk in (Consultation.objects.filter(task_id__in=ids, rubric_item=item)
                        .exclude(status=Consultation.Status.RESOLVED).values_list("task_id", "pk")):
        units[task_id].consultation_id = pk
    return list(units.values())


def judge_item_suggest(*, project: Project, run: JudgeRun, item: RubricItem, text: object,
                       figures: dict[str, Any], by: User, now: datetime) -> RubricItemSuggestion:
    """File new wording for the item on the rubric draft's suggestion list (taken or dismissed there)."""
    clean = text.strip() if isinstance(text, str) else ""
    if not clean or len(clean) > SUGGESTION_MAX:
        raise DomainError("Suggest the wording.", code=ErrorCode.ITEM_SUGGESTION_TEXT, params={"max": SUGGESTION_MAX},
                          errors=[{"field": "text", "code": ErrorCode.ITEM_SUGGESTION_TEXT,
                                   "params": {"max": SUGGESTION_MAX}, "message": "required"}])
    project_check_writable(project)
    with transaction.atomic():
        return RubricItemSuggestion.objects.create(
            project=project, item_key=item.item_key, text=clean, judge_run=run,
            figures={**figures, "rubric_item_id": item.pk}, created_by=by, created_at=now)
