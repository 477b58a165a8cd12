"""Encoders of the consensus dataset: JSONL, CSV, Parquet, HeartBench questions, a Hugging Face layout,
and the audit JSONL of rejected submissions' labels.

Each encoder is a generator of bytes, so a download streams and a worker writes a file
chunk by chunk; none holds more than one Parquet row group (PARQUET_ROW_GROUP rows).

CSV has no nesting: the dialogue, the labels and the judge runs travel as JSON in one
cell each (`labels` = `[{"expert", "label", "submitted_at", "note"}, ...]`), which a
spreadsheet shows and any language parses, where one column per panel seat would
change shape with the overlap. Text cells that a spreadsheet would read as a formula
(starting with = + - @, a tab or a carriage return) get a leading apostrophe.
"""
import csv
import io
import json
import zipfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from django.conf import settings

from annotation.exchange.export import COLUMNS, ExportFilters, consensus_rows, export_tasks
from annotation.models import AgreementReport, Assignment, Label, Project, Question
from core.errors import DomainError
from rubrics.models import RubricItem

TEXT_FLUSH_BYTES = 64 * 1024
PARQUET_ROW_GROUP = 10_000
UTF8_BOM = "\ufeff"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

FORMATS = {
    "jsonl": ("application/x-ndjson; charset=utf-8", "jsonl"),
    "csv": ("text/csv; charset=utf-8", "csv"),
    "parquet": ("application/vnd.apache.parquet", "parquet"),
    "heartbench": ("application/x-ndjson; charset=utf-8", "heartbench.jsonl"),
    "hf": ("application/zip", "hf.zip"),
    "audit": ("application/x-ndjson; charset=utf-8", "audit.jsonl"),
}
ROW_FORMATS = ("jsonl", "csv", "parquet")

_TURN = pa.struct([("role", pa.string()), ("content", pa.string())])
_LABEL = pa.struct([("expert", pa.string()), ("label", pa.int8()), ("submitted_at", pa.string()),
                    ("note", pa.string()), ("first_label", pa.int8()), ("revised_label", pa.int8()),
                    ("revision_reason", pa.string())])
_JUDGE = pa.struct([("run", pa.string()), ("judge_model", pa.string()), ("label", pa.int8()),
                    ("reason", pa.string())])
_TYPES = {
    "task_id": pa.int64(), "question_id": pa.string(), "dialogue": pa.list_(_TURN), "final_user_turn": pa.string(),
    "response_text": pa.string(), "model": pa.string(), "rubric_item_id": pa.string(), "position": pa.int16(),
    "item_text": pa.string(), "dimension": pa.string(), "dimension_code": pa.string(), "score": pa.int32(),
    "rubric_version": pa.int32(), "labels": pa.list_(_LABEL), "hit_votes": pa.int16(), "total_votes": pa.int16(),
    "majority": pa.int8(), "zone": pa.string(), "provenance": pa.string(), "judge_label": pa.int8(),
    "judge_reason": pa.string(), "judge_runs": pa.list_(_JUDGE), "labels_used": pa.string(),
}
PARQUET_SCHEMA = pa.schema([(name, _TYPES[name]) for name in COLUMNS])
# The Hugging Face layout keeps each question once, in its own file.
HF_ROW_SCHEMA = pa.schema([(name, _TYPES[name]) for name in COLUMNS if name != "dialogue"])
QUESTION_SCHEMA = pa.schema([
    ("question_id", pa.string()), ("dialogue", pa.list_(_TURN)), ("final_user_turn", pa.string()),
    ("difficulty", pa.string()), ("primary_scene", pa.string()), ("secondary_scene", pa.string()),
    ("rubric", pa.list_(pa.struct([("dimension", pa.string()), ("score", pa.int32()), ("content", pa.string())]))),
])


def export_format_check(*, fmt: str) -> tuple[str, str]:
    """(content type, file extension) of a supported export format, else DomainError."""
    if fmt not in FORMATS:
        message = f"expected one of {', '.join(FORMATS)}, got {json.dumps(fmt)}"
        raise DomainError(f"Unknown export format: {message}.",
                          errors=[{"line": None, "field": "format", "message": message}])
    return FORMATS[fmt]


def consensus_export(*, rows: Iterable[dict[str, Any]], fmt: str) -> Iterator[bytes]:
    """Encode rows as `fmt` (jsonl, csv or parquet), yielding bytes as they are ready."""
    export_format_check(fmt=fmt)
    encoders = {"jsonl": _consensus_jsonl_chunks, "csv": _csv_chunks, "parquet": _parquet_chunks}
    if fmt not in encoders:
        raise DomainError(f"{fmt} is not a row format; use dataset_export.")
    return encoders[fmt](rows)


