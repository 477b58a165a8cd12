"""One consistent read for a whole export, and its progress told outside that read.

An export of 100,000 rows takes seconds to minutes, while experts keep submitting and
PMs keep rejecting. Read chunk by chunk under READ COMMITTED, a task whose labels
changed between two chunks could appear half old, half new, and the row count would
match no moment of the database. `consistent_read` runs the whole export in one
REPEATABLE READ, READ ONLY transaction on PostgreSQL: every query sees the database as
it was at the first one, and the transaction's snapshot (`pg_current_snapshot()`:
xmin:xmax:in-progress ids) is recorded on the export as `db_snapshot`. SQLite (the
embedded `make run`) has one writer at a time and a transaction there reads one
state already; it records "sqlite".

Inside that transaction nothing can be written, and nothing written would be seen by
others before it ends, so a worker reports progress through the cache
(`export_progress_set`), which the job page and the API read (`export_progress_get`).
"""
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.cache import cache
from django.db import connection, transaction

PROGRESS_TTL_S = 2 * 60 * 60


@contextmanager
def consistent_read() -> Iterator[str]:
    """A transaction in which every read sees one state of the database; yields its snapshot text.

    Called inside an open transaction (a test's, a caller's), it joins it: the isolation
    level can only be set as a transaction's first statement, so that caller's
    transaction decides what is seen.
    """
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if connection.vendor != "postgresql":
            yield connection.vendor
            return
        with connection.cursor() as cursor:
            if outermost:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cursor.execute("SELECT pg_current_snapshot()::text")
            snapshot = cursor.fetchone()[0]
        yield snapshot


def _key(job_id: int) -> str:
    return f"rubrica:export-progress:{job_id}"


def export_progress_set(job_id: int, done: int) -> None:
    cache.set(_key(job_id), int(done), PROGRESS_TTL_S)


def export_progress_get(job_id: int, default: int) -> int:
    value = cache.get(_key(job_id))
    return default if value is None else int(value)


def export_progress_clear(job_id: int) -> None:
    cache.delete(_key(job_id))
