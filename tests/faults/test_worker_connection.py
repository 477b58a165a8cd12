"""A real worker keeps its database connection from one follow-up to the next (CONN_MAX_AGE), and a
connection the database ended between two tasks costs the next task nothing: it reconnects."""
import pytest
from django.db import connection
from django.utils import timezone

from core.after_commit import FOLLOW_UPS_TASK
from core.models import OutboxTask
from payments.models import LedgerEntry
from tests.payments.factories import make_expert, make_paid_project, submit
from tests.support.faults import (
    books_and_consensus_clean,
    side_connection,
    terminate_backends,
    wait_for,
    worker_process,
)

# One xdist worker runs these: they share the fault tests' Redis database.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.xdist_group("faults"),
              pytest.mark.usefixtures("post_migrate_rows")]


def _other_sessions() -> list[tuple[int, object]]:
    """(pid, backend_start) of the sessions on the test database other than this test's own."""
    with side_connection() as side:
        side.autocommit = True
        return side.execute("SELECT pid, backend_start FROM pg_stat_activity WHERE datname = current_database() "
                            "AND pid NOT IN (pg_backend_pid(), %s) AND backend_type = 'client backend'",
                            [connection.connection.info.backend_pid]).fetchall()


def _follow_ups():
    """The outbox rows of the submissions' follow-ups (one batch each; core.after_commit)."""
    return OutboxTask.objects.filter(name=FOLLOW_UPS_TASK).order_by("pk")


def _all_done(count: int) -> bool:
    return _follow_ups().filter(done_at__isnull=False).count() >= count


def test_the_worker_keeps_one_connection_across_follow_ups_and_reconnects_after_it_was_ended():
    experts = [make_expert() for _ in range(4)]
    project = make_paid_project(experts=experts, n_questions=2, overlap=3)

    with worker_process(DB_CONN_MAX_AGE="60") as worker:
        worker.start()
        assert submit(project, experts[0], timezone.now()) is not None
        wait_for(lambda: _all_done(1), what="the first follow-ups")
        first = _other_sessions()
        # Celery's own fixup would have closed it after the task: no session of the worker would be left.
        assert len(first) == 1, first
        assert submit(project, experts[1], timezone.now()) is not None
        wait_for(lambda: _all_done(2), what="the second follow-ups")
        assert _other_sessions() == first  # another task, the same session

        terminate_backends([first[0][0]])  # a restart or failover of the database, between two tasks
        wait_for(lambda: not _other_sessions(), what="the backend to end")
        for expert in experts[2:]:
            assert submit(project, expert, timezone.now()) is not None
        wait_for(lambda: _all_done(4), what="the follow-ups after the reconnect")
        assert "OperationalError" not in worker.output()
        assert len(_other_sessions()) == 1

    # Each follow-up ran once, on its first delivery: the ended connection failed no task.
    assert list(_follow_ups().values_list("attempts", flat=True)) == [1, 1, 1, 1]
    assert LedgerEntry.objects.count() == 4
    books_and_consensus_clean()