def dataset_export(*, project: Project, filters: ExportFilters, fmt: str, snapshot_id: str,
                   counter: Callable[[int], None] | None = None,
                   progress: Callable[[int], None] | None = None) -> Iterator[bytes]:
    """Every format from one call: the bytes of the export; `counter(n)` gets the row (or question) count."""
    export_format_check(fmt=fmt)
    if fmt == "heartbench":
        return _counted(_jsonl_chunks(heartbench_rows(project=project, filters=filters)), counter)
    if fmt == "audit":
        return _counted(_jsonl_chunks(audit_rows(project=project, filters=filters)), counter)
    if fmt == "hf":
        return _hf_chunks(project=project, filters=filters, snapshot_id=snapshot_id, counter=counter,
                          progress=progress)
    rows = _Counter(consensus_rows(project=project, filters=filters, progress=progress))
    return _counted(consensus_export(rows=rows, fmt=fmt), counter, rows)


class _Counter:
    def __init__(self, rows: Iterable[dict[str, Any]]) -> None:
        self._rows = rows
        self.count = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for row in self._rows:
            self.count += 1
            yield row


def _counted(chunks: Iterator[bytes], counter: Callable[[int], None] | None,
             rows: _Counter | None = None) -> Iterator[bytes]:
    lines = 0
    for chunk in chunks:
        if rows is None:
            lines += chunk.count(b"\n")
        yield chunk
    if counter is not None:
        counter(rows.count if rows is not None else lines)


# The leading columns that are the same on every row of a task: encoded once per task.
TASK_COLUMNS = ("task_id", "question_id", "dialogue", "final_user_turn", "response_text", "model")


