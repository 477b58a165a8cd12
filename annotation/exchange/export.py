"""The consensus dataset: one row per (complete task, rubric item), as JSONL, CSV or Parquet.

A task is in the export once its consensus is computed (it has ItemConsensus rows);
golden tasks are calibration material, not data, and stay out. Experts appear only by
their pseudonym (`ExpertProfile.pseudonym`), never by account name.

Memory stays flat in the number of rows: tasks are read in keyset-paginated chunks, and
each chunk's consensus rows come from one values() query read with `.iterator()`;
encoders yield bytes as they go. Parquet cannot be written line by line: rows are
buffered into row groups of PARQUET_ROW_GROUP rows, and each finished row group is
yielded as soon as pyarrow writes it (the footer comes last).
"""
import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from django.db.models import Exists, OuterRef

from annotation.models import Assignment, ItemConsensus, Label, Project, Task
from core.errors import DomainError

TASK_CHUNK = 500
ROW_CHUNK = 2000
TEXT_FLUSH_BYTES = 64 * 1024
PARQUET_ROW_GROUP = 10_000

COLUMNS = ["task_id", "question_id", "rubric_item_id", "position", "dimension", "dimension_code", "score", "model",
           "labels", "majority", "zone", "hit_votes", "total_votes", "rubric_version", "judge_label"]
FORMATS = {
    "jsonl": ("application/x-ndjson; charset=utf-8", "jsonl"),
    "csv": ("text/csv; charset=utf-8", "csv"),
    "parquet": ("application/vnd.apache.parquet", "parquet"),
}
PARQUET_SCHEMA = pa.schema([
    ("task_id", pa.int64()),
    ("question_id", pa.string()),
    ("rubric_item_id", pa.string()),
    ("position", pa.int16()),
    ("dimension", pa.string()),
    ("dimension_code", pa.string()),
    ("score", pa.int32()),
    ("model", pa.string()),
    ("labels", pa.map_(pa.string(), pa.int8())),
    ("majority", pa.int8()),
    ("zone", pa.string()),
    ("hit_votes", pa.int16()),
    ("total_votes", pa.int16()),
    ("rubric_version", pa.int32()),
    ("judge_label", pa.int8()),
])


def export_format_check(*, fmt: str) -> tuple[str, str]:
    """(content type, file extension) of a supported export format, else DomainError."""
    if fmt not in FORMATS:
        message = f"expected one of {', '.join(FORMATS)}, got {json.dumps(fmt)}"
        raise DomainError(f"Unknown export format: {message}.",
                          errors=[{"line": None, "field": "format", "message": message}])
    return FORMATS[fmt]


def consensus_rows(*, project: Project, task_chunk: int = TASK_CHUNK) -> Iterator[dict[str, Any]]:
    """The project's consensus rows, ordered by task then rubric item position."""
    has_consensus = ItemConsensus.objects.filter(task=OuterRef("pk"))
    complete = Task.objects.filter(project=project, is_golden=False).filter(Exists(has_consensus)).order_by("pk")
    last_pk = 0
    while True:
        task_ids = list(complete.filter(pk__gt=last_pk).values_list("pk", flat=True)[:task_chunk])
        if not task_ids:
            return
        last_pk = task_ids[-1]
        labels = _labels_by_item(task_ids=task_ids)
        judge = judge_labels_for_tasks(project=project, task_ids=task_ids)
        consensus = (ItemConsensus.objects.filter(task_id__in=task_ids)
                     .order_by("task_id", "rubric_item__position")
                     .values("task_id", "rubric_item_id", "majority", "zone", "hit_votes", "total_votes",
                             "rubric_item__item_key", "rubric_item__position", "rubric_item__score",
                             "rubric_item__dimension__name_zh", "rubric_item__dimension__code",
                             "task__response__model_name", "task__response__question__external_id",
                             "task__rubric_version__number"))
        for c in consensus.iterator(chunk_size=ROW_CHUNK):
            key = (c["task_id"], c["rubric_item_id"])
            yield {
                "task_id": c["task_id"],
                "question_id": c["task__response__question__external_id"],
                "rubric_item_id": c["rubric_item__item_key"],
                "position": c["rubric_item__position"],
                "dimension": c["rubric_item__dimension__name_zh"],
                "dimension_code": c["rubric_item__dimension__code"],
                "score": c["rubric_item__score"],
                "model": c["task__response__model_name"],
                "labels": labels.get(key, {}),
                "majority": c["majority"],
                "zone": c["zone"],
                "hit_votes": c["hit_votes"],
                "total_votes": c["total_votes"],
                "rubric_version": c["task__rubric_version__number"],
                "judge_label": judge.get(key),
            }


