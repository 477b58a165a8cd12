"""One transaction's follow-up work as one message: gathered in order, run once, a failing task on its own.

With a broker (not eager), a submission used to write an outbox row and send a message for each
follow-up task; inside `follow_ups_batched` they share one row and one `core.follow_ups_run`
message, whose run marks the row done in the same transaction as the tasks' writes.
"""
from datetime import timedelta

import pytest
from celery import current_app
from django.db import OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import core.after_commit as after_commit
from config.celery import app
from core import outbox
from core.after_commit import (
    FOLLOW_UPS_DRAIN_TASK,
    FOLLOW_UPS_TASK,
    drain_queued_flag,
    follow_ups_batched,
    task_send_on_commit,
)
from core.models import OutboxTask
from core.outbox import follow_ups_drain, follow_ups_run, outbox_sweep

pytestmark = pytest.mark.django_db

MARK = "tests.follow_up_mark"


def _marks() -> list[int]:
    return list(OutboxTask.objects.filter(name=MARK).order_by("pk").values_list("kwargs__n", flat=True))


@app.task(name="tests.follow_up_mark", batchable=True)
def _mark(*, n: int) -> int:
    # A database write the test can count: a row that is never sent (already done).
    now = timezone.now()
    OutboxTask.objects.create(name=MARK, kwargs={"n": n}, created_at=now, due_at=now, next_check_at=now,
                              done_at=now)
    return n


@app.task(name="tests.follow_up_broken", batchable=True)
def _broken(*, n: int) -> None:
    now = timezone.now()
    OutboxTask.objects.create(name=MARK, kwargs={"n": n}, created_at=now, due_at=now, next_check_at=now,
                              done_at=now)
    raise ValueError("broken on purpose")


_flaky_failures: list[int] = []


@app.task(name="tests.follow_up_flaky", batchable=True)
def _flaky(*, n: int) -> int:
    if _flaky_failures:
        _flaky_failures.pop()
        raise OperationalError("the connection dropped")
    return _mark.run(n=n)


@app.task(name="tests.follow_up_remote")
def _remote(*, n: int) -> int:
    return n  # not batchable: like a webhook delivery, it waits on someone else's server


@pytest.fixture
def broker(monkeypatch):
    """Broker mode (outbox rows, messages) with the messages recorded instead of sent."""
    sent: list[tuple[str, dict, str | None]] = []
    monkeypatch.setattr(current_app.conf, "task_always_eager", False)
    drain_queued_flag(set_it=False)  # an earlier test's drain, which nobody ran
    monkeypatch.setattr(after_commit, "task_send",
                        lambda name, countdown=None, task_id=None, **kw: sent.append((name, kw, task_id)))
    return sent


