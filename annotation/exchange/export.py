"""The consensus dataset: one row per (task, rubric item), self-contained and filterable.

A row carries everything a reader needs without the platform: the question (id, earlier
dialogue turns, final user turn), the reply and its model, the rubric item (key, text,
dimension, score, rubric version), every counted label by the expert's pseudonym with
its submission time and note, the vote counts, majority, zone, provenance, and for each
judge run its label and reason. Golden tasks are calibration material and stay out.
Experts appear only by `ExpertProfile.pseudonym`.

Zone and provenance pass through as stored. Which labels count: those of submitted
assignments (a rejected submission's labels are kept for the audit export only). Which
value of a label counts is the project's choice, stated on every row (`labels_used`:
first, or revised after the judge's reveal); each label carries both values and the reason.

Memory stays flat in the number of rows: tasks are read in keyset-paginated chunks of
TASK_CHUNK, each chunk's items, consensus, labels and judge labels come from one query
each, and the encoders (`export_formats`) yield bytes as they go. What is the same for
many rows (an assignment's submission time, a judge run's name) is read once, not joined
onto every row.
"""
import json
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import date, datetime, time
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from annotation.models import (
    Assignment,
    ConsensusLabels,
    ItemConsensus,
    JudgeLabel,
    JudgeRun,
    JudgeTaskResult,
    Label,
    Project,
    Response,
    Task,
)
from core.error_codes import ErrorCode
from core.errors import DomainError
from rubrics.models import Dimension, RubricItem, RubricVersion

TASK_CHUNK = 500

# Every zone a consensus row can hold once ties and single-expert panels have their own.
ZONES = ("unanimous", "split", "tied", "single", "ambiguous")
COMPLETION = ("complete", "all")

COLUMNS = ["task_id", "question_id", "dialogue", "final_user_turn", "response_text", "model", "rubric_item_id",
           "position", "item_text", "dimension", "dimension_code", "score", "rubric_version", "labels",
           "hit_votes", "total_votes", "majority", "zone", "provenance", "judge_label", "judge_reason",
           "judge_runs", "labels_used"]


@dataclass(frozen=True)
class ExportFilters:
    """Which rows an export holds. None means no restriction; `completion="all"` adds unfinished tasks."""

    rubric_version: int | None = None
    zone: str | None = None
    dimension: str | None = None
    model: str | None = None
    completion: str = "complete"
    submitted_after: date | None = None

    def as_json(self) -> dict[str, Any]:
        """The filters as stored on the export record and written into the dataset card."""
        data = asdict(self)
        if self.submitted_after is not None:
            data["submitted_after"] = self.submitted_after.isoformat()
        return data


FILTER_NAMES = tuple(ExportFilters.__dataclass_fields__)


def _refuse(name: str, got: str, expected: list[str]) -> DomainError:
    shown = ", ".join(expected) if expected else "(none in this project)"
    message = f"unknown value {json.dumps(got, ensure_ascii=False)}; expected one of {shown}"
    return DomainError(f"Export filter {name}: {message}.", code=ErrorCode.EXPORT_FILTER_INVALID,
                       errors=[{"field": name, "message": message, "code": ErrorCode.EXPORT_FILTER_INVALID,
                                "params": {"field": name, "got": json.dumps(got, ensure_ascii=False),
                                           "expected": shown}}],
                       params={"field": name, "got": json.dumps(got, ensure_ascii=False), "expected": shown})


def export_filters_parse(*, project: Project, raw: Mapping[str, Any]) -> ExportFilters:
    """Filters from query parameters, form fields or CLI options; blank means "any".

    A value the project does not have (a rubric version number it never published, a
    model it has no reply from, a dimension code outside the taxonomy) is refused with
    the filter's name and the values it accepts, rather than silently exporting nothing.
    """
    def value(name: str) -> str:
        got = raw.get(name)
        return "" if got is None else str(got).strip()

    version = value("rubric_version")
    version_number: int | None = None
    if version:
        numbers = [str(n) for n in RubricVersion.objects.filter(rubric_id=project.rubric_id)
                   .order_by("number").values_list("number", flat=True)]
        if version.removeprefix("v") not in numbers:
            raise _refuse("rubric_version", version, numbers)
        version_number = int(version.removeprefix("v"))
    zone = value("zone")
    if zone and zone not in ZONES:
        raise _refuse("zone", zone, list(ZONES))
    dimension = value("dimension")
    if dimension:
        codes = dict(Dimension.objects.order_by("sort_order", "code").values_list("code", "code"))
        codes |= dict(Dimension.objects.values_list("name_zh", "code"))
        if dimension not in codes:
            raise _refuse("dimension", dimension,
                          list(Dimension.objects.order_by("sort_order", "code").values_list("code", flat=True)))
        dimension = codes[dimension]
    model = value("model")
    if model:
        models = list(Response.objects.filter(project=project).order_by("model_name")
                      .values_list("model_name", flat=True).distinct())
        if model not in models:
            raise _refuse("model", model, models)
    completion = value("completion") or "complete"
    if completion not in COMPLETION:
        raise _refuse("completion", completion, list(COMPLETION))
    after = value("submitted_after")
    after_date: date | None = None
    if after:
        try:
            after_date = date.fromisoformat(after)
        except ValueError:
            raise _refuse("submitted_after", after, ["a date such as 2026-03-01"]) from None
    return ExportFilters(rubric_version=version_number, zone=zone or None, dimension=dimension or None,
                         model=model or None, completion=completion, submitted_after=after_date)


