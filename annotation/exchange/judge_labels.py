"""Importing judge labels from JSONL under a named judge run, all or nothing.

Rows are `{"question_id", "model", "detail": [0|1, ...], "reason"?}`: `detail[i]` is
the judge's verdict on rubric item i+1 of the question, in the run's rubric version
(the project's current version when the run is created). A `detail` of the wrong
length is an error, never padded or cut: a label at the wrong position is worse than
no label.

Labels stored under a run are never replaced. Re-importing a file changes nothing
(identical rows are skipped); rows for responses the run has no labels for yet are
added; a row whose labels or reason differ from the stored ones is an error.
"""
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count

from annotation.audit.services import audit_record
from annotation.exchange.jsonl import (
    ImportSource,
    LineErrors,
    RowReader,
    describe,
    import_size_check,
    jsonl_objects,
    source_size,
)
from annotation.lock_objects import project_imports_lock
from annotation.models import (
    AuditAction,
    JudgeConfigVersion,
    JudgeLabel,
    JudgeRun,
    JudgeTaskResult,
    Project,
    Question,
    Response,
    Task,
)
from annotation.projects.rules import project_check_writable
from annotation.selectors import rubric_version_current
from core.after_commit import task_send_on_commit
from core.error_codes import ErrorCode
from core.errors import DomainError
from experts.models import User
from rubrics.models import RubricItem, RubricVersion

RUN_NAME_MAX = 100
JUDGE_MODEL_MAX = 200
PROMPT_VERSION_MAX = 100
QUESTION_ID_MAX = 100
MODEL_NAME_MAX = 200
BATCH_SIZE = 2000


@dataclass(frozen=True)
class JudgeImportResult:
    """What an import wrote: `created` task results (with `labels_created` labels) under `run`,
    `skipped` rows already stored identically."""

    run: JudgeRun
    created: int
    skipped: int
    labels_created: int


@dataclass(frozen=True)
class _Row:
    line: int
    task_id: int
    question_ref: str
    detail: list[int]
    reason: str


def judge_labels_import(*, project: Project, data: ImportSource, run_name: str, judge_model: str | None = None,
                        prompt_version: str | None = None, created_by: User | None = None, now: datetime,
                        source: str = "upload", config_version: object = None) -> JudgeImportResult:
    """Import judge labels into the run `run_name` of `project` (created if new).

    Raises DomainError with `errors=[{line, field, message}]` for every bad line (not
    JSON, a missing field, an unknown question or response, no task on the run's
    rubric version, a value other than 0/1, a `detail` of the wrong length, labels
    differing from those stored) and then writes nothing. `config_version` (an id of one of the
    project's judge configuration versions) records what the labels were asked with elsewhere;
    an empty `judge_model` takes the version's.
    """
    # Refused before reading the file (a closed project is read-only); checked again under the lock.
    project_check_writable(project)
    import_size_check(size=source_size(data))
    run_name = _option(run_name, "run", RUN_NAME_MAX, required=True)
    judge_model = _option(judge_model, "judge_model", JUDGE_MODEL_MAX)
    prompt_version = _option(prompt_version, "prompt_version", PROMPT_VERSION_MAX)
    asked_with = _config_version(project, config_version)
    if asked_with is not None and not judge_model:
        judge_model = asked_with.judge_model
    with transaction.atomic():
        project_imports_lock(project=project)
        project_check_writable(project)
        run = JudgeRun.objects.filter(project=project, name=run_name).select_related("rubric_version").first()
        if run is not None and asked_with is not None and run.config_version_id not in (None, asked_with.pk):
            message = "the run already records another judge configuration version"
            raise DomainError(f"config_version: {message}", code="invalid_option",
                              params={"field": "config_version", "message": message},
                              errors=[{"line": None, "field": "config_version", "message": message}])
        version = _run_version(project=project, run=run, judge_model=judge_model, prompt_version=prompt_version)
        rows, skipped = _rows_validated(project=project, version=version, run=run, data=data, source=source)
        if not rows:
            return JudgeImportResult(run=run, created=0, skipped=skipped, labels_created=0)
        if run is None:
            run = JudgeRun.objects.create(
                project=project, rubric_version=version, name=run_name, judge_model=judge_model,
                prompt_version=prompt_version, source=JudgeRun.Source.IMPORTED, status=JudgeRun.Status.DONE,
                created_by=created_by, started_at=now, finished_at=now, config_version=asked_with,
            )
        elif asked_with is not None and run.config_version_id is None:
            run.config_version = asked_with
            run.save(update_fields=["config_version"])
        JudgeTaskResult.objects.bulk_create(
            (JudgeTaskResult(run=run, task_id=row.task_id, status=JudgeTaskResult.Status.DONE, reason=row.reason)
             for row in rows),
            batch_size=BATCH_SIZE,
        )
        item_ids = {
            (question_ref, position): pk
            for question_ref, position, pk in RubricItem.objects.filter(
                version=version, question_ref__in={row.question_ref for row in rows}
            ).values_list("question_ref", "position", "pk")
        }
        labels = [
            JudgeLabel(run=run, task_id=row.task_id, rubric_item_id=item_ids[row.question_ref, position], value=value)
            for row in rows
            for position, value in enumerate(row.detail, start=1)
        ]
        JudgeLabel.objects.bulk_create(labels, batch_size=BATCH_SIZE)
        task_send_on_commit("annotation.agreement_report_request", project_id=project.pk)
        task_send_on_commit("annotation.judge_drift_check", run_id=run.pk)
        audit_record(actor=created_by, action=AuditAction.JUDGE_LABELS_IMPORT, project_id=project.pk, objects=[run],
                     now=now, details={"source": source, "run": run.name, "tasks": len(rows), "labels": len(labels),
                                       "skipped": skipped})
    return JudgeImportResult(run=run, created=len(rows), skipped=skipped, labels_created=len(labels))


