"""Inserting many plain rows at once: COPY on PostgreSQL, bulk_create elsewhere.

Written by hand because `bulk_create` on PostgreSQL binds each batch as arrays, and
psycopg escapes every array element in Python: 100,000 rubric items took about 6 s
of client time before the server saw a byte, against about 0.5 s through COPY (the
server's own share, with the immutability trigger and foreign-key checks, is the same
either way). SQLite, the embedded mode, gets plain `bulk_create`.

Rows bypass `save()` and model validation on both paths, as with `bulk_create`; the
tables' constraints and triggers still apply.
"""
import contextlib
import json
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from django.db import connection, models

BATCH_SIZE = 2000


def rows_insert(*, model: type[models.Model], fields: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Insert `rows` (values in the order of `fields`, by attribute name) into `model`'s table; returns the count."""
    if connection.vendor != "postgresql":
        objects = [model(**dict(zip(fields, row, strict=True))) for row in rows]
        model.objects.bulk_create(objects, batch_size=BATCH_SIZE)
        return len(objects)
    meta_fields = [model._meta.get_field(name) for name in fields]
    json_positions = [i for i, field in enumerate(meta_fields) if isinstance(field, models.JSONField)]
    columns = ", ".join(connection.ops.quote_name(field.column) for field in meta_fields)
    statement = f"COPY {connection.ops.quote_name(model._meta.db_table)} ({columns}) FROM STDIN"
    count = 0
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in rows:
            if json_positions:
                row = list(row)
                for i in json_positions:
                    row[i] = json.dumps(row[i], ensure_ascii=False)
            copy.write_row(row)
            count += 1
    return count


_COPY_UNESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
NULL = "\\N"
SPOOL_BYTES = 8 * 1024 * 1024
COPY_CHUNK = 1024 * 1024


def copy_text(text: str) -> str:
    """`text` in COPY's text format: a backslash, and the characters that end a field or a row, escaped.

    Four `str.replace` calls scan in C; `str.translate` with a mapping was four times slower.
    """
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _copy_field(value: Any) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, str):
        return copy_text(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if value == []:
        return "[]"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, list | dict):
        return copy_text(json.dumps(value, ensure_ascii=False))
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


class CopyBuffer:
    """Rows waiting for one COPY, encoded as they come into a file that spills to disk past 8 MB.

    An import validates its whole file before it writes (all-or-nothing), so the rows to
    insert must wait somewhere; here they wait as COPY text, a few bytes over their own
    size, instead of as Python objects (about ten times larger), and the web worker's memory
    stays flat whatever the file's size.
    """

    def __init__(self, *, model: type[models.Model], fields: Sequence[str]) -> None:
        self.model = model
        self.fields = list(fields)
        self.count = 0
        self._file = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, mode="w+b")

    def write_row(self, row: Sequence[Any]) -> None:
        self._file.write(("\t".join(map(_copy_field, row)) + "\n").encode("utf-8"))
        self.count += 1

    def write_lines(self, lines: str, count: int) -> None:
        """`count` rows already in COPY's text format (each ending in a newline; see `copy_text`)."""
        self._file.write(lines.encode("utf-8"))
        self.count += count

    def write_rows(self, rows: Iterable[Sequence[Any]]) -> None:
        """Several rows in one write (the rubric items of one question)."""
        lines = ["\t".join(map(_copy_field, row)) for row in rows]
        if lines:
            self._file.write(("\n".join(lines) + "\n").encode("utf-8"))
            self.count += len(lines)

    def close(self) -> None:
        self._file.close()

    def insert(self) -> int:
        """COPY the buffered rows into the model's table (bulk_create outside PostgreSQL); returns the count."""
        self._file.seek(0)
        if connection.vendor != "postgresql":
            return rows_insert(model=self.model, fields=self.fields, rows=self._decoded())
        meta_fields = [self.model._meta.get_field(name) for name in self.fields]
        columns = ", ".join(connection.ops.quote_name(field.column) for field in meta_fields)
        statement = f"COPY {connection.ops.quote_name(self.model._meta.db_table)} ({columns}) FROM STDIN"
        with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
            while chunk := self._file.read(COPY_CHUNK):
                copy.write(chunk)
        return self.count

    def _decoded(self) -> Iterator[list[Any]]:
        """The rows back as values (the embedded SQLite mode has no COPY)."""
        meta_fields = [self.model._meta.get_field(name) for name in self.fields]
        for line in self._file:
            row: list[Any] = []
            for field, text in zip(meta_fields, line.decode("utf-8").rstrip("\n").split("\t"), strict=True):
                if text == "\\N":
                    row.append(None)
                    continue
                text = re.sub(r"\\(.)", lambda m: _COPY_UNESCAPES[str(m.group(1))], text)
                row.append(json.loads(text) if isinstance(field, models.JSONField) else field.to_python(text))
            yield row


