"""Importing questions and their rubric items from HeartBench or HealthBench JSONL.

The format is detected per row, so one file may mix both.

HeartBench rows: `question_id`, `dialogue` [{role: A|B, content}], `rubric`
[{dimension, score, content}], `difficulty` (normal|hard, default normal),
`primary_scene`, `secondary_scene` (optional). A dimension is matched against
`rubrics.Dimension` by Chinese name (e.g. 温暖, or the gate 其他), code or English name;
anything else is an error. A null score imports as a gate item (score None).

HealthBench rows: `prompt` [{role: user|assistant|system, content}], `rubrics`
[{criterion, points, tags}], optional `prompt_id` and `example_tags`. They map so:

* roles: user -> A, assistant -> B. System turns are dropped: experts judge the
  conversation, and the dialogue model has no place for instructions to the model.
* question id: `prompt_id`; without one, "hb-" and the first 20 hex digits of the
  SHA-256 of the prompt as canonical JSON, so re-importing the same row gives the same id.
* each rubric: criterion -> content, points -> score (an integer, never null), tags
  kept verbatim in `RubricItem.tags`.
* dimension: from an `axis:<name>` tag. A name that is one of our dimensions (code,
  Chinese or English name) is used as is; HealthBench's own axes map by meaning,
  `communication_quality` -> verbal-expression (言语表达) and `context_awareness` ->
  curiosity (好奇心, HeartBench's "asks about what the user has not said"). Any other
  axis (accuracy, completeness, instruction_following) or no axis tag falls back to
  verbal-expression, the broadest ability about how a reply is written.
* difficulty: a `difficulty:normal|hard` tag in `example_tags`, else normal.
* primary_scene: the first `theme:` tag of `example_tags` (HealthBench's themes are
  its scenes); secondary_scene stays empty.

In both formats the dialogue's last turn must be the user's (A): it becomes
`Question.final_user_turn`, the earlier turns `Question.dialogue`. Rubric items keep
stable ids, `item_key = "<question id>:<position>"` with 1-based positions.

The import is all-or-nothing, in one transaction. The file is read one line at a time
(an upload stays in the temporary file Django spooled it to) and every problem is reported
together (see `annotation.exchange.jsonl`). New questions are COPYed while the rest of the
file is parsed and their rubric items wait as COPY text on disk (`annotation.exchange.bulk`),
so memory holds ids and line numbers, not rows; questions already present with identical
content are skipped, one already present with different content is an error, and any error
rolls back what was sent. The items go into the project's draft rubric version, which is then
published. A file with nothing new creates no version.
"""
import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import orjson
from django.db import transaction

from annotation.audit.services import audit_record
from annotation.exchange.bulk import NULL, CopyBuffer, CopyStream, copy_text, import_transaction_tune
from annotation.exchange.jsonl import (
    INT32,
    ImportResult,
    ImportSource,
    LineErrors,
    RowReader,
    describe,
    import_size_check,
    jsonl_lines,
    jsonl_rows,
    source_size,
)
from annotation.lock_objects import project_imports_lock
from annotation.models import AuditAction, BlindTest, Difficulty, Project, Question
from annotation.projects.rules import project_check_writable
from annotation.rubric_editing.publishing import rubric_draft_get_or_create, rubric_version_publish
from annotation.selectors import rubric_version_current
from core.after_commit import task_send_on_commit
from core.error_codes import ErrorCode
from experts.models import User
from rubrics.models import Dimension, RubricItem, RubricVersion

DIFFICULTIES = frozenset(Difficulty.values)
HEARTBENCH_ROLES = {"A": "A", "B": "B"}
# None: the turn is dropped (see the module docstring).
HEALTHBENCH_ROLES = {"user": "A", "assistant": "B", "system": None}
HEALTHBENCH_AXES = {"communication_quality": "verbal-expression", "context_awareness": "curiosity"}
HEALTHBENCH_DEFAULT_DIMENSION = "verbal-expression"
QUESTION_ID_MAX = 100
SCENE_MAX = 100

