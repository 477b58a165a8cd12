"""Importing the golden set: reference labels for tasks, from a PM's JSONL file.

File format (JSONL, one golden task per line)::

    {"question_id": "Q1", "model": "model-a", "labels": [1, 0, 1],
     "rationale": ["why item 1 is a hit", null, ""]}

* `question_id` and `model` name the response; its task on the project's current
  rubric version becomes golden.
* `labels` (HeartBench's judge files call it `detail`, also accepted): one 0/1 per
  rubric item of the question in the current version, in position order.
* `rationale` (optional): a list of the same length, text or null per item, shown to
  experts on their calibration result page.

The import is all-or-nothing: every line is checked first and all problems are
reported together (line, field, message); then, in one transaction, the tasks are
marked golden and their references replaced.

A task that already has regular work cannot become golden: its labels would be scored
after the fact. What makes a task golden, and how the set follows a new rubric version,
is `annotation.calibration.golden_set`.
"""
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from annotation.audit.services import audit_record
from annotation.calibration.golden_set import task_mark_golden
from annotation.exchange.jsonl import ImportSource, LineErrors, RowReader, describe, jsonl_objects
from annotation.lock_objects import project_imports_lock
from annotation.models import Assignment, AuditAction, GoldenReference, Project, Question, Response, Task
from annotation.projects.rules import project_check_writable
from annotation.quality.golden_tally import golden_tally_rebuild
from annotation.selectors import rubric_version_current
from core.error_codes import ErrorCode
from core.errors import DomainError
from experts.models import User
from rubrics.models import RubricItem, RubricVersion

RATIONALE_MAX = 4000


@dataclass(frozen=True)
class GoldenImportResult:
    tasks: int
    references: int
    version: int


@dataclass(frozen=True)
class _GoldenRow:
    line: int
    task: Task
    items: list[RubricItem]
    labels: list[int]
    rationales: list[str]


def _read_labels(reader: RowReader, row: dict, expected: int | None) -> list[int] | None:
    key = "labels" if "labels" in row else "detail"
    if key not in row:
        reader.error("labels", "missing; expected a list of 0/1, one per rubric position")
        return None
    value = row[key]
    if not isinstance(value, list):
        reader.error(key, f"expected a list of 0/1, got {describe(value)}")
        return None
    bad = [i for i, v in enumerate(value) if isinstance(v, bool) or v not in (0, 1)]
    for i in bad:
        reader.error(f"{key}[{i}]", f"expected 0 or 1, got {describe(value[i])}", code=ErrorCode.LINE_NOT_BINARY,
                     params={"got": describe(value[i])})
    if expected is not None and len(value) != expected:
        reader.error(key, f"expected {expected} values (one per rubric position of the question), got {len(value)}",
                     code=ErrorCode.WRONG_COUNT, params={"expected": expected, "got": len(value)})
        return None
    return None if bad else list(value)


def _read_rationales(reader: RowReader, row: dict, expected: int) -> list[str] | None:
    value = row.get("rationale")
    if value is None:
        return [""] * expected
    if not isinstance(value, list):
        reader.error("rationale", f"expected a list of text or null, one per rubric position, got {describe(value)}")
        return None
    if len(value) != expected:
        reader.error("rationale", f"expected {expected} entries (one per rubric position), got {len(value)}")
        return None
    out = []
    for i, text in enumerate(value):
        if text is None:
            out.append("")
        elif not isinstance(text, str) or len(text) > RATIONALE_MAX:
            reader.error(f"rationale[{i}]", f"expected text of at most {RATIONALE_MAX} characters or null")
            return None
        else:
            out.append(text.strip())
    return out