class CopyStream:
    """Rows sent to one COPY as they come, while the caller goes on reading its file.

    The server inserts and indexes what it has received while the client parses the next
    rows, so the two costs overlap instead of adding up (PostgreSQL; elsewhere the rows
    wait in a CopyBuffer and are inserted at the end). Used as a context manager inside
    the transaction; the connection runs no other query until it exits, and an exception
    inside ends the COPY with an error, so the server keeps nothing of it.
    """

    def __init__(self, *, model: type[models.Model], fields: Sequence[str]) -> None:
        self.model = model
        self.fields = list(fields)
        self.count = 0
        self._pending: list[str] = []
        self._pending_chars = 0
        self._stack: contextlib.ExitStack | None = None
        self._copy: Any = None
        self._buffer: CopyBuffer | None = None

    def __enter__(self) -> "CopyStream":
        if connection.vendor != "postgresql":
            self._buffer = CopyBuffer(model=self.model, fields=self.fields)
        return self

    def write_row(self, row: Sequence[Any]) -> None:
        if self._buffer is not None:
            self._buffer.write_row(row)
        else:
            line = "\t".join(map(_copy_field, row)) + "\n"
            self._pending.append(line)
            self._pending_chars += len(line)
            if self._pending_chars >= COPY_CHUNK // 4:
                self._flush()
        self.count += 1

    def write_lines(self, lines: str, count: int) -> None:
        """`count` rows already in COPY's text format (each ending in a newline; see `copy_text`)."""
        if self._buffer is not None:
            self._buffer.write_lines(lines, count)
        else:
            self._pending.append(lines)
            self._pending_chars += len(lines)
            if self._pending_chars >= COPY_CHUNK // 4:
                self._flush()
        self.count += count

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._copy is None:
            # Opened on the first row: a file with nothing new never starts a COPY.
            meta_fields = [self.model._meta.get_field(name) for name in self.fields]
            columns = ", ".join(connection.ops.quote_name(field.column) for field in meta_fields)
            statement = f"COPY {connection.ops.quote_name(self.model._meta.db_table)} ({columns}) FROM STDIN"
            self._stack = contextlib.ExitStack()
            cursor = self._stack.enter_context(connection.cursor())
            self._copy = self._stack.enter_context(cursor.cursor.copy(statement))
        self._copy.write("".join(self._pending).encode("utf-8"))
        self._pending, self._pending_chars = [], 0

    def __exit__(self, exc_type, exc, traceback) -> bool:  # type: ignore[no-untyped-def]
        if self._buffer is not None:
            try:
                if exc_type is None:
                    self._buffer.insert()
            finally:
                self._buffer.close()
            return False
        if exc_type is None:
            self._flush()
        if self._stack is not None:
            return bool(self._stack.__exit__(exc_type, exc, traceback))
        return False


def import_transaction_tune() -> None:
    """Settings for the current import transaction on PostgreSQL (SET LOCAL: they end with it).

    - not `synchronous_commit = off`, though waiting for the WAL flush of a 10,000-question
      import (about 150 MB) is 0.8 s of the request: a PM told "imported" must find the
      questions there after a database crash, so the commit waits for the disk.
    - `work_mem = 256MB`: past gin_pending_list_limit (2 GB since migration 0039, about
      200,000 questions; it was 256 MB) the inserting backend merges the search index's
      pending list itself, in work_mem-sized batches; with the default 4 MB that merge took
      25 s of a 30,000-question import.
    - `default_toast_compression = lz4`: a question's dialogue and search text (3 KB each
      in HeartBench) are compressed by the server as they arrive; lz4 halved the server's
      share of streaming them against the default pglz. Reads decompress either.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL work_mem = '256MB'")
            cursor.execute("SET LOCAL default_toast_compression = lz4")