# The names a field has in each format, for errors about an existing question.
_FIELD_NAMES = {
    Question.SourceFormat.HEARTBENCH: {"dialogue": "dialogue", "rubric": "rubric", "difficulty": "difficulty",
                                       "primary_scene": "primary_scene", "secondary_scene": "secondary_scene"},
    Question.SourceFormat.HEALTHBENCH: {"dialogue": "prompt", "rubric": "rubrics", "difficulty": "example_tags",
                                        "primary_scene": "example_tags", "secondary_scene": "example_tags"},
}


class ParsedItem(NamedTuple):
    """One rubric item of a row (a named tuple: built 100,000 times for 10,000 questions)."""

    position: int
    dimension_id: int
    score: int | None
    content: str
    tags: tuple[str, ...]

    def signature(self) -> tuple:
        return self.position, self.dimension_id, self.score, self.content, list(self.tags)


@dataclass(frozen=True)
class ParsedQuestion:
    line: int
    id_field: str
    external_id: str
    dialogue: list[dict[str, str]]
    final_user_turn: str
    difficulty: str
    primary_scene: str
    secondary_scene: str
    source_format: str
    items: tuple[ParsedItem, ...]


class DimensionIndex:
    """Dimension ids by Chinese name, code, or (case-insensitively) English name."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        for pk, code, name_zh, name_en in Dimension.objects.values_list("pk", "code", "name_zh", "name_en"):
            self._ids[name_zh] = pk
            self._ids[code.casefold()] = pk
            self._ids[name_en.casefold()] = pk

    def get(self, name: str) -> int | None:
        name = name.strip()
        return self._ids.get(name) or self._ids.get(name.casefold())


QUESTION_FIELDS = ["project_id", "external_id", "dialogue", "final_user_turn", "difficulty", "primary_scene",
                   "secondary_scene", "source_format", "judge_only", "created_at"]
ITEM_FIELDS = ["version_id", "question_ref", "position", "item_key", "dimension_id", "score", "content", "tags"]
# Rows of the file already in the project are compared with the stored questions this many at a time.
COMPARE_BATCH = 500


_MISSING = object()


class _NothingNew(Exception):
    """Every row is already in the project: the draft opened for the import is rolled back."""


def questions_import(*, project: Project, data: ImportSource, now: datetime, source: str = "upload",
                     by: User | None = None) -> ImportResult:
    """Import a HeartBench or HealthBench JSONL file into `project`, all or nothing.

    `data` is the file's bytes or a binary file, read one line at a time. Raises
    DomainError with one entry per problem (`{"line", "field", "message"}`) and writes
    nothing when any line is bad or when a question already exists with different
    content. `source` names the file in the published version's changelog.

    In the transaction that holds the project's imports lock, one pass over the file
    validates every line and streams each new question's rubric items to COPY while the rest
    is parsed (`bulk.CopyStream`: the server's insert and indexing of the items, most of its
    work, overlap the parsing); the questions wait as COPY text that spills to disk
    (`bulk.CopyBuffer`) and go in one COPY after. Only ids and line numbers are kept in memory.
    The board's search rows are left to the follow-up task `annotation.question_search_index`.
    Rows whose question is already in the project are compared with it in a second pass over
    just those lines. Any error rolls everything back.
    """
    # Refused before reading the file (a closed project is read-only); checked again under the lock.
    project_check_writable(project)
    import_size_check(size=source_size(data))
    questions = CopyBuffer(model=Question, fields=QUESTION_FIELDS)
    try:
        with transaction.atomic():
            project_imports_lock(project=project)
            project_check_writable(project)
            import_transaction_tune()
            draft = rubric_draft_get_or_create(project=project)
            # While a blind test is active only its sample goes to experts: a question that arrives
            # later is outside the sample, so it stays judge-only until the PM draws a new one.
            judge_only = BlindTest.objects.filter(project=project, is_active=True).exists()
            with CopyStream(model=RubricItem, fields=ITEM_FIELDS) as items:
                stored_lines = _parse_file(project=project, data=data, source=source, draft=draft, now=now,
                                           questions=questions, items=items, judge_only=judge_only)
            skipped = _compare_stored(project=project, data=data, lines=stored_lines, source=source)
            if not questions.count:
                raise _NothingNew
            # The board's search rows for these questions are written after commit, outside the request.
            task_send_on_commit("annotation.question_search_index")
            created = questions.insert()
            items_created = items.count
            noun = "question" if created == 1 else "questions"
            rubric_version_publish(project=project, version=draft, reason=f"Imported {created} {noun} from {source}",
                                   now=now)
            audit_record(actor=by, action=AuditAction.QUESTIONS_IMPORT, project_id=project.pk, objects=[draft],
                         now=now, details={"source": source, "questions": created, "items": items_created,
                                           "skipped": skipped, "version": draft.number})
    except _NothingNew:
        return ImportResult(created=0, skipped=skipped)
    finally:
        questions.close()
    return ImportResult(created=created, skipped=skipped, items_created=items_created, version=draft.number,
                        judge_only=created if judge_only else 0)


def _parse_file(*, project: Project, data: ImportSource, source: str, draft: RubricVersion, now: datetime,
                questions: CopyBuffer, items: CopyStream, judge_only: bool = False) -> set[int]:
    """Validate every line, sending the new questions on; returns the lines of questions already stored.

    Raises the file's errors (bad lines, duplicates, draft collisions) once the whole file
    has been read. The connection is busy with the COPY meanwhile: everything this needs
    from the database is read before the first row.
    """
    errors = LineErrors()
    dimensions = DimensionIndex()
    existing = set(Question.objects.filter(project=project).values_list("external_id", flat=True))
    # The draft's own items for questions not in the project (a draft started by hand) would collide.
    draft_refs = set(RubricItem.objects.filter(version=draft).values_list("question_ref", flat=True).distinct())
    draft_refs -= existing
    first_line: dict[str, int] = {}
    stored_lines: set[int] = set()
    rows_seen = 0
    for line, row, storable in jsonl_rows(data, errors):
        rows_seen += 1
        question = _parse_row(RowReader(errors, line, storable=storable), row, dimensions)
        if question is None:
            continue
        external_id = question.external_id
        if external_id in first_line:
            errors.add(line, question.id_field, f"duplicate question id {describe(external_id)} "
                                                f"(first on line {first_line[external_id]})",
                       code=ErrorCode.DUPLICATE_QUESTION,
                       params={"question": describe(external_id), "first": first_line[external_id]})
            continue
        first_line[external_id] = line
        if external_id in existing:
            stored_lines.add(line)
        elif external_id in draft_refs:
            errors.add(line, None, f"draft rubric version {draft.number} already has items for question "
                                   f"{describe(external_id)} that is not in the project; remove them from the draft "
                                   "first")
        elif not errors:
            # Once the file has an error nothing will be written: the rest is only validated.
            _send(question, project=project, draft=draft, now=now, questions=questions, items=items,
                  judge_only=judge_only)
    if not rows_seen and not errors:
        errors.add(None, None, "the file has no rows; expected one JSON object per line", code=ErrorCode.FILE_NO_ROWS)
    errors.raise_if_any(source=source)
    return stored_lines


def _send(q: ParsedQuestion, *, project: Project, draft: RubricVersion, now: datetime, questions: CopyBuffer,
          items: CopyStream, judge_only: bool = False) -> None:
    # Both lines are written directly in COPY's text format, since the generic per-value encoding
    # (`CopyBuffer.write_row`) was a third of the client's time; the fields in QUESTION_FIELDS and
    # ITEM_FIELDS order. Difficulty and format are fixed words that need no escaping.
    ref = copy_text(q.external_id)
    questions.write_lines(
        f"{project.pk}\t{ref}\t{copy_text(orjson.dumps(q.dialogue).decode())}\t{copy_text(q.final_user_turn)}\t"
        f"{q.difficulty}\t{copy_text(q.primary_scene)}\t{copy_text(q.secondary_scene)}\t{q.source_format}\t"
        f"{'t' if judge_only else 'f'}\t{now.isoformat()}\n", 1)
    head = f"{draft.pk}\t{ref}\t"
    items.write_lines("".join(
        f"{head}{i.position}\t{ref}:{i.position}\t{i.dimension_id}\t{NULL if i.score is None else i.score}\t"
        f"{copy_text(i.content)}\t{copy_text(json.dumps(list(i.tags), ensure_ascii=False)) if i.tags else '[]'}\n"
        for i in q.items), len(q.items))


def _parse_row(reader: RowReader, row: dict[str, Any], dimensions: DimensionIndex) -> ParsedQuestion | None:
    if {"question_id", "dialogue", "rubric"} & row.keys():
        return _parse_heartbench(reader, row, dimensions)
    if {"prompt", "rubrics", "prompt_id"} & row.keys():
        return _parse_healthbench(reader, row, dimensions)
    reader.error(None, "expected a HeartBench row (question_id, dialogue, rubric) "
                       "or a HealthBench row (prompt, rubrics)")
    return None


def _parse_heartbench(reader: RowReader, row: dict[str, Any], dimensions: DimensionIndex) -> ParsedQuestion | None:
    external_id = reader.text(row, "question_id", "question_id", max_length=QUESTION_ID_MAX)
    turns = _parse_dialogue(reader, row, "dialogue", roles=HEARTBENCH_ROLES)
    items = _heartbench_items_fast(row.get("rubric"), dimensions) if reader.storable else None
    if items is None:
        items = _heartbench_items(reader, row, dimensions)
    difficulty = _difficulty(reader, row.get("difficulty", Difficulty.NORMAL), "difficulty")
    primary = reader.text(row, "primary_scene", "primary_scene", required=False, max_length=SCENE_MAX, blank=True)
    secondary = reader.text(row, "secondary_scene", "secondary_scene", required=False, max_length=SCENE_MAX,
                            blank=True)
    if reader.failed:
        return None
    return ParsedQuestion(reader.line, "question_id", external_id, turns[:-1], turns[-1]["content"], difficulty,
                          primary or "", secondary or "", Question.SourceFormat.HEARTBENCH, tuple(items))


def _heartbench_items_fast(rubric: Any, dimensions: DimensionIndex) -> list[ParsedItem] | None:
    """The items of a rubric in which every item is good, checked inline; None when any is not.

    The same rules as `_heartbench_items` without a path string and three calls per item (a
    third of the parse): a rubric that fails any check is read again by `_heartbench_items`,
    which names each problem. Only for rows known storable (no NUL or surrogate escape).
    """
    if type(rubric) is not list or not rubric:
        return None
    items = []
    for index, raw in enumerate(rubric, start=1):
        if type(raw) is not dict:
            return None
        name, score, content = raw.get("dimension"), raw.get("score", _MISSING), raw.get("content")
        if type(name) is not str or type(content) is not str or not content.strip():
            return None
        dimension_id = dimensions.get(name)
        if dimension_id is None or (score is not None and (type(score) is not int or abs(score) > INT32)):
            return None
        items.append(ParsedItem(index, dimension_id, score, content, ()))
    return items


def _heartbench_items(reader: RowReader, row: dict[str, Any], dimensions: DimensionIndex) -> list[ParsedItem]:
    items = []
    for index, raw in enumerate(reader.object_list(row, "rubric", "rubric", what="rubric items") or []):
        path = f"rubric[{index}]"
        dimension_name = reader.text(raw, "dimension", f"{path}.dimension")
        dimension_id = _dimension(reader, dimensions, dimension_name, f"{path}.dimension")
        ok, score = reader.integer_or_null(raw, "score", f"{path}.score")
        content = reader.text(raw, "content", f"{path}.content")
        if dimension_id is not None and ok and content is not None:
            items.append(ParsedItem(index + 1, dimension_id, score, content, ()))
    return items


def _parse_healthbench(reader: RowReader, row: dict[str, Any], dimensions: DimensionIndex) -> ParsedQuestion | None:
    turns = _parse_dialogue(reader, row, "prompt", roles=HEALTHBENCH_ROLES)
    if "prompt_id" in row and row["prompt_id"] is not None:
        external_id = reader.text(row, "prompt_id", "prompt_id", max_length=QUESTION_ID_MAX)
        id_field = "prompt_id"
    else:
        canonical = json.dumps(row.get("prompt"), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        external_id = "hb-" + hashlib.sha256(canonical.encode()).hexdigest()[:20]
        id_field = "prompt"
    items = []
    for index, raw in enumerate(reader.object_list(row, "rubrics", "rubrics", what="rubrics") or []):
        path = f"rubrics[{index}]"
        content = reader.text(raw, "criterion", f"{path}.criterion")
        score = reader.integer(raw, "points", f"{path}.points")
        tags = reader.string_list(raw, "tags", f"{path}.tags")
        dimension_id = _healthbench_dimension(reader, dimensions, tags or [], f"{path}.tags")
        if content is not None and score is not None and tags is not None and dimension_id is not None:
            items.append(ParsedItem(index + 1, dimension_id, score, content, tuple(tags)))
    example_tags = reader.string_list(row, "example_tags", "example_tags") or []
    difficulty = Difficulty.NORMAL
    for tag in example_tags:
        if tag.startswith("difficulty:"):
            difficulty = _difficulty(reader, tag.removeprefix("difficulty:"), "example_tags")
    scene = next((t.removeprefix("theme:") for t in example_tags if t.startswith("theme:")), "")
    if reader.failed:
        return None
    return ParsedQuestion(reader.line, id_field, external_id, turns[:-1], turns[-1]["content"], difficulty,
                          scene[:SCENE_MAX], "", Question.SourceFormat.HEALTHBENCH, tuple(items))


def _parse_dialogue(reader: RowReader, row: dict[str, Any], key: str, *,
                    roles: dict[str, str | None]) -> list[dict[str, str]]:
    """The turns with roles mapped to A/B; records an error unless the last one is the user's."""
    if reader.storable:
        fast = _dialogue_fast(row.get(key), roles)
        if fast is not None:
            return fast
    raw_turns = reader.object_list(row, key, key, what="turns")
    if raw_turns is None:
        return []
    turns = []
    last_index = None
    expected = " or ".join(f'"{r}"' for r in roles)
    for index, raw in enumerate(raw_turns):
        role = raw.get("role")
        if not isinstance(role, str) or role not in roles:
            reader.error(f"{key}[{index}].role", f"expected {expected}, got {describe(role)}", code=ErrorCode.BAD_ROLE,
                         params={"expected": " / ".join(f'"{r}"' for r in roles), "got": describe(role)})
            continue
        content = reader.text(raw, "content", f"{key}[{index}].content")
        if content is None or roles[role] is None:
            continue
        turns.append({"role": roles[role], "content": content})
        last_index = index
    if reader.failed:
        return []
    user = next(r for r, mapped in roles.items() if mapped == "A")
    if not turns:
        reader.error(key, f'expected at least one "{user}" turn')
    elif turns[-1]["role"] != "A":
        reader.error(f"{key}[{last_index}].role",
                     f'the last turn must be the user\'s ("{user}"), got {describe(raw_turns[last_index]["role"])}')
    return turns