def _config_version(project: Project, value: object) -> JudgeConfigVersion | None:
    """The project's judge configuration version with id `value`; None for none; DomainError for another."""
    if value in (None, ""):
        return None
    try:
        found = JudgeConfigVersion.objects.filter(pk=int(str(value)), config__project=project).first()
    except (TypeError, ValueError):
        found = None
    if found is None:
        message = "not a judge configuration version of this project"
        raise DomainError(f"config_version: {message}", code="invalid_option",
                          params={"field": "config_version", "message": message},
                          errors=[{"line": None, "field": "config_version", "message": message}])
    return found


def _option(value: str | None, field: str, max_length: int, *, required: bool = False) -> str:
    value = (value or "").strip()
    message = None
    if required and not value:
        message = "required: name the judge run the labels belong to"
    elif len(value) > max_length:
        message = f"expected at most {max_length} characters, got {len(value)}"
    if message:
        raise DomainError(f"{field}: {message}", code="invalid_option", params={"field": field, "message": message},
                          errors=[{"line": None, "field": field, "message": message}])
    return value


def _run_version(*, project: Project, run: JudgeRun | None, judge_model: str,
                 prompt_version: str) -> RubricVersion:
    """The rubric version the labels belong to: the existing run's, or the project's current one."""
    errors = LineErrors()
    if run is None:
        version = rubric_version_current(project)
        if version is None:
            errors.add(None, "run", "the project has no published rubric version yet; import questions first")
        errors.raise_if_any(source="judge labels")
        return version
    if run.source != JudgeRun.Source.IMPORTED:
        errors.add(None, "run", f"{describe(run.name)} is a live judge run; import under another name")
    if judge_model and judge_model != run.judge_model:
        errors.add(None, "judge_model", f"the run {describe(run.name)} was imported with judge model "
                                        f"{describe(run.judge_model)}, not {describe(judge_model)}")
    if prompt_version and prompt_version != run.prompt_version:
        errors.add(None, "prompt_version", f"the run {describe(run.name)} was imported with prompt version "
                                           f"{describe(run.prompt_version)}, not {describe(prompt_version)}")
    errors.raise_if_any(source="judge labels")
    return run.rubric_version