def _consensus_jsonl_chunks(rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """JSONL of consensus rows, encoded by orjson, each task's leading columns (the dialogue above all) once.

    A line is the task's cached `{"task_id":…,…,"model":…` joined to the rest of the
    row's object, so every line is the same JSON, in the same key order, that encoding
    the whole row would give; the dialogue was most of the bytes and most of the time.
    orjson (a maintained C extension) writes UTF-8 directly and is several times faster
    than the standard encoder on these rows; it writes no space after separators.
    """
    buffer = bytearray()
    task_id, head = None, b""
    for row in rows:
        if row["task_id"] != task_id or not head:
            task_id = row["task_id"]
            head = orjson.dumps({key: row[key] for key in TASK_COLUMNS if key in row})[:-1]
        rest = orjson.dumps({key: value for key, value in row.items() if key not in TASK_COLUMNS})
        buffer += head
        buffer += b","
        buffer += rest[1:]
        buffer += b"\n"
        if len(buffer) >= TEXT_FLUSH_BYTES:
            yield bytes(buffer)
            buffer = bytearray()
    if buffer:
        yield bytes(buffer)


def _jsonl_chunks(rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    buffer = io.StringIO()
    for row in rows:
        buffer.write(json.dumps(row, ensure_ascii=False))
        buffer.write("\n")
        if buffer.tell() >= TEXT_FLUSH_BYTES:
            yield buffer.getvalue().encode()
            buffer = io.StringIO()
    if buffer.tell():
        yield buffer.getvalue().encode()


def audit_rows(*, project: Project, filters: ExportFilters) -> Iterator[dict[str, Any]]:
    """The labels of rejected submissions, one row each, with who rejected them, when and why.

    They are kept out of every consensus, report and dataset row (`Label.objects.counted()`);
    this audit export is the one place they appear. The rubric version, model and dimension
    filters apply; zone and completion describe consensus, which these labels are not part of.
    """
    labels = (Label.objects.filter(task__project=project, assignment__status=Assignment.Status.REJECTED)
              .order_by("task_id", "rubric_item__position", "pk"))
    if filters.rubric_version is not None:
        labels = labels.filter(task__rubric_version__number=filters.rubric_version)
    if filters.model:
        labels = labels.filter(task__response__model_name=filters.model)
    if filters.dimension:
        labels = labels.filter(rubric_item__dimension__code=filters.dimension)
    fields = ("task_id", "task__response__question__external_id", "task__response__model_name",
              "task__rubric_version__number", "rubric_item__item_key", "assignment__expert__expert_profile__pseudonym",
              "assignment_id", "value", "note", "assignment__submitted_at", "assignment__rejected_at",
              "assignment__rejected_reason", "assignment__rejected_text", "assignment__rejected_by__username")
    for (task_id, question_id, model, version, item_key, pseudonym, assignment_id, value, note, submitted_at,
         rejected_at, reason, text, rejected_by) in labels.values_list(*fields).iterator(chunk_size=5000):
        yield {"task_id": task_id, "question_id": question_id, "model": model, "rubric_version": version,
               "rubric_item_id": item_key, "expert": pseudonym or f"assignment-{assignment_id}", "label": value,
               "note": note, "submitted_at": submitted_at.isoformat() if submitted_at else None,
               "rejected_at": rejected_at.isoformat() if rejected_at else None, "rejected_reason": reason,
               "rejected_text": text, "rejected_by": rejected_by}


def csv_cell(value: Any) -> Any:
    """One CSV cell: nested values as JSON, null as empty, formula-looking text behind an apostrophe."""
    if isinstance(value, (dict, list)):
        value = json.dumps(value, ensure_ascii=False)
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _csv_chunks(rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    buffer = io.StringIO()
    # A UTF-8 byte-order mark first: without it Excel reads the file in the system code page
    # and the Chinese dialogue turns to mojibake. csv readers skip it with encoding="utf-8-sig".
    buffer.write(UTF8_BOM)
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(csv_cell(row[column]) for column in COLUMNS)
        if buffer.tell() >= TEXT_FLUSH_BYTES:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue().encode()


class _ChunkSink(io.RawIOBase):
    """A write-only stream that hands back what was written since the last drain.

    pyarrow and zipfile ask the stream for its position (row-group offsets, entry
    offsets), so the position counts every byte ever written, drained or not.
    """

    def __init__(self, target: Any = None) -> None:
        super().__init__()
        self._chunks: list[bytes] = []
        self._position = 0
        self._target = target

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        chunk = bytes(data)
        if self._target is not None:
            self._target.write(chunk)
        else:
            self._chunks.append(chunk)
        self._position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self._position

    def drain(self) -> bytes:
        data = b"".join(self._chunks)
        self._chunks.clear()
        return data


def _parquet_groups(rows: Iterable[dict[str, Any]], schema: pa.Schema, sink: Any,
                    group_rows: int = PARQUET_ROW_GROUP) -> Iterator[int]:
    """Write rows to `sink` as Parquet, yielding the rows written so far after each row group."""
    writer = pq.ParquetWriter(sink, schema)
    group: list[dict[str, Any]] = []
    written = 0
    for row in rows:
        group.append(row)
        if len(group) >= group_rows:
            writer.write_table(pa.Table.from_pylist(group, schema=schema))
            written += len(group)
            group = []
            yield written
    if group:
        writer.write_table(pa.Table.from_pylist(group, schema=schema))
        written += len(group)
    writer.close()
    yield written


def _parquet_chunks(rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    sink = _ChunkSink()
    for _written in _parquet_groups(rows, PARQUET_SCHEMA, sink):
        yield sink.drain()


def heartbench_rows(*, project: Project, filters: ExportFilters) -> Iterator[dict[str, Any]]:
    """The exported tasks' questions as HeartBench rows, each with the rubric of its newest exported version.

    `questions_import` reads these back to the same questions: full dialogue ending in
    the user's turn, rubric items in position order with dimension by Chinese name.
    """
    newest: dict[int, int] = {}
    for question_id, version_id in (export_tasks(project=project, filters=filters).order_by()
                                    .values_list("response__question_id", "rubric_version_id").distinct()
                                    .iterator(chunk_size=5000)):
        newest[question_id] = max(version_id, newest.get(question_id, 0))
    ids = sorted(newest)
    for start in range(0, len(ids), 500):
        questions = list(Question.objects.filter(pk__in=ids[start:start + 500]).order_by("external_id"))
        items: dict[tuple[int, str], list[dict[str, Any]]] = {}
        for item in (RubricItem.objects.filter(version_id__in={newest[q.pk] for q in questions},
                                               question_ref__in=[q.external_id for q in questions])
                     .order_by("position").values("version_id", "question_ref", "dimension__name_zh", "score",
                                                  "content")):
            items.setdefault((item["version_id"], item["question_ref"]), []).append(
                {"dimension": item["dimension__name_zh"], "score": item["score"], "content": item["content"]})
        for q in questions:
            yield {"question_id": q.external_id, "dialogue": q.full_dialogue(),
                   "rubric": items.get((newest[q.pk], q.external_id), []), "difficulty": q.difficulty,
                   "primary_scene": q.primary_scene, "secondary_scene": q.secondary_scene}


def _hf_chunks(*, project: Project, filters: ExportFilters, snapshot_id: str,
               counter: Callable[[int], None] | None, progress: Callable[[int], None] | None) -> Iterator[bytes]:
    sink = _ChunkSink()
    versions: set[int] = set()

    def rows() -> Iterator[dict[str, Any]]:
        for row in consensus_rows(project=project, filters=filters, with_dialogue=False, progress=progress):
            versions.add(row["rubric_version"])
            yield row

    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        counts = {"consensus": 0, "questions": 0}
        with archive.open("data/consensus.parquet", "w", force_zip64=True) as entry:
            for counts["consensus"] in _parquet_groups(rows(), HF_ROW_SCHEMA, _ChunkSink(entry)):
                yield sink.drain()
        with archive.open("data/questions.parquet", "w", force_zip64=True) as entry:
            questions = (_question_record(q) for q in heartbench_rows(project=project, filters=filters))
            # A question (whole dialogue and rubric) weighs about ten rows: smaller groups keep memory flat.
            for counts["questions"] in _parquet_groups(questions, QUESTION_SCHEMA, _ChunkSink(entry),
                                                       group_rows=PARQUET_ROW_GROUP // 10):
                yield sink.drain()
        card = dataset_card(project=project, filters=filters, snapshot_id=snapshot_id,
                            counts=counts,
                            versions=sorted(versions))
        archive.writestr("README.md", card)
    yield sink.drain()
    if counter is not None:
        counter(counts["consensus"])


def _question_record(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "final_user_turn": row["dialogue"][-1]["content"], "dialogue": row["dialogue"][:-1]}


def _agreement_summary(project: Project) -> dict[str, Any] | None:
    report = (AgreementReport.objects.filter(project=project, status=AgreementReport.Status.DONE)
              .order_by("-computed_at", "-pk").first())
    if report is None:
        return None
    payload = report.payload or {}
    summary: dict[str, Any] = {"report_id": report.pk, "computed_at": payload.get("computed_at"),
                               "labels_used": payload.get("labels_used", "first")}
    judge = (payload.get("judge") or {}).get("overall")
    if judge:
        summary["judge_vs_majority"] = {key: judge.get(key) for key in
                                        ("n", "agreement", "agreement_ci", "kappa", "kappa_ci")}
        if payload.get("judge_run"):
            summary["judge_vs_majority"]["judge_run"] = payload["judge_run"].get("name")
    panel = (payload.get("panel") or {}).get("overall")
    if panel:
        summary["experts"] = {key: panel.get(key) for key in
                              ("n", "percent_agreement", "fleiss_kappa", "krippendorff_alpha", "unanimous", "split",
                               "tied")
                              if key in panel}
    return summary


def dataset_card(*, project: Project, filters: ExportFilters, snapshot_id: str, counts: dict[str, int],
                 versions: list[int]) -> str:
    """README.md of the Hugging Face layout: YAML front matter for the Hub, then a short description."""
    meta = {
        "license": settings.RUBRICA_EXPORT_LICENSE,
        "language": ["zh"],
        "pretty_name": project.name,
        "configs": [
            {"config_name": "consensus", "data_files": "data/consensus.parquet", "default": True},
            {"config_name": "questions", "data_files": "data/questions.parquet"},
        ],
        "rubrica": {
            "snapshot_id": snapshot_id,
            "project_id": project.pk,
            "rubric_version": filters.rubric_version if filters.rubric_version is not None else versions,
            "filters": filters.as_json(),
            "row_counts": counts,
            "labels_used": str(project.consensus_labels),
            "agreement": _agreement_summary(project),
        },
    }
    front = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False)
    return (f"---\n{front}---\n\n# {project.name}\n\n"
            "Expert labels on rubric items of model replies, one row per reply and rubric item "
            "(`consensus`), with each question's dialogue and rubric once (`questions`, joined on `question_id`).\n"
            "Experts appear by pseudonym only. `zone` is unanimous, split, tied or single; a tied item has no "
            "majority. `judge_runs` holds each LLM judge run's label and reason. `labels_used` says which expert "
            "labels the votes count: `first` (as submitted) or `revised` (after the judge's reveal); each label keeps "
            "`first_label`, `revised_label` and `revision_reason`.\n")