def _dialogue_fast(raw_turns: Any, roles: dict[str, str | None]) -> list[dict[str, str]] | None:
    """The turns of a good dialogue checked inline, as `_parse_dialogue` would return them; None when any
    check fails (it then reads the dialogue again, naming each problem)."""
    if type(raw_turns) is not list:
        return None
    turns = []
    for raw in raw_turns:
        if type(raw) is not dict:
            return None
        role, content = raw.get("role"), raw.get("content")
        if type(role) is not str or role not in roles or type(content) is not str or not content.strip():
            return None
        mapped = roles[role]
        if mapped is not None:
            turns.append({"role": mapped, "content": content})
    return turns if turns and turns[-1]["role"] == "A" else None


def _dimension(reader: RowReader, dimensions: DimensionIndex, name: str | None, path: str) -> int | None:
    if name is None:
        return None
    dimension_id = dimensions.get(name)
    if dimension_id is None:
        reader.error(path, f"unknown dimension {describe(name)}; expected a HeartBench dimension such as "
                           '"温暖" or "其他", or its code', code=ErrorCode.UNKNOWN_DIMENSION,
                     params={"dimension": describe(name)})
    return dimension_id


def _healthbench_dimension(reader: RowReader, dimensions: DimensionIndex, tags: list[str], path: str) -> int | None:
    for tag in tags:
        if tag.startswith("axis:"):
            axis = tag.removeprefix("axis:")
            dimension_id = dimensions.get(axis) or dimensions.get(HEALTHBENCH_AXES.get(axis, ""))
            if dimension_id is not None:
                return dimension_id
    dimension_id = dimensions.get(HEALTHBENCH_DEFAULT_DIMENSION)
    if dimension_id is None:
        reader.error(path, f"the default dimension {HEALTHBENCH_DEFAULT_DIMENSION!r} is missing from the taxonomy")
    return dimension_id


