"""The outbox sweep: what it sends again, what it leaves, and marking a row done."""
from datetime import timedelta

import pytest
from django.utils import timezone

from core.models import OutboxTask
from core.outbox import outbox_mark_done, outbox_row_id, outbox_sweep
from tests.support.faults import WORKER_REDIS_URL, celery_broker, redis_flush

pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("faults")]


def _row(*, now, attempts=1, check_in_s=-1, done=False) -> OutboxTask:
    return OutboxTask.objects.create(name="annotation.expert_evaluate", kwargs={"user_id": 1}, created_at=now,
                                     due_at=now, next_check_at=now + timedelta(seconds=check_in_s),
                                     attempts=attempts, done_at=now if done else None)


def test_the_sweep_sends_due_rows_again_and_leaves_done_future_and_exhausted_ones(settings):
    settings.RUBRICA_OUTBOX_MAX_ATTEMPTS = 3
    now = timezone.now()
    due, later, done, exhausted = (_row(now=now), _row(now=now, check_in_s=60), _row(now=now, done=True),
                                   _row(now=now, attempts=3))
    redis_flush()
    try:
        with celery_broker(WORKER_REDIS_URL):
            assert outbox_sweep(now=now) == 1
    finally:
        redis_flush()

    due.refresh_from_db()
    assert due.attempts == 2 and due.next_check_at == now + timedelta(seconds=settings.RUBRICA_OUTBOX_RETRY_AFTER_S)
    assert [r.attempts for r in OutboxTask.objects.filter(pk__in=[later.pk, done.pk, exhausted.pk]).order_by("pk")
            ] == [1, 1, 3]


def test_with_the_broker_still_down_the_sweep_sends_nothing_and_the_rows_stay_due():
    now = timezone.now()
    row = _row(now=now, attempts=0)

    with celery_broker("redis://127.0.0.1:8651/0"):
        assert outbox_sweep(now=now) == 0

    row.refresh_from_db()
    assert (row.attempts, row.next_check_at, row.done_at) == (0, now - timedelta(seconds=1), None)


def test_marking_done_is_idempotent_and_ignores_other_task_ids():
    now = timezone.now()
    row = _row(now=now)

    assert outbox_mark_done(task_id=row.message_id, now=now) is True
    assert outbox_mark_done(task_id=row.message_id, now=now + timedelta(seconds=5)) is False
    assert outbox_row_id("3f2a9c1e-celery-uuid") is None
    row.refresh_from_db()
    assert row.done_at == now


def test_done_rows_older_than_a_day_are_deleted_by_the_sweep():
    now = timezone.now()
    old = _row(now=now - timedelta(days=2), done=True)
    recent = _row(now=now - timedelta(hours=1), done=True)

    outbox_sweep(now=now)

    assert list(OutboxTask.objects.values_list("pk", flat=True)) == [recent.pk]
    assert not OutboxTask.objects.filter(pk=old.pk).exists()
