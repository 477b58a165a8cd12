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
from typing import Any

from django.db import transaction

from annotation.audit.services import audit_record
from annotation.exchange.bulk import CopyBuffer, CopyStream, copy_text
from annotation.exchange.jsonl import (
    ImportResult,
    ImportSource,
    LineErrors,
    RowReader,
    describe,
    import_size_check,
    jsonl_rows,
    source_size,
)
from annotation.lock_objects import project_imports_lock
from annotation.models import AuditAction, Project, Question, Response
from annotation.projects.rules import project_check_writable
from annotation.rubric_editing.publishing import tasks_ensure_for_version
from annotation.selectors import rubric_version_current
from core.error_codes import ErrorCode
from core.errors import DomainError
from experts.models import User

MODEL_NAME_MAX = 200


RESPONSE_FIELDS = ["project_id", "question_id", "model_name", "text", "created_at"]
# Rows already stored (by question and model) are compared with the stored text this many at a time.
COMPARE_BATCH = 2000


def responses_import(*, project: Project, data: ImportSource, model: str | None, now: datetime,
                     source: str = "upload", by: User | None = None) -> ImportResult:
    """Import model responses into `project`; `model` names the model for rows without one.

    `data` is the file's bytes or a binary file, read one line at a time. Raises
    DomainError listing every bad line (unknown question, empty response, no model, a
    pair repeated in the file or stored with a different text) and then writes nothing.
    New responses are created at `now`.

    One pass over the file under the project's imports lock: new rows stream to COPY while
    the rest is parsed when the project has no responses yet, and otherwise are encoded into a
    COPY buffer that spills to disk while stored pairs are compared in batches; only the
    (question, model) pairs and their line numbers are kept in memory.
    """
    # Refused before reading the file (a closed project is read-only); checked again under the lock.
    project_check_writable(project)
    import_size_check(size=source_size(data))
    default_model = _default_model(model)
    new = CopyBuffer(model=Response, fields=RESPONSE_FIELDS)
    try:
        with transaction.atomic():
            project_imports_lock(project=project)
            project_check_writable(project)
            stored_pairs = set(Response.objects.filter(project=project).values_list("question_id", "model_name"))
            if stored_pairs:
                # Stored pairs are compared while the file is read, so the new rows wait for one COPY after.
                skipped, question_pks = _parse_file(project=project, data=data, default_model=default_model,
                                                    source=source, now=now, new=new, stored_pairs=stored_pairs)
                created = new.insert()
            else:
                # Nothing to compare (the usual first import of a model's responses): the rows stream
                # to COPY as they are read, and the server's insert overlaps the parsing.
                with CopyStream(model=Response, fields=RESPONSE_FIELDS) as streamed:
                    skipped, question_pks = _parse_file(project=project, data=data, default_model=default_model,
                                                        source=source, now=now, new=streamed, stored_pairs=set())
                created = streamed.count
            current = rubric_version_current(project)
            tasks = tasks_ensure_for_version(project=project, version=current) if created and current else 0
            if created:
                audit_record(actor=by, action=AuditAction.RESPONSES_IMPORT, project_id=project.pk, now=now,
                             object_type="annotation.question", object_ids=sorted(question_pks),
                             details={"source": source, "responses": created, "skipped": skipped,
                                      "tasks": tasks})
    finally:
        new.close()
    return ImportResult(created=created, skipped=skipped, tasks_created=tasks,
                        version=current.number if current else None)


def _default_model(model: str | None) -> str | None:
    if model is None or not model.strip():
        return None
    model = model.strip()
    if len(model) > MODEL_NAME_MAX:
        message = f"expected at most {MODEL_NAME_MAX} characters, got {len(model)}"
        raise DomainError(f"model: {message}", errors=[{"line": None, "field": "model", "message": message}])
    return model


def _parse_file(*, project: Project, data: ImportSource, default_model: str | None, source: str, now: datetime,
                new: CopyBuffer | CopyStream, stored_pairs: set[tuple[int, str]]) -> tuple[int, set[int]]:
    """Validate every line, sending the new responses on; returns (rows stored as is, the new rows' question pks).

    Raises the file's errors once the whole file has been read. With `stored_pairs` empty it
    runs no query after its first (`new` may be a COPY in progress).
    """
    errors = LineErrors()
    question_pks = dict(Question.objects.filter(project=project).values_list("external_id", "pk"))
    first_line: dict[tuple[str, str], int] = {}
    touched: set[int] = set()
    pending: list[tuple[int, int, Any, Any, Any]] = []
    rows_seen = skipped = 0
    project_pk, created_at = project.pk, now.isoformat()
    for line, row, storable in jsonl_rows(data, errors):
        rows_seen += 1
        reader = RowReader(errors, line, storable=storable)
        question_id = reader.text(row, "question_id", "question_id")
        model = reader.text(row, "model", "model", required=False, max_length=MODEL_NAME_MAX) or default_model
        if model is None and not reader.failed:
            reader.error("model", "missing; the row names no model and none was given (--model, or the "
                                  "form field model)")
        text = reader.text(row, "response", "response")
        if reader.failed or model is None or text is None:  # the last two only when it failed
            continue
        if (question_id, model) in first_line:
            errors.add(line, "question_id", f"duplicate response of model {describe(model)} to question "
                                            f"{describe(question_id)} (first on line {first_line[question_id, model]})")
            continue
        first_line[question_id, model] = line
        question_pk = question_pks.get(question_id)
        if question_pk is None:
            errors.add(line, "question_id", f"unknown question {describe(question_id)}; import the questions first",
                       code=ErrorCode.UNKNOWN_QUESTION, params={"question": describe(question_id)})
        elif (question_pk, model) in stored_pairs:
            pending.append((line, question_pk, question_id, model, text))
            if len(pending) >= COMPARE_BATCH:
                skipped += _compare_stored(project=project, rows=pending, errors=errors)
                pending = []
        elif not errors:
            # Once the file has an error nothing will be written: the rest is only validated.
            # One line in COPY's text format, in RESPONSE_FIELDS order (the generic encoding was half the parse).
            new.write_lines(f"{project_pk}\t{question_pk}\t{copy_text(model)}\t{copy_text(text)}\t{created_at}\n", 1)
            touched.add(question_pk)
    if pending:
        skipped += _compare_stored(project=project, rows=pending, errors=errors)
    if not rows_seen and not errors:
        errors.add(None, None, "the file has no rows; expected one JSON object per line", code=ErrorCode.FILE_NO_ROWS)
    errors.raise_if_any(source=source)
    return skipped, touched


def _compare_stored(*, project: Project, rows: list[tuple[int, int, str, str, str]], errors: LineErrors) -> int:
    """Check rows whose (question, model) is already stored; returns how many have the same text."""
    stored = {
        (question_pk, model_name): text
        for question_pk, model_name, text in Response.objects.filter(
            project=project, question_id__in={r[1] for r in rows}, model_name__in={r[3] for r in rows}
        ).values_list("question_id", "model_name", "text")
    }
    identical = 0
    for line, question_pk, question_id, model, text in rows:
        if stored[question_pk, model] == text:
            identical += 1
            continue
        errors.add(line, "response", f"model {describe(model)} already has a different response to question "
                                     f"{describe(question_id)}; a stored response is never replaced")
    return identical