def _difficulty(reader: RowReader, value: Any, path: str) -> str:
    if not isinstance(value, str) or value not in DIFFICULTIES:
        reader.error(path, f'expected "normal" or "hard", got {describe(value)}', code=ErrorCode.BAD_DIFFICULTY,
                     params={"got": describe(value)})
        return Difficulty.NORMAL
    return value


def _compare_stored(*, project: Project, data: ImportSource, lines: set[int], source: str) -> int:
    """Compare the file's rows on `lines` (questions the project has) with the stored ones; returns
    how many are identical, or raises listing those that differ.

    A second pass over the file that parses only those lines, compared COMPARE_BATCH at a time.
    """
    if not lines:
        return 0
    errors = LineErrors()
    dimensions = DimensionIndex()
    batch: list[ParsedQuestion] = []
    identical = 0
    for line, raw in jsonl_lines(data, LineErrors()):
        if line not in lines:
            continue
        question = _parse_row(RowReader(errors, line), json.loads(raw), dimensions)
        if question is not None:
            batch.append(question)
        if len(batch) >= COMPARE_BATCH:
            identical += _compare_batch(project=project, parsed=batch, errors=errors)
            batch = []
    if batch:
        identical += _compare_batch(project=project, parsed=batch, errors=errors)
    errors.raise_if_any(source=source)
    return identical