def test_a_batch_writes_one_row_and_sends_one_message_with_its_tasks_in_order(broker,
                                                                              django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic(), follow_ups_batched():
            task_send_on_commit(MARK, n=1)
            task_send_on_commit("tests.follow_up_remote", n=2)
            with follow_ups_batched():  # an inner batch joins the outer one
                task_send_on_commit(MARK, n=3)
            task_send_on_commit(MARK, countdown=30, n=4)  # a delayed task keeps its own row and timing

    rows = list(OutboxTask.objects.order_by("pk").values_list("name", "kwargs"))
    assert rows == [("tests.follow_up_remote", {"n": 2}), ("tests.follow_up_mark", {"n": 4}),
                    (FOLLOW_UPS_TASK, {"steps": [[MARK, {"n": 1}], [MARK, {"n": 3}]]})]
    # The batch row is run by a drain: its message names no row, the drain reads the pending ones.
    assert sorted(name for name, _, _ in broker) == sorted(["tests.follow_up_remote", MARK, FOLLOW_UPS_DRAIN_TASK])
    assert (FOLLOW_UPS_DRAIN_TASK, {}, None) in broker


def test_a_batch_of_one_task_is_sent_as_that_task_and_an_empty_one_sends_nothing(
        broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic(), follow_ups_batched():
            task_send_on_commit(MARK, n=1)
        with transaction.atomic(), follow_ups_batched():
            pass

    assert list(OutboxTask.objects.values_list("name", "kwargs")) == [(MARK, {"n": 1})]
    assert [name for name, _, _ in broker] == [MARK]


def test_a_failed_transaction_queues_none_of_its_batch(broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError):
        with transaction.atomic(), follow_ups_batched():
            task_send_on_commit(MARK, n=1)
            raise RuntimeError("the submission failed")

    assert not OutboxTask.objects.exists()
    assert broker == []


def _batch_row(steps) -> OutboxTask:
    now = timezone.now()
    return OutboxTask.objects.create(name=FOLLOW_UPS_TASK, kwargs={"steps": steps}, created_at=now, due_at=now,
                                     next_check_at=now + timedelta(minutes=10), attempts=1)


def test_the_batch_runs_its_tasks_in_order_once_and_a_redelivery_runs_nothing():
    row = _batch_row([[MARK, {"n": 1}], [MARK, {"n": 2}]])
    now = timezone.now()

    assert follow_ups_run(steps=row.kwargs["steps"], task_id=row.message_id, now=now) == 2
    # The same message again (a redelivery, or the sweep overtaking a slow worker).
    assert follow_ups_run(steps=row.kwargs["steps"], task_id=row.message_id, now=now) == 0

    assert _marks() == [1, 2]
    row.refresh_from_db()
    assert row.done_at == now
    assert outbox_sweep(now=now + timedelta(hours=1)) == 0  # done: the sweep leaves it


def test_a_batch_that_failed_half_way_runs_only_the_tasks_that_had_not_committed_when_redelivered():
    row = _batch_row([[MARK, {"n": 1}], ["tests.follow_up_flaky", {"n": 2}], [MARK, {"n": 3}]])
    now = timezone.now()
    _flaky_failures.append(1)  # the database drops out in the second task, once

    with pytest.raises(OperationalError):
        follow_ups_run(steps=row.kwargs["steps"], task_id=row.message_id, now=now)
    row.refresh_from_db()
    assert (row.steps_done, row.done_at, _marks()) == (1, None, [1])

    # The retry (or the sweep's redelivery) starts after the task that committed.
    assert follow_ups_run(steps=row.kwargs["steps"], task_id=row.message_id, now=now) == 2

    assert _marks() == [1, 2, 3]
    row.refresh_from_db()
    assert (row.steps_done, row.done_at) == (3, now)


def test_a_task_that_fails_is_undone_and_queued_alone_while_the_others_commit(broker,
                                                                            django_capture_on_commit_callbacks):
    row = _batch_row([[MARK, {"n": 1}], ["tests.follow_up_broken", {"n": 2}], [MARK, {"n": 3}]])

    with django_capture_on_commit_callbacks(execute=True):
        ran = follow_ups_run(steps=row.kwargs["steps"], task_id=row.message_id, now=timezone.now())

    assert ran == 2
    assert _marks() == [1, 3]  # the broken task's own write was rolled back with it
    alone = OutboxTask.objects.get(name="tests.follow_up_broken")
    assert (alone.kwargs, alone.done_at) == ({"n": 2}, None)  # retried and swept like any task
    assert [name for name, _, _ in broker] == ["tests.follow_up_broken"]
    row.refresh_from_db()
    assert row.done_at is not None


def test_in_process_mode_runs_each_task_after_the_commit(django_capture_on_commit_callbacks):
    assert current_app.conf.task_always_eager
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic(), follow_ups_batched():
            task_send_on_commit(MARK, n=1)
            task_send_on_commit(MARK, n=2)
            assert _marks() == []  # not before the commit

    assert _marks() == [1, 2]
    assert not OutboxTask.objects.filter(name=FOLLOW_UPS_TASK).exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_batch_step_commits_without_waiting_for_the_disk_and_only_that_transaction_does():
    from django.db import connection

    from core.outbox import _row_claim_step

    row = _batch_row([[MARK, {"n": 1}], [MARK, {"n": 2}]])

    def setting() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            return cursor.fetchone()[0]

    with transaction.atomic():
        # The row as it was; the first step is counted in the same statement.
        assert _row_claim_step(row.pk, index=0, last=False, now=timezone.now()) == (0, None)
        assert setting() == "off"
    # set_config(..., is_local => true) ends with its transaction: the test's own is left as it was.
    assert setting() == "on"
    row.refresh_from_db()
    assert (row.steps_done, row.done_at) == (1, None)
    # A step that ran already is not counted again; the last one marks the row done.
    with transaction.atomic():
        assert _row_claim_step(row.pk, index=0, last=False, now=timezone.now()) == (1, None)
    with transaction.atomic():
        assert _row_claim_step(row.pk, index=1, last=True, now=timezone.now()) == (1, None)
    row.refresh_from_db()
    assert row.steps_done == 2 and row.done_at is not None


def _commit_batch(capture, *numbers: int) -> None:
    """A transaction (a submission) whose follow-ups are MARK tasks of `numbers` (two at least: a
    single task is sent on its own), committed."""
    with capture(execute=True):
        with transaction.atomic(), follow_ups_batched():
            for n in numbers:
                task_send_on_commit(MARK, n=n)


def test_batches_committed_while_a_drain_is_queued_send_nothing_and_the_drain_runs_them_all_once(
        broker, django_capture_on_commit_callbacks):
    for n in (1, 2, 3):
        _commit_batch(django_capture_on_commit_callbacks, n, n + 10)

    assert broker == [(FOLLOW_UPS_DRAIN_TASK, {}, None)]  # one message for the three submissions
    assert follow_ups_drain() == 3
    assert follow_ups_drain() == 0  # a redelivery of the drain finds nothing left
    assert _marks() == [1, 11, 2, 12, 3, 13]
    assert not OutboxTask.objects.filter(name=FOLLOW_UPS_TASK, done_at__isnull=True).exists()

    # The drain cleared the flag when it looked: the next submission queues the next drain.
    _commit_batch(django_capture_on_commit_callbacks, 4, 14)
    assert [name for name, _, _ in broker] == [FOLLOW_UPS_DRAIN_TASK, FOLLOW_UPS_DRAIN_TASK]
    assert follow_ups_drain() == 1 and _marks()[-2:] == [4, 14]


def test_a_batch_committed_while_the_drain_runs_sends_nothing_and_is_run_by_its_next_look(
        broker, django_capture_on_commit_callbacks, monkeypatch):
    _commit_batch(django_capture_on_commit_callbacks, 1, 11)
    run = outbox._drain_rows
    late: list[int] = []

    def run_then_commit_another(rows):
        ran = run(rows)
        if not late:  # another submission commits after the drain's look at the rows
            late.append(1)
            _commit_batch(django_capture_on_commit_callbacks, 2, 12)
        return ran

    monkeypatch.setattr(outbox, "_drain_rows", run_then_commit_another)
    assert follow_ups_drain() == 2  # its next look saw the late batch

    assert _marks() == [1, 11, 2, 12]
    # The flag stayed set while the drain found rows: the late batch sent no message of its own.
    assert [name for name, _, _ in broker] == [FOLLOW_UPS_DRAIN_TASK]
    # The drain cleared it once it found none: the next submission queues the next drain.
    _commit_batch(django_capture_on_commit_callbacks, 3, 13)
    assert [name for name, _, _ in broker] == [FOLLOW_UPS_DRAIN_TASK, FOLLOW_UPS_DRAIN_TASK]


def test_a_batch_committed_just_before_the_drain_cleared_the_flag_is_in_its_last_look(
        broker, django_capture_on_commit_callbacks, monkeypatch):
    _commit_batch(django_capture_on_commit_callbacks, 1, 11)
    clear = outbox.drain_queued_flag
    late: list[int] = []

    def commit_then_clear(*, set_it):
        if not set_it and not late:  # the drain found no row; a submission commits before the clear
            late.append(1)
            _commit_batch(django_capture_on_commit_callbacks, 2, 12)
        return clear(set_it=set_it)

    monkeypatch.setattr(outbox, "drain_queued_flag", commit_then_clear)
    assert follow_ups_drain() == 2
    assert _marks() == [1, 11, 2, 12]
    assert [name for name, _, _ in broker] == [FOLLOW_UPS_DRAIN_TASK]  # it found the flag set: no message


_refreshed: list[dict] = []


@app.task(name="tests.follow_up_refresh", batchable=True, coalesce=True)
def _refresh(*, k: int) -> None:
    # Brings something up to date from what is committed (a tier evaluation): records what it saw.
    _refreshed.append({"k": k, "marks": _marks()})


@app.task(name="tests.follow_up_refresh_locking", batchable=True, coalesce=True, lock_order=6)
def _refresh_locking(*, k: int) -> None:
    # One that locks a row further down the lock order (an expert's profile): it runs after the others.
    _refreshed.append({"locking": k})


@pytest.mark.postgres
def test_a_drain_runs_the_rows_of_a_look_in_one_transaction_and_a_repeated_refresh_once_after_them():
    _refreshed.clear()
    rows = [_batch_row([["tests.follow_up_refresh_locking", {"k": 4 - n}], [MARK, {"n": n}],
                        ["tests.follow_up_refresh", {"k": n % 2}]]) for n in (1, 2, 3)]

    with CaptureQueriesContext(connection) as queries:
        assert follow_ups_drain() == 3

    assert _marks() == [1, 2, 3]
    # k=1 (rows 1 and 3) and k=0 (row 2) each run once, after every row's other steps; then the ones
    # further down the lock order, each once, by their arguments (as experts go, in pk order).
    assert _refreshed == [{"k": 0, "marks": [1, 2, 3]}, {"k": 1, "marks": [1, 2, 3]},
                          {"locking": 1}, {"locking": 2}, {"locking": 3}]
    assert all(row.done_at is not None for row in OutboxTask.objects.filter(pk__in=[r.pk for r in rows]))
    assert OutboxTask.objects.get(pk=rows[0].pk).steps_done == 3
    # One transaction for the three rows: one claim of the rows, no per-step bookkeeping.
    sql = [q["sql"] for q in queries.captured_queries]
    assert sum("FOR UPDATE" in q for q in sql) == 1
    # A redelivered drain finds nothing to run.
    assert follow_ups_drain() == 0 and _marks() == [1, 2, 3]


@pytest.mark.postgres
def test_a_task_failing_in_a_drain_undoes_the_rows_together_then_they_run_one_by_one(
        broker, django_capture_on_commit_callbacks):
    _refreshed.clear()
    good = _batch_row([[MARK, {"n": 1}], ["tests.follow_up_refresh", {"k": 1}]])
    bad = _batch_row([[MARK, {"n": 2}], ["tests.follow_up_broken", {"n": 3}], ["tests.follow_up_refresh", {"k": 1}]])

    with django_capture_on_commit_callbacks(execute=True):
        assert follow_ups_drain() == 2

    # Each row's good tasks ran once (the first, failed try left nothing); the broken one is on its own row.
    assert _marks() == [1, 2]
    assert [r["k"] for r in _refreshed] == [1, 1]  # one by one, each row runs its own refresh
    alone = OutboxTask.objects.get(name="tests.follow_up_broken")
    assert (alone.kwargs, alone.done_at) == ({"n": 3}, None)
    assert [name for name, _, _ in broker] == ["tests.follow_up_broken"]
    assert OutboxTask.objects.filter(pk__in=[good.pk, bad.pk], done_at__isnull=False).count() == 2


@pytest.mark.postgres
def test_a_half_run_row_is_left_out_of_the_rows_together_and_runs_only_its_remaining_steps():
    half = _batch_row([[MARK, {"n": 1}], [MARK, {"n": 2}]])
    OutboxTask.objects.filter(pk=half.pk).update(steps_done=1)  # its first step committed before a crash
    _batch_row([[MARK, {"n": 3}], [MARK, {"n": 4}]])

    assert follow_ups_drain() == 2
    assert sorted(_marks()) == [2, 3, 4]


def test_a_drain_past_its_time_budget_queues_its_successor_and_stops(broker, django_capture_on_commit_callbacks,
                                                                   monkeypatch):
    monkeypatch.setattr(outbox, "DRAIN_TOGETHER", 1)  # the budget is looked at between the rows run together
    _commit_batch(django_capture_on_commit_callbacks, 1, 11)
    _commit_batch(django_capture_on_commit_callbacks, 2, 12)
    assert len(broker) == 1

    assert follow_ups_drain(budget_s=0) == 1
    assert _marks() == [1, 11]
    assert len(broker) == 2 and drain_queued_flag(set_it=True) is False  # the successor is queued, and flagged
    assert follow_ups_drain() == 1 and _marks() == [1, 11, 2, 12]


def test_with_the_broker_down_the_batch_waits_for_the_sweep_and_the_next_submission_tries_again(
        broker, django_capture_on_commit_callbacks, monkeypatch):
    refused: list[str] = []
    monkeypatch.setattr(after_commit, "_broker_down_until", 0.0)  # and back to no pause after the test

    def refuse(name, countdown=None, task_id=None, **kwargs):
        refused.append(name)
        raise ConnectionError("broker down")

    monkeypatch.setattr(after_commit, "task_send", refuse)
    _commit_batch(django_capture_on_commit_callbacks, 1, 11)

    row = OutboxTask.objects.get(name=FOLLOW_UPS_TASK)
    assert refused == [FOLLOW_UPS_DRAIN_TASK]  # one refused send; the row is not sent again in vain
    assert row.attempts == 0 and row.next_check_at <= timezone.now()  # due for the sweep at once
    after_commit._broker_down_until = 0.0
    assert drain_queued_flag(set_it=True) is True  # no drain was left flagged: the next commit must try
    drain_queued_flag(set_it=False)

    monkeypatch.setattr(after_commit, "task_send",
                        lambda name, countdown=None, task_id=None, **kw: broker.append((name, kw, task_id)))
    _commit_batch(django_capture_on_commit_callbacks, 2, 12)
    assert [name for name, _, _ in broker] == [FOLLOW_UPS_DRAIN_TASK]
    assert follow_ups_drain() == 2 and _marks() == [1, 11, 2, 12]


def test_without_a_redis_broker_each_batch_is_sent_on_its_own(broker, django_capture_on_commit_callbacks,
                                                               monkeypatch):
    monkeypatch.setattr(after_commit, "drain_queued_flag", lambda *, set_it: None)  # the memory transport
    _commit_batch(django_capture_on_commit_callbacks, 1, 11)

    row = OutboxTask.objects.get(name=FOLLOW_UPS_TASK)
    assert broker == [(FOLLOW_UPS_TASK, {"steps": [[MARK, {"n": 1}], [MARK, {"n": 11}]]}, row.message_id)]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_drain_passes_a_batch_another_worker_is_running_instead_of_waiting_for_it():
    from tests.support.faults import side_connection

    first = _batch_row([[MARK, {"n": 1}]])
    _batch_row([[MARK, {"n": 2}]])
    with side_connection() as side:  # another worker, in the middle of the first batch
        side.execute(f"SELECT 1 FROM {OutboxTask._meta.db_table} WHERE id = %s FOR UPDATE", [first.pk])
        assert follow_ups_drain() == 1
        assert _marks() == [2]
    assert follow_ups_drain() == 1  # once the other worker let go (here: without running it)
    assert sorted(_marks()) == [1, 2]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_drains_racing_over_the_same_rows_run_each_rows_tasks_exactly_once():
    """Two drains at once (two worker processes, or a redelivery beside the next drain): each takes the
    rows the other has not locked, and every batch's tasks run once, with its refresh once per look."""
    from tests.support.threads import run_together

    _refreshed.clear()
    rows = [_batch_row([[MARK, {"n": n}], ["tests.follow_up_refresh", {"k": n % 3}]]) for n in range(1, 61)]

    ran = run_together(follow_ups_drain, 3)

    assert sum(ran) == 60
    assert sorted(_marks()) == list(range(1, 61))
    assert not OutboxTask.objects.filter(pk__in=[r.pk for r in rows], done_at__isnull=True).exists()
    # Each refresh ran after its rows' marks (once per set of rows run together, not once per row).
    assert {r["k"] for r in _refreshed} == {0, 1, 2} and len(_refreshed) < 60