def judge_labels_for_tasks(*, project: Project, task_ids: list[int]) -> dict[tuple[int, int], int]:
    """The LLM judge's 0/1 per (task id, rubric item id) for these tasks.

    This is the hook the judge-runs work fills in; until a project has judge runs there
    are no judge labels, and every row's `judge_label` is null.
    """
    return {}


def _labels_by_item(*, task_ids: list[int]) -> dict[tuple[int, int], dict[str, int]]:
    labels: dict[tuple[int, int], dict[str, int]] = defaultdict(dict)
    submitted = (Label.objects.filter(task_id__in=task_ids, assignment__status=Assignment.Status.SUBMITTED)
                 .order_by("task_id", "rubric_item_id", "assignment__slot")
                 .values_list("task_id", "rubric_item_id", "value", "assignment__expert__expert_profile__pseudonym",
                              "assignment_id"))
    for task_id, item_id, value, pseudonym, assignment_id in submitted.iterator(chunk_size=ROW_CHUNK):
        # An account without an expert profile has no pseudonym; the assignment id
        # keeps its labels apart without exposing who it is.
        labels[task_id, item_id][pseudonym or f"assignment-{assignment_id}"] = value
    return labels


UTF8_BOM = "\ufeff"


def consensus_export(*, rows: Iterable[dict[str, Any]], fmt: str) -> Iterator[bytes]:
    """Encode consensus rows as `fmt` (jsonl, csv or parquet), yielding bytes as they are ready."""
    export_format_check(fmt=fmt)
    encoders = {"jsonl": _jsonl_chunks, "csv": _csv_chunks, "parquet": _parquet_chunks}
    return encoders[fmt](rows)


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


def _csv_chunks(rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    buffer = io.StringIO()
    # A UTF-8 byte-order mark first: without it Excel reads the file in the system code page
    # and the Chinese dialogue turns to mojibake. csv readers skip it with encoding="utf-8-sig".
    buffer.write(UTF8_BOM)
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(_csv_value(row[column]) for column in COLUMNS)
        if buffer.tell() >= TEXT_FLUSH_BYTES:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue().encode()


def _csv_value(value: Any) -> Any:
    # CSV has no nesting: the labels travel as a JSON object in one cell, and null as an empty cell.
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return "" if value is None else value


class _ChunkSink(io.RawIOBase):
    """A write-only stream that hands back what pyarrow wrote since the last drain.

    pyarrow asks the stream for its position to record row-group offsets in the
    footer, so the position counts every byte ever written, drained or not.
    """

    def __init__(self) -> None:
        super().__init__()
        self._chunks: list[bytes] = []
        self._position = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        chunk = bytes(data)
        self._chunks.append(chunk)
        self._position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self._position

    def drain(self) -> bytes:
        data = b"".join(self._chunks)
        self._chunks.clear()
        return data


def _parquet_chunks(rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    sink = _ChunkSink()
    writer = pq.ParquetWriter(sink, PARQUET_SCHEMA)
    group: list[dict[str, Any]] = []
    for row in rows:
        group.append({**row, "labels": list(row["labels"].items())})
        if len(group) >= PARQUET_ROW_GROUP:
            writer.write_table(pa.Table.from_pylist(group, schema=PARQUET_SCHEMA))
            group = []
            yield sink.drain()
    if group:
        writer.write_table(pa.Table.from_pylist(group, schema=PARQUET_SCHEMA))
    writer.close()
    yield sink.drain()