def _compare_batch(*, project: Project, parsed: list[ParsedQuestion], errors: LineErrors) -> int:
    """Check questions the project already has against the file; returns how many are identical.

    An existing question is compared with the file in everything the file sets; its
    rubric items are those of the current published version.
    """
    stored = {
        row["external_id"]: row
        for row in Question.objects.filter(project=project, external_id__in=[q.external_id for q in parsed])
        .values("external_id", "dialogue", "final_user_turn", "difficulty", "primary_scene", "secondary_scene")
    }
    stored_items: dict[str, list[tuple]] = defaultdict(list)
    current = rubric_version_current(project)
    if current is not None:
        for ref, *signature in (RubricItem.objects.filter(version=current, question_ref__in=list(stored))
                                .order_by("question_ref", "position")
                                .values_list("question_ref", "position", "dimension_id", "score", "content", "tags")):
            stored_items[ref].append(tuple(signature))
    identical = 0
    for question in parsed:
        differs = _first_difference(question, stored[question.external_id], stored_items[question.external_id])
        if differs is None:
            identical += 1
            continue
        field = _FIELD_NAMES[question.source_format][differs]
        errors.add(question.line, field,
                   f"question {describe(question.external_id)} already exists with different content "
                   f"({differs}); edit rubric items through a draft version")
    return identical


def _first_difference(question: ParsedQuestion, stored: dict[str, Any], items: list[tuple]) -> str | None:
    if stored["dialogue"] != question.dialogue or stored["final_user_turn"] != question.final_user_turn:
        return "dialogue"
    if items != [item.signature() for item in question.items]:
        return "rubric"
    for field in ("difficulty", "primary_scene", "secondary_scene"):
        if stored[field] != getattr(question, field):
            return field
    return None
