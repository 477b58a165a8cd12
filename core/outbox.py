"""The outbox's worker side: a finished task marks its row done; the sweep sends what is left.

A row is done once its task succeeded (`task_postrun` with state SUCCESS, in the worker,
before the late ack). A task that is retried keeps its id, so the row waits for the last
try. A row not done by its `next_check_at` is sent again by `outbox_sweep` (beat, every
minute) with the same message id, at most `RUBRICA_OUTBOX_MAX_ATTEMPTS` times; one whose
first send failed (broker down) is due at once. Every task sent through the outbox is
idempotent, so the rare double delivery (a slow task overtaken by the sweep) is harmless.

A batch of follow-up work (`core.follow_ups_run`, from `core.after_commit.follow_ups_batched`)
marks its own row: each of its tasks is counted on the row in the transaction of the task's
writes, and the last one sets `done_at`, so a second delivery runs only what had not run.
Batch rows are run by a drain (`follow_ups_drain`), one message for as many rows as are
pending, or one by one when the sweep sends them again. A drain runs the untouched rows of each
look together, in one transaction that marks them all done, and a `coalesce` task (one that brings
something up to date, such as an expert's tier rules) once for all of them; a row that was half run,
or a look in which a task fails, goes step by step as above.
"""
import json
import logging
import time
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from celery import current_app, states
from celery.signals import task_postrun
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from core.after_commit import (
    FOLLOW_UPS_TASK,
    _remaining_s,
    drain_queued_flag,
    drain_queued_flag_renew,
    follow_ups_drain_queue,
    outbox_retry_after,
    task_send,
    task_send_on_commit,
)
from core.models import OUTBOX_ID_PREFIX, OutboxTask
from core.prepared import Prepared

logger = logging.getLogger(__name__)

SWEEP_BATCH = 500
PURGE_BATCH = 5000


def outbox_row_id(task_id: str | None) -> int | None:
    """The outbox row a Celery task id names, or None for a message sent without the outbox."""
    if not task_id or not task_id.startswith(OUTBOX_ID_PREFIX):
        return None
    tail = task_id[len(OUTBOX_ID_PREFIX):]
    return int(tail) if tail.isdigit() else None


def outbox_mark_done(*, task_id: str | None, now: datetime) -> bool:
    """Mark the row of task `task_id` done; False when it names no pending row (idempotent)."""
    row_id = outbox_row_id(task_id)
    if row_id is None:
        return False
    return OutboxTask.objects.filter(pk=row_id, done_at__isnull=True).update(done_at=now) > 0


@task_postrun.connect(dispatch_uid="core.outbox_mark_done")  # type: ignore[untyped-decorator]
def _on_task_postrun(sender: Any = None, task_id: str | None = None, state: str | None = None,
                     **_kwargs: Any) -> None:
    if state != states.SUCCESS or outbox_row_id(task_id) is None or getattr(sender, "name", "") == FOLLOW_UPS_TASK:
        return
    try:
        outbox_mark_done(task_id=task_id, now=timezone.now())
    except DatabaseError:
        # The row stays pending and the sweep sends it once more: harmless for an idempotent task.
        logger.warning("outbox row not marked done", extra={"task_id": task_id}, exc_info=True)


