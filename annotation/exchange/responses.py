"""Importing model responses from JSONL, all or nothing.

Rows are `{"question_id", "model", "response"}`. HeartBench's answer file is accepted
as is: its rows are question rows (dialogue, rubric, ...) plus a `response` field and
no `model`; the extra fields are ignored (the question is already imported) and the
model is named by the caller (`--model` on the command line, the `model` form field in
the API). A row's own `model` wins over the caller's.

A (question, model) pair already imported with the same text is skipped, so
re-importing a file changes nothing; with a different text it is an error, because
experts may already have judged the stored response. Each new response gets a task on
the project's current published rubric version.
"""
from datetime import datetime

from django.db import transaction

from annotation.audit.services import audit_record
from annotation.exchange.jsonl import ImportResult, LineErrors, RowReader, describe, import_size_check, jsonl_objects
from annotation.lock_objects import project_imports_lock
from annotation.models import AuditAction, Project, Question, Response
from annotation.projects.rules import project_check_writable
from annotation.rubric_editing.publishing import tasks_ensure_for_version
from annotation.selectors import rubric_version_current
from core.error_codes import ErrorCode
from core.errors import DomainError
from experts.models import User

MODEL_NAME_MAX = 200
BATCH_SIZE = 2000


def responses_import(*, project: Project, data: bytes, model: str | None, now: datetime,
                     source: str = "upload", by: User | None = None) -> ImportResult:
    """Import model responses into `project`; `model` names the model for rows without one.

    Raises DomainError listing every bad line (unknown question, empty response, no
    model, a pair repeated in the file or stored with a different text) and then
    writes nothing. `now` is accepted for symmetry with the other imports; responses
    carry only their database creation time.
    """
    # Refused before reading the file (a closed project is read-only); checked again under the lock.
    project_check_writable(project)
    import_size_check(size=len(data))
    default_model = _default_model(model)
    rows = _parse_file(data=data, default_model=default_model, source=source)
    with transaction.atomic():
        project_imports_lock(project=project)
        project_check_writable(project)
        new, skipped = _split_new(project=project, rows=rows, source=source)
        Response.objects.bulk_create(
            (Response(project=project, question_id=question_id, model_name=model_name, text=text)
             for _, question_id, model_name, text in new),
            batch_size=BATCH_SIZE,
        )
        current = rubric_version_current(project)
        tasks = tasks_ensure_for_version(project=project, version=current) if new and current else 0
        if new:
            audit_record(actor=by, action=AuditAction.RESPONSES_IMPORT, project_id=project.pk, now=now,
                         object_type="annotation.question", object_ids=sorted({q for _, q, _, _ in new}),
                         details={"source": source, "responses": len(new), "skipped": skipped, "tasks": tasks})
    return ImportResult(created=len(new), skipped=skipped, tasks_created=tasks,
                        version=current.number if current else None)


def _default_model(model: str | None) -> str | None:
    if model is None or not model.strip():
        return None
    model = model.strip()
    if len(model) > MODEL_NAME_MAX:
        message = f"expected at most {MODEL_NAME_MAX} characters, got {len(model)}"
        raise DomainError(f"model: {message}", errors=[{"line": None, "field": "model", "message": message}])
    return model


def _parse_file(*, data: bytes, default_model: str | None, source: str) -> list[tuple[int, str, str, str]]:
    """(line, question id, model, text) per row."""
    errors = LineErrors()
    rows = []
    first_line: dict[tuple[str, str], int] = {}
    rows_seen = 0
    for line, row in jsonl_objects(data, errors):
        rows_seen += 1
        reader = RowReader(errors, line)
        question_id = reader.text(row, "question_id", "question_id")
        model = reader.text(row, "model", "model", required=False, max_length=MODEL_NAME_MAX) or default_model
        if model is None and not reader.failed:
            reader.error("model", "missing; the row names no model and none was given (--model, or the "
                                  "form field model)")
        text = reader.text(row, "response", "response")
        if reader.failed:
            continue
        if (question_id, model) in first_line:
            errors.add(line, "question_id", f"duplicate response of model {describe(model)} to question "
                                            f"{describe(question_id)} (first on line {first_line[question_id, model]})")
            continue
        first_line[question_id, model] = line
        rows.append((line, question_id, model, text))
    if not rows_seen and not errors:
        errors.add(None, None, "the file has no rows; expected one JSON object per line", code=ErrorCode.FILE_NO_ROWS)
    errors.raise_if_any(source=source)
    return rows


def _split_new(*, project: Project, rows: list[tuple[int, str, str, str]],
               source: str) -> tuple[list[tuple[int, int, str, str]], int]:
    """Rows to write as (line, question pk, model, text), and how many are already stored as is."""
    question_pks = dict(Question.objects.filter(project=project, external_id__in={r[1] for r in rows})
                        .values_list("external_id", "pk"))
    stored = {
        (question_pk, model_name): text
        for question_pk, model_name, text in Response.objects.filter(
            project=project, question_id__in=question_pks.values(), model_name__in={r[2] for r in rows}
        ).values_list("question_id", "model_name", "text")
    }
    errors = LineErrors()
    new = []
    for line, question_id, model, text in rows:
        question_pk = question_pks.get(question_id)
        if question_pk is None:
            errors.add(line, "question_id", f"unknown question {describe(question_id)}; import the questions first",
                       code=ErrorCode.UNKNOWN_QUESTION, params={"question": describe(question_id)})
            continue
        stored_text = stored.get((question_pk, model))
        if stored_text is None:
            new.append((line, question_pk, model, text))
        elif stored_text != text:
            errors.add(line, "response", f"model {describe(model)} already has a different response to question "
                                         f"{describe(question_id)}; a stored response is never replaced")
    errors.raise_if_any(source=source)
    return new, len(rows) - len(new)