def _counted_labels(qs: QuerySet[Label]) -> QuerySet[Label]:
    """The labels that count in consensus: those of submitted assignments. A rejected submission
    has the status "rejected", so its labels (kept for the audit, see `Label.objects.counted()`)
    never reach an export."""
    return qs.filter(assignment__status=Assignment.Status.SUBMITTED)


def export_tasks(*, project: Project, filters: ExportFilters) -> QuerySet[Task]:
    """The tasks an export covers, in id order (rows then narrow to the filtered items)."""
    tasks = Task.objects.filter(project=project, is_golden=False)
    consensus = ItemConsensus.objects.filter(task=OuterRef("pk"))
    if filters.completion == "complete":
        tasks = tasks.filter(Exists(consensus))
    if filters.zone:
        tasks = tasks.filter(Exists(consensus.filter(zone=filters.zone)))
    if filters.rubric_version is not None:
        tasks = tasks.filter(rubric_version__number=filters.rubric_version)
    if filters.model:
        tasks = tasks.filter(response__model_name=filters.model)
    if filters.submitted_after is not None:
        start = timezone.make_aware(datetime.combine(filters.submitted_after, time.min))
        submitted = _counted_labels(Label.objects.filter(task=OuterRef("pk"), assignment__submitted_at__gte=start))
        tasks = tasks.filter(Exists(submitted))
    return tasks.order_by("pk")


def _provenance(consensus: dict[str, Any]) -> str | None:
    stored = consensus.get("provenance")
    if stored:
        return stored
    if consensus["zone"] == "tied":
        return None
    return "unanimous" if consensus["hit_votes"] in (0, consensus["total_votes"]) else "majority"


def consensus_rows(*, project: Project, filters: ExportFilters | None = None, task_chunk: int = TASK_CHUNK,
                   with_dialogue: bool = True, progress=None) -> Iterator[dict[str, Any]]:
    """The export's rows, ordered by task then rubric item position.

    `with_dialogue=False` leaves the dialogue out (the Hugging Face layout keeps it in a
    questions file); `progress(done_tasks)` is called after each chunk.
    """
    filters = filters or ExportFilters()
    selected = export_tasks(project=project, filters=filters)
    consensus_fields = ["task_id", "rubric_item_id", "majority", "zone", "hit_votes", "total_votes", "provenance"]
    task_fields = ["pk", "rubric_version_id", "rubric_version__number", "response__text", "response__model_name",
                   "response__question__external_id", "response__question__final_user_turn"]
    if with_dialogue:
        task_fields.append("response__question__dialogue")
    # Which labels `label`, the votes and the majority read; each label also carries its first and revised value.
    labels_used = str(project.consensus_labels)
    last_pk, done = 0, 0
    while True:
        tasks = list(selected.filter(pk__gt=last_pk).values(*task_fields)[:task_chunk])
        if not tasks:
            return
        last_pk = tasks[-1]["pk"]
        task_ids = [t["pk"] for t in tasks]
        items = _items_by_question(tasks=tasks, dimension=filters.dimension)
        consensus = {(c["task_id"], c["rubric_item_id"]): c for c in
                     ItemConsensus.objects.filter(task_id__in=task_ids).values(*consensus_fields)}
        labels = _labels_by_item(task_ids=task_ids, revised=labels_used == ConsensusLabels.REVISED)
        judges = judge_labels_for_tasks(project=project, task_ids=task_ids)
        for task in tasks:
            key = (task["rubric_version_id"], task["response__question__external_id"])
            for item in items.get(key, []):
                c = consensus.get((task["pk"], item["pk"]))
                if filters.zone and (c is None or c["zone"] != filters.zone):
                    continue
                if filters.completion == "complete" and c is None:
                    continue
                runs = judges.get((task["pk"], item["pk"]), [])
                yield {
                    "task_id": task["pk"],
                    "question_id": task["response__question__external_id"],
                    **({"dialogue": task["response__question__dialogue"]} if with_dialogue else {}),
                    "final_user_turn": task["response__question__final_user_turn"],
                    "response_text": task["response__text"],
                    "model": task["response__model_name"],
                    "rubric_item_id": item["item_key"],
                    "position": item["position"],
                    "item_text": item["content"],
                    "dimension": item["dimension__name_zh"],
                    "dimension_code": item["dimension__code"],
                    "score": item["score"],
                    "rubric_version": task["rubric_version__number"],
                    "labels": labels.get((task["pk"], item["pk"]), []),
                    "hit_votes": None if c is None else c["hit_votes"],
                    "total_votes": None if c is None else c["total_votes"],
                    # NULL for a tie and for an item adjudicated ambiguous; an adjudicated tie has one.
                    "majority": None if c is None else c["majority"],
                    "zone": None if c is None else c["zone"],
                    "provenance": None if c is None else _provenance(c),
                    "judge_label": runs[-1]["label"] if runs else None,
                    "judge_reason": runs[-1]["reason"] if runs else None,
                    "judge_runs": runs,
                    "labels_used": labels_used,
                }
        done += len(tasks)
        if progress is not None:
            progress(done)


