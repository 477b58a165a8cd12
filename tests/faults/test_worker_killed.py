"""A real Celery worker killed (SIGKILL, no shutdown) in the middle of an agreement job, a judge
run and a settlement: on restart each finishes, once.

The worker is a `celery -A config worker` process on the test database and a Redis database
of the fault tests. The test makes the task stop at a known point by holding a table lock from
a side connection (or, for the judge, by not answering), kills the worker while it waits,
ends its database session as PostgreSQL would once it noticed, and starts a new worker. The
message comes back to the queue after the broker's visibility timeout (acks_late) and the
idempotent task finishes the work.
"""
import threading

import pytest
from django.utils import timezone

from annotation.agreement.services import agreement_report_request
from annotation.judging.runs import judge_run_start
from annotation.models import AgreementReport, AuditAction, AuditEntry, JudgeLabel, JudgeRun, JudgeTaskResult, Label
from core.after_commit import task_send_on_commit
from core.models import OutboxTask
from experts.models import Notification
from payments.models import PayoutBatch, Period, Statement
from tests.factories import make_project_with_tasks
from tests.payments.factories import T0, make_expert, make_paid_project, submit, submit_and_post
from tests.support.fake_llm import FakeLLMServer, default_answer
from tests.support.faults import (
    books_and_consensus_clean,
    side_connection,
    terminate_backends,
    wait_for,
    wait_for_lock_waiters,
    worker_process,
)

# One xdist worker runs these: they share the fault tests' Redis database and loopback ports.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.xdist_group("faults"),
              pytest.mark.usefixtures("post_migrate_rows")]

LLM_PORT = 8652


def _kill_while_waiting(worker, table: str, mode: str, start_work) -> None:
    """Hold `table` locked in `mode`, start the work, kill the worker once it waits on the lock."""
    with side_connection() as lock:
        lock.execute(f"LOCK TABLE {table} IN {mode} MODE")
        start_work()
        pids = wait_for_lock_waiters(1)
        worker.kill()
        terminate_backends(pids)


def test_an_agreement_job_killed_mid_way_finishes_once_on_restart():
    experts = [make_expert() for _ in range(3)]
    project = make_paid_project(experts=experts, n_questions=2)
    for expert in experts:
        for _ in range(2):
            assert submit(project, expert, timezone.now()) is not None
    earlier = set(AgreementReport.objects.values_list("pk", flat=True))  # the eager reports of the submissions
    asked = {}

    with worker_process(RUBRICA_AGREEMENT_DEBOUNCE_S="0") as worker:
        worker.start(warm_next=True)

        def ask() -> None:
            asked["report"] = agreement_report_request(project=project, now=timezone.now(), debounce_s=0)

        _kill_while_waiting(worker, Label._meta.db_table, "ACCESS EXCLUSIVE", ask)
        report = AgreementReport.objects.get(pk=asked["report"].pk)
        assert report.status == AgreementReport.Status.RUNNING  # taken up, then its worker died

        worker.start()
        wait_for(lambda: AgreementReport.objects.filter(pk=report.pk, status=AgreementReport.Status.DONE).exists(),
                 what="the report")
        row = wait_for(lambda: OutboxTask.objects.filter(name="annotation.agreement_report_compute",
                                                         done_at__isnull=False).first(), what="the outbox row")

    report.refresh_from_db()
    assert set(AgreementReport.objects.exclude(pk__in=earlier).values_list("pk", flat=True)) == {report.pk}
    assert report.units == 2 * 2  # rubric items of the two tasks
    assert row.attempts == 1  # the broker gave the same message back; the sweep was not needed
    books_and_consensus_clean()