def _parse(*, project: Project, version: RubricVersion, data: ImportSource, source: str) -> list[_GoldenRow]:
    errors = LineErrors()
    objects = list(jsonl_objects(data, errors))
    question_ids = {str(row.get("question_id")) for _n, row in objects}
    questions = {q.external_id: q for q in Question.objects.filter(project=project, external_id__in=question_ids)}
    responses = {(r.question_id, r.model_name): r
                 for r in Response.objects.filter(project=project, question__in=questions.values())}
    tasks = {t.response_id: t for t in Task.objects.filter(
        project=project, rubric_version=version, response__in=responses.values())}
    items_by_question: dict[str, list[RubricItem]] = {}
    for item in RubricItem.objects.filter(version=version, question_ref__in=questions).order_by("position"):
        items_by_question.setdefault(item.question_ref, []).append(item)
    worked = set(Assignment.objects.filter(task__in=tasks.values(), task__is_golden=False)
                 .values_list("task_id", flat=True))

    rows: list[_GoldenRow] = []
    seen: dict[int, int] = {}
    for line, row in objects:
        reader = RowReader(errors, line)
        qid = reader.text(row, "question_id", "question_id", max_length=100)
        model = reader.text(row, "model", "model", max_length=200)
        question = questions.get(qid) if qid is not None else None
        if qid is not None and question is None:
            reader.error("question_id", f"unknown question {qid!r} in this project")
        items = items_by_question.get(qid, []) if question is not None else []
        if question is not None and not items:
            reader.error("question_id", f"question {qid!r} has no rubric items in version {version.number}")
        response = responses.get((question.pk, model)) if question is not None and model is not None else None
        if question is not None and model is not None and response is None:
            reader.error("model", f"no response by model {model!r} to question {qid!r}")
        labels = _read_labels(reader, row, len(items) if items else None)
        rationales = _read_rationales(reader, row, len(items)) if items else None
        task = tasks.get(response.pk) if response is not None else None
        if response is not None and task is None:
            reader.error("model", f"the response of {model!r} to {qid!r} has no task on version {version.number}")
        if task is not None:
            if task.pk in worked:
                reader.error("model", f"the task of {model!r} on {qid!r} already has regular work; "
                                      "only a task nobody has worked on can become golden")
            if task.pk in seen:
                reader.error("model", f"{qid!r} / {model!r} is already given on line {seen[task.pk]}")
            seen.setdefault(task.pk, line)
        if not reader.failed and task is not None and labels is not None and rationales is not None:
            rows.append(_GoldenRow(line=line, task=task, items=items, labels=labels, rationales=rationales))
    if not objects and not errors:
        errors.add(None, "file", "the file has no golden rows")
    errors.raise_if_any(source=source)
    return rows


def golden_import(*, project: Project, data: ImportSource, now: datetime, source: str = "upload",
                  by: User | None = None) -> GoldenImportResult:
    """Import reference labels for golden tasks of the current rubric version, all or nothing.

    Raises DomainError (code "invalid_file") listing every bad line, or "no_version"
    when the project has no published rubric version; nothing is written then.
    """
    with transaction.atomic():
        project_imports_lock(project=project)
        project_check_writable(project)
        version = rubric_version_current(project)
        if version is None:
            raise DomainError("Publish a rubric version (import questions) before importing golden labels.",
                              code="no_version")
        rows = _parse(project=project, version=version, data=data, source=source)
        task_ids = [r.task.pk for r in rows]
        task_mark_golden(task_ids=task_ids)
        GoldenReference.objects.filter(task_id__in=task_ids).delete()
        references = GoldenReference.objects.bulk_create(
            GoldenReference(task=r.task, rubric_item=item, value=value, rationale=rationale, created_at=now)
            for r in rows for item, value, rationale in zip(r.items, r.labels, r.rationales, strict=True)
        )
        # New references re-score past answers on these tasks, and newly golden tasks turn
        # their labels into golden evidence: the project's tally is counted again.
        golden_tally_rebuild(project_id=project.pk)
        audit_record(actor=by, action=AuditAction.GOLDEN_IMPORT, project_id=project.pk, now=now,
                     object_type="annotation.task", object_ids=task_ids,
                     details={"source": source, "tasks": len(rows), "references": len(references),
                              "version": version.number})
    return GoldenImportResult(tasks=len(rows), references=len(references), version=version.number)