def _items_by_question(*, tasks: list[dict[str, Any]], dimension: str | None) -> dict[tuple[int, str], list]:
    items: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    wanted = RubricItem.objects.filter(version_id__in={t["rubric_version_id"] for t in tasks},
                                       question_ref__in={t["response__question__external_id"] for t in tasks})
    if dimension:
        wanted = wanted.filter(dimension__code=dimension)
    for item in (wanted.order_by("version_id", "question_ref", "position")
                 .values("pk", "version_id", "question_ref", "position", "item_key", "content", "score",
                         "dimension__code", "dimension__name_zh")):
        items[item["version_id"], item["question_ref"]].append(dict(item))
    return items


def judge_labels_for_tasks(*, project: Project, task_ids: list[int]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """Per (task id, rubric item id), each judge run's label and the run's reason for that task, oldest run first.

    Judge labels live in `JudgeLabel` (one per run, task and item); the judge's reason is
    per task, in the run's `JudgeTaskResult`. The project's runs are read once, so the
    label rows need no join.
    """
    runs = {pk: (order, name, model) for order, (pk, name, model) in enumerate(
        JudgeRun.objects.filter(project=project).order_by("created_at", "pk")
        .values_list("pk", "name", "judge_model"))}
    if not runs:
        return {}
    reasons = {(run_id, task_id): reason for run_id, task_id, reason in
               JudgeTaskResult.objects.filter(task_id__in=task_ids, run_id__in=list(runs))
               .values_list("run_id", "task_id", "reason")}
    judged: dict[tuple[int, int], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for task_id, item_id, value, run_id in (JudgeLabel.objects.filter(task_id__in=task_ids, run_id__in=list(runs))
                                            .values_list("task_id", "rubric_item_id", "value", "run_id")):
        order, name, model = runs[run_id]
        judged[task_id, item_id].append((order, {"run": name, "judge_model": model, "label": value,
                                                 "reason": reasons.get((run_id, task_id)) or None}))
    return {key: [label for _order, label in (sorted(pairs, key=lambda pair: pair[0]) if len(pairs) > 1 else pairs)]
            for key, pairs in judged.items()}


def _labels_by_item(*, task_ids: list[int], revised: bool = False) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """Per (task id, rubric item id), the counted labels in panel-seat order.

    Each label holds its first value (`first_label`, as submitted), its value after the judge's reveal
    (`revised_label`, None when not revised) with the expert's `revision_reason`, and as `label` the one
    consensus counts (`revised`: the project counts revised labels).

    The submission time and pseudonym belong to the assignment, so they are read once per
    assignment (a few per task) rather than joined onto every label: parsing 300,000
    identical timestamps was a quarter of a 100k-row export's time.
    """
    panel = {pk: (slot, submitted_at.isoformat() if submitted_at else None, pseudonym or f"assignment-{pk}")
             for pk, slot, submitted_at, pseudonym in
             Assignment.objects.filter(task_id__in=task_ids, status=Assignment.Status.SUBMITTED)
             .values_list("pk", "slot", "submitted_at", "expert__expert_profile__pseudonym")}
    labels: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    seats: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for task_id, item_id, value, note, assignment_id, revised_value, reason in (
            Label.objects.filter(task_id__in=task_ids)
            .values_list("task_id", "rubric_item_id", "value", "note", "assignment_id", "revision__value",
                         "revision__reason")):
        seat = panel.get(assignment_id)
        if seat is None:  # not a counted submission (a draft, a released or rejected one)
            continue
        # An account without an expert profile has no pseudonym; the assignment id keeps
        # its labels apart without exposing who it is.
        counted = revised_value if revised and revised_value is not None else value
        labels[task_id, item_id].append({"expert": seat[2], "label": counted, "submitted_at": seat[1], "note": note,
                                         "first_label": value, "revised_label": revised_value,
                                         "revision_reason": reason})
        seats[task_id, item_id].append((seat[0], assignment_id))
    for key, order in seats.items():
        if len(order) > 1 and order != sorted(order):
            labels[key] = [label for _seat, label in sorted(zip(order, labels[key], strict=True),
                                                            key=lambda pair: pair[0])]
    return labels