def _rows_validated(*, project: Project, version: RubricVersion, run: JudgeRun | None, data: ImportSource,
                    source: str) -> tuple[list[_Row], int]:
    """The rows to write, and how many rows the run already holds as they are.

    The project's questions, responses and tasks are read up front (a few columns per
    row), so that every line is checked in order and errors come out in line order.
    """
    questions = set(Question.objects.filter(project=project).values_list("external_id", flat=True))
    responses = set(Response.objects.filter(project=project).values_list("question__external_id", "model_name"))
    tasks = {
        (question_ref, model): pk
        for question_ref, model, pk in Task.objects.filter(project=project, rubric_version=version).values_list(
            "response__question__external_id", "response__model_name", "pk")
    }
    item_counts = dict(RubricItem.objects.filter(version=version).values("question_ref")
                       .annotate(n=Count("pk")).values_list("question_ref", "n"))
    stored = _stored_results(run)

    errors = LineErrors()
    rows: list[_Row] = []
    first_line: dict[int, int] = {}
    rows_seen = skipped = 0
    for line, obj in jsonl_objects(data, errors):
        rows_seen += 1
        reader = RowReader(errors, line)
        question_id = reader.text(obj, "question_id", "question_id", max_length=QUESTION_ID_MAX)
        model = reader.text(obj, "model", "model", max_length=MODEL_NAME_MAX)
        detail = _detail_values(reader, obj)
        reason = reader.text(obj, "reason", "reason", required=False, blank=True) or ""
        if reader.failed:
            continue
        task_id = _task_for(reader, question_id, model, questions, responses, tasks, version)
        if task_id is None:
            continue
        expected = item_counts.get(question_id, 0)
        if len(detail) != expected:
            reader.error("detail", f"expected {expected} values (one per rubric item), got {len(detail)}",
                         code=ErrorCode.WRONG_COUNT, params={"expected": expected, "got": len(detail)})
            continue
        if task_id in first_line:
            reader.error("question_id", f"duplicate labels for model {describe(model)} on question "
                                        f"{describe(question_id)} (first on line {first_line[task_id]})")
            continue
        first_line[task_id] = line
        if task_id in stored:
            stored_detail, stored_reason = stored[task_id]
            if stored_detail == detail and stored_reason == reason:
                skipped += 1
            else:
                differs = "detail" if stored_detail != detail else "reason"
                reader.error(differs, f"the run {describe(run.name)} already holds a different {differs} for "
                                      f"model {describe(model)} on question {describe(question_id)}; stored judge "
                                      "labels are never replaced (import under a new run name)")
            continue
        rows.append(_Row(line=line, task_id=task_id, question_ref=question_id, detail=detail, reason=reason))
    if not rows_seen and not errors:
        errors.add(None, None, "the file has no rows; expected one JSON object per line", code=ErrorCode.FILE_NO_ROWS)
    errors.raise_if_any(source=source)
    return rows, skipped


def _detail_values(reader: RowReader, obj: dict[str, Any]) -> list[int] | None:
    if "detail" not in obj:
        reader.error("detail", "missing; expected a list of 0/1 values, one per rubric item")
        return None
    detail = obj["detail"]
    if not isinstance(detail, list) or not detail:
        reader.error("detail", f"expected a non-empty list of 0/1 values, got {describe(detail)}")
        return None
    ok = True
    for i, value in enumerate(detail):
        # true/false and 1.0 are refused: a file that bends the format is not trusted on order either.
        if isinstance(value, bool) or not isinstance(value, int) or value not in (0, 1):
            reader.error(f"detail[{i}]", f"expected 0 or 1, got {describe(value)}", code=ErrorCode.LINE_NOT_BINARY,
                         params={"got": describe(value)})
            ok = False
    return detail if ok else None


def _task_for(reader: RowReader, question_id: str, model: str, questions: set[str],
              responses: set[tuple[str, str]], tasks: dict[tuple[str, str], int],
              version: RubricVersion) -> int | None:
    if question_id not in questions:
        reader.error("question_id", f"unknown question {describe(question_id)}; import the questions first",
                     code=ErrorCode.UNKNOWN_QUESTION, params={"question": describe(question_id)})
        return None
    if (question_id, model) not in responses:
        reader.error("model", f"no response of model {describe(model)} to question {describe(question_id)}; "
                              "import the responses first")
        return None
    task_id = tasks.get((question_id, model))
    if task_id is None:
        reader.error("question_id", f"the response of model {describe(model)} to question {describe(question_id)} "
                                    f"has no task on rubric version {version.number}")
    return task_id


def _stored_results(run: JudgeRun | None) -> dict[int, tuple[list[int], str]]:
    """task id -> (labels in rubric position order, reason) of what the run already holds."""
    if run is None:
        return {}
    reasons = dict(JudgeTaskResult.objects.filter(run=run, status=JudgeTaskResult.Status.DONE)
                   .values_list("task_id", "reason"))
    labels: dict[int, list[int]] = {task_id: [] for task_id in reasons}
    for task_id, value in (JudgeLabel.objects.filter(run=run).order_by("task_id", "rubric_item__position")
                           .values_list("task_id", "value")):
        labels.setdefault(task_id, []).append(value)
    return {task_id: (labels[task_id], reason) for task_id, reason in reasons.items()}