def follow_ups_run(*, steps: list[list[Any]], task_id: str | None, now: datetime, skip_locked: bool = False) -> int:
    """Run a batch's tasks (`[name, kwargs]` pairs) in order, each once; returns how many ran here.

    Each task runs in its own short transaction (no task's locks wait for the next task),
    which also counts it on the outbox row (`task_id` names it): the row is locked, a task
    already counted is skipped, and the count commits with the task's writes. So a
    redelivery (or the sweep overtaking a slow worker) starts after the last task that
    committed, and a worker killed half-way leaves the task it was running undone and
    uncounted. A task that fails for a reason other than the database's is rolled back
    (its count too), then counted and queued on its own outbox row, where it is retried and swept like any
    other task, so one failing task does not hold the others back. A transient database
    error fails the batch, which is retried from where it stopped. With `skip_locked` (a drain)
    a row another worker is running is left to it: the batch returns at once.
    """
    row_id = outbox_row_id(task_id)
    ran = 0
    for index, (name, kwargs) in enumerate(steps):
        step_due = partial(_step_due, row_id=row_id, index=index, last=index == len(steps) - 1, now=now,
                           skip_locked=skip_locked)
        try:
            with transaction.atomic():
                # The task is counted before it runs, in its transaction: an error (the task's or
                # the commit's) takes the count back with the task's writes.
                due = step_due()
                if due == STOP:
                    return ran
                if due == RUN:
                    current_app.tasks[name].run(**kwargs)
                    ran += 1
        except (OperationalError, InterfaceError):
            raise
        except Exception:  # noqa: BLE001 - one task's bug: it goes on alone, with its own retries
            logger.exception("follow-up task failed in its batch; queued on its own", extra={"task": name})
            # Its transaction was rolled back whole (no savepoint per task: two round trips each, on every
            # step of every batch, for the rare failure); the step is counted and queued alone now.
            with transaction.atomic():
                due = step_due()
                if due == STOP:
                    return ran
                if due == RUN:
                    task_send_on_commit(name, **kwargs)
    return ran


RUN, SKIP, STOP = "run", "skip", "stop"


def _step_due(*, row_id: int | None, index: int, last: bool, now: datetime, skip_locked: bool) -> str:
    """Whether step `index` of the batch row is to run in this transaction (RUN: it is counted now),
    ran in an earlier delivery (SKIP), or the batch stops here (STOP: the row is done, gone, or run by
    another worker). A batch without a row always runs its steps."""
    if row_id is None:
        return RUN
    state = _row_claim_step(row_id, index=index, last=last, now=now, skip_locked=skip_locked)
    if state is None or state[1] is not None:
        return STOP  # done (a done row is purged after a day), or being run by another worker
    return SKIP if state[0] > index else RUN


# On PostgreSQL the lock also switches the step's transaction to asynchronous commit (for that
# transaction only): it does not wait for the disk. A database crash can then lose the last
# fraction of a second of follow-up work, but the count on the row goes with it (same
# transaction), and the row itself was written by the request's durable commit: the sweep
# delivers the batch again and the lost tasks run again. Nothing a user sent waits on it.
# The row is locked, read as it was, and counted one step further (when that step is the one to
# run) in one statement: each step of a batch costs one round trip for its bookkeeping.
_STEP_CLAIM_SQL = """WITH locked AS (
    SELECT id, steps_done, done_at FROM {table} WHERE id = %(row_id)s FOR UPDATE{skip}
), counted AS (
    UPDATE {table} SET steps_done = %(next)s, done_at = %(done_at)s FROM locked
    WHERE {table}.id = locked.id AND locked.done_at IS NULL AND locked.steps_done <= %(index)s
)
SELECT steps_done, done_at, set_config('synchronous_commit', 'off', true) FROM locked"""


def _row_claim_step(row_id: int, *, index: int, last: bool, now: datetime,
                    skip_locked: bool = False) -> tuple[int, datetime | None] | None:
    """Lock the batch row until the transaction ends and return its (steps_done, done_at) as they were;
    unless step `index` ran already (or the row is done), count it as run (and the row done when it is
    the last). None when the row is gone (or, with `skip_locked`, locked by another transaction)."""
    if connection.vendor != "postgresql":
        state = (OutboxTask.objects.select_for_update(skip_locked=skip_locked).filter(pk=row_id)
                 .values_list("steps_done", "done_at").first())
        if state is not None and state[1] is None and state[0] <= index:
            OutboxTask.objects.filter(pk=row_id).update(steps_done=index + 1, done_at=now if last else None)
        return state
    with connection.cursor() as cursor:
        sql = _STEP_CLAIM_SQL.format(table=OutboxTask._meta.db_table, skip=" SKIP LOCKED" if skip_locked else "")
        cursor.execute(sql, {"row_id": row_id, "next": index + 1, "done_at": now if last else None, "index": index})
        row = cursor.fetchone()
    return None if row is None else (row[0], row[1])


