"""The one way to start follow-up work: a Celery task sent by name once the transaction commits.

Sending by name lets a lower app start a higher app's work (a submission earns money)
without importing it. With `CELERY_TASK_ALWAYS_EAGER` (the embedded mode and the tests)
a registered task runs in-process right after the commit.

With a broker, `task_send_on_commit` writes an outbox row (`core.models.OutboxTask`) in
the caller's transaction and sends the message once it commits; the worker marks the row
done when the task succeeds (`core.outbox`). A broker that is down at commit time makes
the send fail quietly: the row stays and the beat sweep sends it when the broker is back,
as it does for a message a killed worker took with it. The request that committed never
fails because the broker did.

Inside `follow_ups_batched()` (a submission), the tasks sent without a countdown are
gathered into one outbox row (`core.follow_ups_run`), whose tasks run in order, each counted
on the row in its own transaction, so they run once per commit (`core.outbox`). The row's
commit does not send a message of its own: it makes sure one drain (`core.follow_ups_drain`)
is queued, which runs every pending batch row, oldest first, until none is left. A flag on
the broker's Redis says a drain is queued or running and will look again; the drain keeps it set
while it finds rows and clears it (then looks once more) when it finds none, so a row committed
after that queues the next drain. One message then carries the follow-up work of all the
submissions made while it runs, and of a quarter second before it (`DRAIN_DELAY_S`); a batch
another worker runs is passed over rather than waited for, and a batch row whose drain was lost is
sent on its own by the sweep.
"""
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core.sql_insert import insert_rows

logger = logging.getLogger(__name__)

# After a send failed, this process leaves sending to the sweep for this long: each refused
# send costs the publish retries (0.8 s), which would otherwise land on every request.
BROKER_DOWN_PAUSE_S = 5.0
_broker_down_until = 0.0

FOLLOW_UPS_TASK = "core.follow_ups_run"
FOLLOW_UPS_DRAIN_TASK = "core.follow_ups_drain"
# Set (on the broker's Redis, shared by every process) while a drain is queued and has not looked yet.
DRAIN_QUEUED_KEY = "rubrica:follow-ups:drain-queued"
# A flag whose drain never started (its sender died before sending, the message was lost) holds
# back the next drain this long at most; then the next commit queues another. A drain still queued
# behind other work past it gets a second one, which finds nothing left.
DRAIN_QUEUED_TTL_S = 5
# A drain starts this long after the commit that queued it, so the submissions of that moment share
# it: one message for many batches even while the worker keeps up (then it would carry one each).
DRAIN_DELAY_S = 0.25
_batches = threading.local()


@contextmanager
def follow_ups_batched() -> Iterator[None]:
    """Gather the follow-up tasks sent inside into one message (call it inside the transaction).

    `task_send_on_commit` calls without a countdown, of tasks declared with `batchable=True`
    (short database work; never one that waits on a remote server), are kept in order; on a
    normal exit they are queued as one `core.follow_ups_run` task: one outbox row, one send,
    one worker task, instead of one of each per task. An exception drops them with the
    transaction. Batches nest: an inner one joins the outer. In-process (eager) mode runs
    each task after the commit as before.
    """
    stack = _batches.__dict__.setdefault("stack", [])
    if stack:
        yield  # joins the enclosing batch
        return
    steps: list[list[Any]] = []
    stack.append(steps)
    try:
        yield
    finally:
        stack.pop()
    if len(steps) == 1:
        task_send_on_commit(steps[0][0], **steps[0][1])
    elif steps:
        task_send_on_commit(FOLLOW_UPS_TASK, steps=steps)


def task_send(name: str, *, countdown: float | None = None, task_id: str | None = None, **kwargs: Any) -> None:
    """Send task `name` with keyword arguments `kwargs` now: for a task that queues its own
    next step, which holds no transaction whose commit the step must wait for.

    `countdown` delays it by that many seconds. `task_id` names the message: an outbox
    row's, whose result nobody reads, so the result store is not touched (with Redis down,
    subscribing to the result took 19 s of reconnect attempts before failing).
    """
    options: dict[str, Any] = {"countdown": countdown}
    if task_id is not None:
        options.update(task_id=task_id, ignore_result=True)
    task = current_app.tasks.get(name)
    if task is None:
        current_app.send_task(name, kwargs=kwargs, **options)
    else:
        task.apply_async(kwargs=kwargs, **options)


def outbox_retry_after() -> timedelta:
    """How long a sent outbox task may take before the sweep sends it again."""
    return timedelta(seconds=int(getattr(settings, "RUBRICA_OUTBOX_RETRY_AFTER_S", 600)))


def _batchable(name: str) -> bool:
    return bool(getattr(current_app.tasks.get(name), "batchable", False))


