"""Two settlements of one period at the same instant (real threads, PostgreSQL): one statement
per expert, one payout batch, the books balance."""
import threading

import pytest
from django.db import connections

from payments.models import PayoutBatch, Statement
from payments.services import periods_settle_due, statement_settle_period
from tests.payments.factories import T0, WEEK_END, make_expert, make_paid_project, submit_and_post
from tests.support.faults import books_and_consensus_clean

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres,
              pytest.mark.usefixtures("post_migrate_rows")]


@pytest.fixture(autouse=True)
def _posting_by_hand(monkeypatch):
    """Earnings are posted at the instants the test injects (see tests/payments/test_concurrency.py)."""
    monkeypatch.setattr("annotation.submission.services.task_send_on_commit", lambda name, **kwargs: None)


def test_an_admin_and_the_beat_settling_one_period_at_once_write_one_statement_each():
    experts = [make_expert() for _ in range(3)]
    project = make_paid_project(experts=experts, n_questions=2)
    entries = [submit_and_post(project, e, T0) for e in experts for _ in range(2)]
    period_id = entries[0].period_id
    start, results, errors = threading.Barrier(2), {}, []

    def run(name, settle):
        try:
            start.wait()
            results[name] = settle()
        except Exception as exc:  # collected and asserted on in the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=("admin", lambda: statement_settle_period(
                   period_id=period_id, now=WEEK_END))),
               threading.Thread(target=run, args=("beat", lambda: periods_settle_due(now=WEEK_END)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert not any(t.is_alive() for t in threads)
    # The beat may find the period closed already (it reports nothing) or wait for it and report it unchanged.
    created = [results["admin"].created] + [s.created for s in results["beat"]]
    assert created.count(True) == 1
    assert sorted(Statement.objects.values_list("expert_id", "entry_count")) == sorted((e.pk, 2) for e in experts)
    assert PayoutBatch.objects.get().total == sum(e.amount for e in entries)
    books_and_consensus_clean()