# A drain looks at this many pending batch rows at a time, and hands over to a new message (its
# own flag set again) after this long, well inside the task's time limit.
DRAIN_BATCH = 50
DRAIN_BUDGET_S = 20.0
# The rows of one look run in transactions of at most this many rows (their locks are held that long).
DRAIN_TOGETHER = 25


def _pending_batches_query(*, after_id: int, max_attempts: int) -> QuerySet[Any]:
    return (OutboxTask.objects.filter(name=FOLLOW_UPS_TASK, done_at__isnull=True, pk__gt=after_id,
                                      attempts__lt=max_attempts)
            .order_by("pk").values_list("pk", "kwargs")[:DRAIN_BATCH])


# Its name is written into the statement (core.prepared): the generic plan then reads the partial
# index of the pending batches (outbox_batch_pending_idx), which a name given as a parameter could not.
_PENDING_BATCHES: Prepared[Any] = Prepared(_pending_batches_query)


def follow_ups_drain(*, budget_s: float = DRAIN_BUDGET_S) -> int:
    """Run the pending batch rows (`core.after_commit`), oldest first, until none is left; returns
    how many batches ran here.

    The queued flag stays set while the drain finds rows (each look renews it), so the batches
    committed meanwhile send no message: this drain's next look runs them. Once a look finds none,
    the flag is cleared and the drain looks once more: a batch committed before the clear is in that
    look, one committed after it queues the next drain. A row another worker is running (its
    redelivery, a second drain) is skipped, not waited for. Rows that used up their attempts are
    left to an operator, as the sweep leaves them. Past `budget_s` the drain queues its successor
    and stops.
    """
    started = time.monotonic()
    after_id, ran, cleared = 0, 0, False
    while True:
        if not cleared:
            drain_queued_flag_renew()
        rows = _PENDING_BATCHES.tuples(after_id=after_id, max_attempts=_max_attempts())
        if not rows:
            if cleared:
                return ran
            drain_queued_flag(set_it=False)
            cleared = True
            continue
        for start in range(0, len(rows), DRAIN_TOGETHER):
            chunk = rows[start:start + DRAIN_TOGETHER]
            after_id = chunk[-1][0]
            ran += _drain_rows(chunk)
            if time.monotonic() - started > budget_s:
                drain_queued_flag(set_it=False)
                follow_ups_drain_queue()
                return ran


def _drain_rows(rows: list[tuple[int, dict[str, Any]]]) -> int:
    """Run the batch rows `rows` ((id, kwargs), oldest first): together in one transaction where each is
    untouched (`_run_together`), each on its own (`follow_ups_run`) where one was half run or one of
    the tasks fails. Returns how many rows ran here."""
    now = timezone.now()
    together = _run_together(rows, now=now)
    ran = len(together or ())
    for row_id, kwargs in rows:
        if together is not None and row_id in together:
            continue
        if follow_ups_run(steps=kwargs["steps"], task_id=f"{OUTBOX_ID_PREFIX}{row_id}", now=now, skip_locked=True):
            ran += 1
    return ran


# The untouched rows among those given are locked (passing over rows another worker holds) and marked
# done, all steps counted, in one statement; the transaction commits without waiting for the disk,
# as a step's does (_STEP_CLAIM_SQL).
_ROWS_CLAIM_SQL = """WITH locked AS (
    SELECT id FROM {table} WHERE id = ANY(%(ids)s) AND done_at IS NULL AND steps_done = 0
    ORDER BY id FOR UPDATE SKIP LOCKED
)
UPDATE {table} SET steps_done = jsonb_array_length({table}.kwargs -> 'steps'), done_at = %(now)s FROM locked
WHERE {table}.id = locked.id
RETURNING {table}.id, set_config('synchronous_commit', 'off', true)"""


