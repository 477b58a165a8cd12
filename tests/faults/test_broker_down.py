"""Redis unavailable (the broker and the cache): submissions still commit, their follow-up work
waits in the outbox and runs once when Redis is back."""
import socket

import pytest
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import AgreementReport, Assignment, Label
from config.settings.integrations import redis_cache
from core.models import OutboxTask
from core.outbox import outbox_sweep
from payments.models import LedgerEntry
from payments.reconciliation import ledger_reconcile
from tests.payments.factories import make_expert, make_paid_project
from tests.support.faults import books_and_consensus_clean, celery_broker, wait_for, worker_process

# One xdist worker runs these: they share the fault tests' Redis database and loopback ports.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.xdist_group("faults"),
              pytest.mark.usefixtures("post_migrate_rows")]

# A loopback port of this suite's range with nothing listening: every connection is refused.
CLOSED_PORT = 8651


def _closed_broker_url() -> str:
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", CLOSED_PORT)) != 0, "something listens on the closed port"
    return f"redis://127.0.0.1:{CLOSED_PORT}/0"


def _pull_and_submit(expert, project, labels_of) -> tuple[int, dict]:
    client = APIClient()
    client.force_authenticate(expert)
    lease = client.post(f"/api/v1/projects/{project.pk}/next-task/")
    assert lease.status_code == 200, lease.content
    body = lease.json()
    labels = {str(item["id"]): labels_of(item) for item in body["rubric_items"]}
    answer = client.post(f"/api/v1/assignments/{body['id']}/submit/", {"labels": labels}, format="json",
                         HTTP_IDEMPOTENCY_KEY=f"k-{expert.pk}")
    return answer.status_code, answer.json()


def test_submissions_commit_while_the_broker_is_down_and_their_work_runs_once_it_is_back():
    experts = [make_expert() for _ in range(3)]
    project = make_paid_project(experts=experts, n_questions=1)
    votes = [lambda item: 1, lambda item: 1, lambda item: 0]

    closed = _closed_broker_url()
    # The cache on the same dead Redis: the API's throttles count in it, and pages read it.
    with celery_broker(closed), override_settings(CACHES={"default": redis_cache(closed)}):
        answers = [_pull_and_submit(e, project, v) for e, v in zip(experts, votes, strict=True)]
        page = APIClient()
        page.force_login(experts[0])
        home = page.get("/")

    assert home.status_code == 200
    assert [status for status, _ in answers] == [201, 201, 201]
    assert answers[-1][1]["task_complete"] is True
    assert Assignment.objects.filter(status=Assignment.Status.SUBMITTED).count() == 3
    assert Label.objects.count() == 3 * 2
    # One row per submission, its follow-up work in order; the last one completed the task.
    pending = list(OutboxTask.objects.filter(done_at__isnull=True).order_by("pk").values_list("name", "kwargs"))
    assert [name for name, _ in pending] == ["core.follow_ups_run"] * 3
    steps = [[step[0] for step in kwargs["steps"]] for _, kwargs in pending]
    follow_ups = ["payments.ledger_post_earning", "annotation.expert_evaluate", "annotation.review_flags_check"]
    assert steps == [follow_ups, follow_ups, ["annotation.agreement_report_request", *follow_ups]]
    assert not OutboxTask.objects.filter(attempts__gt=0).exists()  # none reached the broker
    assert not LedgerEntry.objects.exists()  # the earnings wait for the broker, nothing ran
    # Until then the books show the three earnings as missing, and only that.
    assert [p.code for p in ledger_reconcile()] == ["earning_missing"] * 3

    with worker_process(RUBRICA_AGREEMENT_DEBOUNCE_S="0") as worker:
        worker.start()
        assert outbox_sweep(now=timezone.now()) == 3
        wait_for(lambda: not OutboxTask.objects.filter(done_at__isnull=True).exists(), what="the outbox to drain")
        # The sweep finds nothing left to send: each piece of work ran once.
        assert outbox_sweep(now=timezone.now()) == 0

    assert LedgerEntry.objects.filter(kind=LedgerEntry.Kind.EARNING).count() == 3
    assert sorted(LedgerEntry.objects.values_list("expert_id", flat=True)) == sorted(e.pk for e in experts)
    assert AgreementReport.objects.filter(project=project, status=AgreementReport.Status.DONE).count() == 1
    assert OutboxTask.objects.filter(attempts=1).count() == OutboxTask.objects.count()
    books_and_consensus_clean()
