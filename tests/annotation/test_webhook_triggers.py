"""The events a PM's systems wait for come from the real actions: a judge run that finishes, an export file
that is built, a period whose statements are issued. Each reaches the endpoint that subscribed to it, with
its payload, and no other endpoint (of the project, or of another project)."""
import json
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from annotation.exchange.export import ExportFilters
from annotation.exchange.export_jobs import export_job_build, export_job_create
from annotation.models import Task, WebhookEvent, WebhookMessage
from annotation.webhooks.services import webhook_endpoint_create
from config.celery import app as celery_app
from payments.services import period_close_now
from tests.annotation.test_judge_runs import start_and_run
from tests.factories import AdminFactory, PMFactory, make_project_with_tasks
from tests.payments.factories import T0, make_expert, make_paid_project, submit_and_post
from tests.support.fake_llm import FakeLLMServer
from tests.support.receiver import Receiver

pytestmark = pytest.mark.django_db

LOOPBACK_ALLOWED = override_settings(RUBRICA_OUTBOUND_ALLOWED_HOSTS=["127.0.0.1"], RUBRICA_WEBHOOK_BACKOFF_BASE_S=0,
                                     RUBRICA_WEBHOOK_MAX_ATTEMPTS=1)


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


def _endpoints(project, pm, receiver, event):
    """One endpoint subscribed to `event`, one of the same project subscribed to every other event, and one
    of another project subscribed to `event`."""
    now = timezone.now()
    subscribed = webhook_endpoint_create(project=project, url=receiver.url("/subscribed"), events=[event], by=pm,
                                         now=now).endpoint
    others = webhook_endpoint_create(project=project, url=receiver.url("/others"), by=pm, now=now,
                                     events=[e for e in WebhookEvent.values if e != event]).endpoint
    elsewhere_pm = PMFactory()
    elsewhere = make_project_with_tasks(n_questions=1, pm=elsewhere_pm)
    foreign = webhook_endpoint_create(project=elsewhere, url=receiver.url("/elsewhere"), events=[event],
                                      by=elsewhere_pm, now=now).endpoint
    return subscribed, others, foreign


def _only_message(subscribed, others, foreign, receiver, event) -> dict:
    """The one message of `event`, to the subscribed endpoint, delivered; its payload's data."""
    [message] = WebhookMessage.objects.filter(endpoint=subscribed)
    assert not WebhookMessage.objects.filter(endpoint__in=[others, foreign]).exists()
    assert (message.event, message.status) == (event, "delivered")
    [(method, path, _headers, body)] = receiver.received
    assert (method, path) == ("POST", "/subscribed")
    payload = json.loads(body)
    assert payload == message.payload and payload["event"] == event
    return payload["data"]


@LOOPBACK_ALLOWED
def test_a_finished_judge_run_emits_judge_run_finished_to_its_subscriber_only(
        settings, monkeypatch, receiver, django_capture_on_commit_callbacks):
    settings.RUBRICA_JUDGE_TIMEOUT_S = 0.5
    settings.RUBRICA_JUDGE_MAX_RETRIES = 2
    settings.RUBRICA_JUDGE_BACKOFF_BASE_S = 0.01
    settings.RUBRICA_JUDGE_BACKOFF_MAX_S = 0.05
    settings.REDIS_URL = ""  # a process-local rate limiter
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=2, items_per_question=2, pm=pm)
    ends = _endpoints(project, pm, receiver, WebhookEvent.JUDGE_RUN_FINISHED)

    with FakeLLMServer() as llm:
        run = start_and_run(project, llm, django_capture_on_commit_callbacks, created_by=pm)

    assert run.status == "done"
    data = _only_message(*ends, receiver, "judge_run.finished")
    assert data == {"project_id": project.pk, "judge_run_id": run.pk, "name": run.name, "status": "done",
                    "finished_at": run.finished_at.isoformat()}


@LOOPBACK_ALLOWED
def test_a_built_export_emits_export_ready_to_its_subscriber_only(settings, tmp_path, receiver,
                                                                  django_capture_on_commit_callbacks):
    settings.RUBRICA_EXPORT_DIR = str(tmp_path)
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=2, items_per_question=2, pm=pm)
    ends = _endpoints(project, pm, receiver, WebhookEvent.EXPORT_READY)
    job = export_job_create(project=project, owner=pm, fmt="jsonl", filters=ExportFilters(), now=timezone.now())
    assert not WebhookMessage.objects.exists()  # queued, not built: nothing is ready yet

    with django_capture_on_commit_callbacks(execute=True):
        built = export_job_build(job_id=job.pk)

    assert built.status == "done"
    data = _only_message(*ends, receiver, "export.ready")
    assert data == {"project_id": project.pk, "export_job_id": job.pk, "snapshot_id": str(built.snapshot_id),
                    "format": "jsonl", "rows": built.row_count, "expires_at": built.expires_at.isoformat()}


@LOOPBACK_ALLOWED
def test_issued_statements_emit_statement_issued_to_its_subscriber_only(receiver,
                                                                        django_capture_on_commit_callbacks):
    expert, admin, pm = make_expert(), AdminFactory(), PMFactory()
    project = make_paid_project(experts=[expert, pm])
    ends = _endpoints(project, pm, receiver, WebhookEvent.STATEMENT_ISSUED)
    submit_and_post(project, expert, T0)
    assert Task.objects.filter(project=project, submitted_count=1).exists()

    with django_capture_on_commit_callbacks(execute=True):
        [settlement] = period_close_now(actor=admin, project_id=project.pk, now=T0 + timedelta(hours=3))

    data = _only_message(*ends, receiver, "statement.issued")
    [statement] = settlement.statements
    assert data == {"project_id": project.pk, "period_id": settlement.period.pk,
                    "payout_batch_id": settlement.batch.pk, "statement_ids": [statement.pk],
                    "currency": settlement.batch.currency, "total_payable": str(settlement.batch.total)}
    assert settlement.batch.total > 0