def _run_together(rows: list[tuple[int, dict[str, Any]]], *, now: datetime) -> set[int] | None:
    """Run the steps of the untouched rows among `rows` in one transaction, which marks them done; returns
    their ids, or None when one task failed (the transaction, its marks with it, was rolled back).

    A task declared `coalesce=True` brings something up to date from what is committed (an expert's
    tier rules, a project's recompute request): the same call (task and arguments) in several rows
    runs once, after the other steps of all of them, in lock order (`_coalesced`); the calls it
    replaces are the same work done earlier, on less. Elsewhere than PostgreSQL (the embedded mode
    runs tasks in-process) the rows are left to `follow_ups_run`.
    """
    if connection.vendor != "postgresql":
        return set()
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(_ROWS_CLAIM_SQL.format(table=OutboxTask._meta.db_table),
                               {"ids": [row_id for row_id, _ in rows], "now": now})
                claimed = {row[0] for row in cursor.fetchall()}
            steps = [step for row_id, kwargs in rows if row_id in claimed for step in kwargs["steps"]]
            for name, kwargs in _coalesced(steps):
                current_app.tasks[name].run(**kwargs)
    except (OperationalError, InterfaceError):
        raise
    except Exception:  # noqa: BLE001 - one task's bug: the rows run one by one, where it goes on alone
        logger.warning("a follow-up task failed in a drain's rows; they run one by one", exc_info=True)
        return None
    return claimed


def _coalesced(steps: list[list[Any]]) -> list[list[Any]]:
    """`steps` in order, but each distinct call of a `coalesce` task once, after all the others: it then
    sees every write of the rows, and a lock it takes (a project's, for a recompute request) is held
    only until the commit that follows. The calls run in their tasks' `lock_order` (the rank of the row
    they lock in the app's lock order), then by arguments (experts in pk order), so two drains
    running at once take those locks in one order."""
    others: list[list[Any]] = []
    calls: dict[str, list[Any]] = {}
    for step in steps:
        if getattr(current_app.tasks.get(step[0]), "coalesce", False):
            calls.setdefault(json.dumps(step, sort_keys=True), step)
        else:
            others.append(step)

    def order(step: list[Any]) -> tuple[int, str, list[tuple[str, Any]]]:
        return (int(getattr(current_app.tasks.get(step[0]), "lock_order", 0)), step[0], sorted(step[1].items()))

    return others + sorted(calls.values(), key=order)


def _max_attempts() -> int:
    return int(getattr(settings, "RUBRICA_OUTBOX_MAX_ATTEMPTS", 10))


def outbox_sweep(*, now: datetime, limit: int = SWEEP_BATCH) -> int:
    """Send again every pending row whose check time has passed; returns how many were sent.

    Stops at the first broker error (the broker is still down; the rows stay due). Rows
    that used up their attempts stay pending for an operator and are logged. Done rows
    older than `RUBRICA_OUTBOX_KEEP_DONE_S` are deleted.
    """
    sent = 0
    with transaction.atomic():
        # SKIP LOCKED: two sweeps at once (two beats by mistake) split the rows instead of sending twice.
        rows = list(OutboxTask.objects.select_for_update(skip_locked=True)
                    .filter(done_at__isnull=True, next_check_at__lte=now, attempts__lt=_max_attempts())
                    .order_by("next_check_at", "pk")[:limit])
        for row in rows:
            try:
                task_send(row.name, countdown=_remaining_s(row.due_at), task_id=row.message_id, **row.kwargs)
            except Exception:  # noqa: BLE001 - broker still unreachable: try again next sweep
                logger.warning("outbox sweep stopped: the broker refused a message", extra={"outbox_id": row.pk},
                               exc_info=True)
                break
            row.attempts += 1
            row.next_check_at = max(now, row.due_at) + outbox_retry_after()
            row.save(update_fields=["attempts", "next_check_at"])
            sent += 1
    exhausted = OutboxTask.objects.filter(done_at__isnull=True, attempts__gte=_max_attempts()).count()
    if exhausted:
        logger.error("outbox tasks gave up", extra={"count": exhausted})
    if sent:
        logger.warning("outbox sweep sent tasks again", extra={"count": sent})
    _purge_done(now=now)
    return sent


def _purge_done(*, now: datetime) -> None:
    keep = timedelta(seconds=int(getattr(settings, "RUBRICA_OUTBOX_KEEP_DONE_S", 86400)))
    old = OutboxTask.objects.filter(done_at__lt=now - keep).values_list("pk", flat=True)[:PURGE_BATCH]
    OutboxTask.objects.filter(pk__in=list(old)).delete()