def task_send_on_commit(name: str, *, countdown: float | None = None, **kwargs: Any) -> None:
    """Queue task `name` with keyword arguments `kwargs` once the current transaction commits.

    Outside a transaction the task is sent at once. `countdown` delays it by that many seconds.
    Inside `follow_ups_batched` a batchable task without a countdown joins the batch.
    """
    stack = getattr(_batches, "stack", None)
    if stack and countdown is None and not current_app.conf.task_always_eager and _batchable(name):
        stack[-1].append([name, kwargs])
        return
    if current_app.conf.task_always_eager:
        # In-process: there is no broker to lose the message, and an error surfaces in the caller.
        transaction.on_commit(lambda: task_send(name, countdown=countdown, **kwargs))
        return
    from core.models import OutboxTask

    now = timezone.now()
    due_at = now + timedelta(seconds=countdown or 0)
    row = OutboxTask(name=name, kwargs=kwargs, created_at=now, due_at=due_at,
                     next_check_at=due_at + outbox_retry_after(), attempts=1)
    # One statement, without `save()`'s signals and bookkeeping: every submission writes one such row, and
    # `objects.create` was 4% of the web's CPU on the expert's loop (py-spy, 4 clients).
    insert_rows([row], returning=True)
    if name == FOLLOW_UPS_TASK and countdown is None:
        transaction.on_commit(lambda: follow_ups_drain_queue(row))
    else:
        transaction.on_commit(lambda: outbox_send_first(row))


def _drain_queued_key() -> str:
    # Per database: the batch rows it stands for are that database's (test databases share a Redis).
    return f"{DRAIN_QUEUED_KEY}:{connection.settings_dict['NAME']}"


def drain_queued_flag(*, set_it: bool) -> bool | None:
    """Set (if not set: True when this call set it, False when it was) or clear the flag that a drain
    is queued, beside the messages, on the broker's Redis: every web and worker process shares it.
    None when the broker is not Redis (the memory transport) or cannot be reached."""
    if set_it:
        return _on_flag(lambda client, key: bool(client.set(key, 1, nx=True, ex=DRAIN_QUEUED_TTL_S)))
    return _on_flag(lambda client, key: client.delete(key) is not None)


def drain_queued_flag_renew() -> None:
    """Keep the flag set for another `DRAIN_QUEUED_TTL_S` (a running drain that will look again): the
    batches committed meanwhile send no message. Without a Redis broker, nothing."""
    _on_flag(lambda client, key: bool(client.set(key, 1, ex=DRAIN_QUEUED_TTL_S)))


def _on_flag(action: Any) -> bool | None:
    """`action(client, key)` on the broker's Redis client and the flag's key; None without one."""
    if time.monotonic() < _broker_down_until:
        return None
    try:
        with current_app.pool.acquire(block=True, timeout=1) as conn:
            client = getattr(conn.default_channel, "client", None)
            if client is None or not callable(getattr(client, "set", None)):
                return None
            return bool(action(client, _drain_queued_key()))
    except Exception:  # noqa: BLE001 - no broker to agree on a drain (the commits meanwhile queue their own)
        logger.warning("follow-up drain flag not reachable", exc_info=True)
        return None


def follow_ups_drain_queue(row: Any = None) -> bool:
    """Make sure a drain will run the committed batch row `row`: queue one unless one is queued and has
    not looked at the rows yet. Without the flag (no Redis broker), `row` is sent on its own as
    before. Returns whether a message was sent."""
    global _broker_down_until
    added = drain_queued_flag(set_it=True)
    if added is False:
        return False  # the queued drain has not looked yet: it will see the row
    if added is None:
        return outbox_send_first(row) if row is not None else False
    try:
        task_send(FOLLOW_UPS_DRAIN_TASK, countdown=DRAIN_DELAY_S)
    except Exception:  # noqa: BLE001 - the broker is down: the row is due for the sweep at once
        logger.warning("follow-up drain not queued, the outbox sweep will send the work", exc_info=True)
        drain_queued_flag(set_it=False)
        _broker_down_until = time.monotonic() + BROKER_DOWN_PAUSE_S
        return outbox_send_first(row) if row is not None else False  # marks the row due (no send)
    return True


def outbox_send_first(row: Any) -> bool:
    """Send a committed outbox row's message; on a broker error, leave the row for the next sweep."""
    global _broker_down_until
    try:
        if time.monotonic() < _broker_down_until:
            raise ConnectionError("the broker refused a message a moment ago")
        task_send(row.name, countdown=_remaining_s(row.due_at), task_id=row.message_id, **row.kwargs)
    except Exception:  # noqa: BLE001 - any broker failure: the row is the record, the sweep sends it
        _broker_down_until = time.monotonic() + BROKER_DOWN_PAUSE_S
        logger.warning("task not sent, the outbox sweep will send it", extra={"task": row.name, "outbox_id": row.pk},
                       exc_info=True)
        try:
            type(row).objects.filter(pk=row.pk, done_at__isnull=True).update(next_check_at=timezone.now(),
                                                                              attempts=0)
        except Exception:  # noqa: BLE001 - the row keeps its later check time; nothing is lost
            logger.warning("outbox row not rescheduled", extra={"outbox_id": row.pk}, exc_info=True)
        return False
    return True


def _remaining_s(due_at: Any) -> float | None:
    left = (due_at - timezone.now()).total_seconds()
    return left if left > 0 else None
