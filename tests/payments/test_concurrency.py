"""Real threads, real transactions on PostgreSQL: settlement and posting never pay twice or short."""
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction

from payments.ledger import ledger_post_earning
from payments.models import LedgerEntry, PayoutBatch, Period, Statement
from payments.reconciliation import ledger_reconcile
from payments.services import statement_settle_period
from tests.payments.factories import T0, WEEK_END, make_expert, make_paid_project, submit, submit_and_post

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres,
              pytest.mark.usefixtures("post_migrate_rows")]

JOIN_TIMEOUT = 60


@pytest.fixture(autouse=True)
def _posting_by_hand(monkeypatch):
    """Submissions commit for real here, so the eager task would post at the wall-clock time;
    these tests post themselves, at the instants they inject."""
    monkeypatch.setattr("annotation.submission.services.task_send_on_commit", lambda name, **kwargs: None)


def _run(target, *args) -> threading.Thread:
    def body():
        try:
            target(*args)
        finally:
            connections.close_all()

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=JOIN_TIMEOUT)
    assert not any(t.is_alive() for t in threads)


def _wait_for_lock_waiters(count: int) -> None:
    """Return once `count` other sessions are blocked on a row lock."""
    deadline = time.monotonic() + JOIN_TIMEOUT
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                           "AND datname = current_database()")
            if cursor.fetchone()[0] >= count:
                return
        time.sleep(0.02)
    raise AssertionError(f"{count} sessions never waited on a lock")


def test_concurrent_settlements_of_one_period_write_one_set_of_statements():
    assert connection.vendor == "postgresql"
    experts = [make_expert() for _ in range(3)]
    project = make_paid_project(experts=experts, n_questions=3)
    entries = [submit_and_post(project, e, T0) for e in experts]
    period_id = entries[0].period_id
    results, errors = [], []
    start = threading.Barrier(6)

    def settle():
        start.wait()
        try:
            results.append(statement_settle_period(period_id=period_id, now=WEEK_END))
        except Exception as exc:  # collected and asserted on in the main thread
            errors.append(exc)

    _join([_run(settle) for _ in range(6)])

    assert errors == []
    assert sorted(r.created for r in results) == [False] * 5 + [True]
    assert len({tuple(s.pk for s in r.statements) for r in results}) == 1
    assert len({r.batch.pk for r in results}) == 1
    assert (Statement.objects.count(), PayoutBatch.objects.count()) == (3, 1)
    assert ledger_reconcile() == []


def test_work_posted_while_a_settlement_holds_its_period_lands_in_the_next_period():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    first = submit_and_post(project, expert, T0)
    late = submit(project, expert, T0 + timedelta(hours=1))
    settled, release, posted = threading.Event(), threading.Event(), []

    def settle_and_hold():
        with transaction.atomic():
            statement_settle_period(period_id=first.period_id, now=WEEK_END)
            settled.set()
            release.wait(JOIN_TIMEOUT)

    def post():
        settled.wait(JOIN_TIMEOUT)
        posted.append(ledger_post_earning(assignment_id=late.pk, now=T0 + timedelta(hours=1)))

    threads = [_run(settle_and_hold), _run(post)]
    _wait_for_lock_waiters(1)
    release.set()
    _join(threads)

    [entry] = posted
    assert entry.period_id != first.period_id
    assert entry.period.starts_at == WEEK_END
    assert Statement.objects.get().entry_count == 1
    assert ledger_reconcile() == []


def test_a_settlement_waits_for_work_being_posted_into_its_period_and_includes_it():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    first = submit_and_post(project, expert, T0)
    late = submit(project, expert, T0 + timedelta(hours=1))
    posted_event, release, results = threading.Event(), threading.Event(), []

    def post_and_hold():
        with transaction.atomic():
            ledger_post_earning(assignment_id=late.pk, now=T0 + timedelta(hours=1))
            posted_event.set()
            release.wait(JOIN_TIMEOUT)

    def settle():
        posted_event.wait(JOIN_TIMEOUT)
        results.append(statement_settle_period(period_id=first.period_id, now=WEEK_END))

    threads = [_run(post_and_hold), _run(settle)]
    _wait_for_lock_waiters(1)
    release.set()
    _join(threads)

    [statement] = results[0].statements
    assert statement.entry_count == 2
    assert LedgerEntry.objects.filter(period_id=first.period_id).count() == 2
    assert ledger_reconcile() == []


def test_the_same_earning_posted_by_many_workers_at_once_is_one_row():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    assignment = submit(project, expert, T0)
    start, entries, errors = threading.Barrier(8), [], []

    def post():
        start.wait()
        try:
            entries.append(ledger_post_earning(assignment_id=assignment.pk, now=T0))
        except Exception as exc:  # collected and asserted on in the main thread
            errors.append(exc)

    _join([_run(post) for _ in range(8)])

    assert errors == []
    assert len({e.pk for e in entries}) == 1
    assert LedgerEntry.objects.count() == 1
    assert Period.objects.count() == 1


def test_postings_racing_a_settlement_are_each_in_exactly_one_statement():
    experts = [make_expert() for _ in range(6)]
    project = make_paid_project(experts=experts, n_questions=4)
    seed = submit_and_post(project, experts[0], T0)
    pending = [submit(project, e, T0 + timedelta(minutes=i)) for i, e in enumerate(experts[1:])]
    start, errors = threading.Barrier(len(pending) + 1), []

    def post(assignment_id):
        start.wait()
        try:
            ledger_post_earning(assignment_id=assignment_id, now=WEEK_END - timedelta(seconds=1))
        except Exception as exc:  # collected and asserted on in the main thread
            errors.append(exc)

    def settle():
        start.wait()
        try:
            statement_settle_period(period_id=seed.period_id, now=WEEK_END)
        except Exception as exc:  # collected and asserted on in the main thread
            errors.append(exc)

    _join([_run(post, a.pk) for a in pending] + [_run(settle)])
    for period_id in Period.objects.filter(status="open").values_list("pk", flat=True):
        statement_settle_period(period_id=period_id, now=WEEK_END + timedelta(days=7))

    assert errors == []
    assert LedgerEntry.objects.count() == len(pending) + 1
    assert sum(s.entry_count for s in Statement.objects.all()) == len(pending) + 1
    assert ledger_reconcile() == []
