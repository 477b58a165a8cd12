"""One transaction's follow-up work as one message: gathered in order, run once, a failing task on its own.

With a broker (not eager), a submission used to write an outbox row and send a message for each
follow-up task; inside `follow_ups_batched` they share one row and one `core.follow_ups_run`
message, whose run marks the row done in the same transaction as the tasks' writes.
"""
from datetime import timedelta

import pytest
from celery import current_app
from django.db import OperationalError, transaction
from django.utils import timezone

import core.after_commit as after_commit
from config.celery import app
from core.after_commit import FOLLOW_UPS_TASK, follow_ups_batched, task_send_on_commit
from core.models import OutboxTask
from core.outbox import follow_ups_run, outbox_sweep

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
    assert sorted(name for name, _, _ in broker) == sorted(["tests.follow_up_remote", MARK, FOLLOW_UPS_TASK])
    batch = OutboxTask.objects.get(name=FOLLOW_UPS_TASK)
    assert (FOLLOW_UPS_TASK, {"steps": [[MARK, {"n": 1}], [MARK, {"n": 3}]]}, batch.message_id) in broker


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

    from core.outbox import _row_lock

    row = _batch_row([[MARK, {"n": 1}]])

    def setting() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            return cursor.fetchone()[0]

    with transaction.atomic():
        assert _row_lock(row.pk) == (0, None)
        assert setting() == "off"
    # set_config(..., is_local => true) ends with its transaction: the test's own is left as it was.
    assert setting() == "on"