def test_a_settlement_killed_mid_way_is_rolled_back_and_settles_once_on_restart(monkeypatch):
    # Earnings are posted by hand at the instants the test chooses (see tests/payments/test_concurrency.py).
    monkeypatch.setattr("annotation.submission.services.task_send_on_commit", lambda name, **kwargs: None)
    experts = [make_expert() for _ in range(2)]
    project = make_paid_project(experts=experts, n_questions=2)
    entries = [submit_and_post(project, e, T0) for e in experts for _ in range(2)]
    period = Period.objects.get(pk=entries[0].period_id)

    with worker_process() as worker:
        worker.start(warm_next=True)
        # The settlement blocks when it writes its audit row: statements and batch are written, not committed.
        _kill_while_waiting(worker, AuditEntry._meta.db_table, "EXCLUSIVE",
                            lambda: task_send_on_commit("payments.periods_settle_due"))
        assert (Statement.objects.count(), PayoutBatch.objects.count()) == (0, 0)
        assert Period.objects.get(pk=period.pk).status == Period.Status.OPEN

        worker.start()
        wait_for(lambda: OutboxTask.objects.filter(name="payments.periods_settle_due", done_at__isnull=False).exists(),
                 what="the settlement")

    period.refresh_from_db()
    assert period.status == Period.Status.CLOSED
    assert sorted(Statement.objects.values_list("expert_id", "entry_count")) == sorted((e.pk, 2) for e in experts)
    assert PayoutBatch.objects.get().total == sum(e.amount for e in entries)
    assert Notification.objects.filter(kind="statement_issued").count() == 2
    assert AuditEntry.objects.filter(action=AuditAction.PERIOD_SETTLE).count() == 1
    books_and_consensus_clean()


def test_a_judge_run_whose_worker_is_killed_mid_request_finishes_once_on_restart(settings):
    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
    project = make_project_with_tasks(n_questions=3, items_per_question=3)
    release = threading.Event()
    first = threading.Event()

    def answer(prompt: str) -> str:
        if not first.is_set():
            first.set()
            release.wait(30)  # the worker asking is killed meanwhile; this answer reaches no one
        return default_answer(prompt)

    with FakeLLMServer(answer_fn=answer, port=LLM_PORT) as llm, worker_process(
            RUBRICA_JUDGE_TIMEOUT_S="2", RUBRICA_JUDGE_MAX_RETRIES="0", RUBRICA_JUDGE_BACKOFF_MAX_S="0.05",
            RUBRICA_JUDGE_CLAIM_MARGIN_S="1", RUBRICA_OUTBOUND_ALLOWED_HOSTS="127.0.0.1",
            RUBRICA_AGREEMENT_DEBOUNCE_S="0") as worker:
        worker.start(warm_next=True)
        run = judge_run_start(project=project, name="killed", base_url=llm.base_url, judge_model="fake-judge",
                              api_key="sk-test", api_key_env=None, requests_per_second=50, created_by=None)
        assert first.wait(30)
        worker.kill()  # within the request's 2 s timeout: the task is mid-request
        release.set()
        held = JudgeTaskResult.objects.get(run=run, attempts=1, status=JudgeTaskResult.Status.PENDING)

        # The new walker asks about the other tasks, then waits for the dead worker's claim to run
        # out (2 × 2 s + 1 s) and asks about that one.
        worker.start()
        wait_for(lambda: JudgeRun.objects.filter(pk=run.pk, status=JudgeRun.Status.DONE).exists(), what="the run")
        wait_for(lambda: AgreementReport.objects.filter(project=project, status=AgreementReport.Status.DONE).exists(),
                 what="the agreement report the finished run asks for")
        requests = len(llm.requests)

    results = JudgeTaskResult.objects.filter(run=run)
    assert {r.status for r in results} == {JudgeTaskResult.Status.DONE}
    assert sorted(r.attempts for r in results) == [1, 1, 2]
    assert JudgeTaskResult.objects.get(pk=held.pk).attempts == 2
    assert JudgeLabel.objects.filter(run=run).count() == 3 * 3  # each task's labels once
    assert requests == 3 + 1  # the interrupted ask, asked again once
    assert AgreementReport.objects.filter(project=project).count() == 1
    books_and_consensus_clean()
