"""Webhooks: a registered endpoint receives each event signed, failures are retried with backoff and
logged per attempt, refused targets get nothing, and another project's PM reaches none of it."""
import hashlib
import hmac
import json
from datetime import timedelta
from unittest import mock

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.models import AuditEntry, WebhookAttempt, WebhookEndpoint, WebhookEvent, WebhookMessage
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from annotation.webhooks.services import (
    webhook_deliver,
    webhook_emit,
    webhook_endpoint_create,
    webhook_resend,
    webhook_signature,
    webhooks_sweep,
)
from core.errors import DomainError, NotFound
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks
from tests.support.receiver import Receiver

pytestmark = pytest.mark.django_db

LOOPBACK_ALLOWED = override_settings(RUBRICA_OUTBOUND_ALLOWED_HOSTS=["127.0.0.1"], RUBRICA_WEBHOOK_BACKOFF_BASE_S=0,
                                     RUBRICA_WEBHOOK_MAX_ATTEMPTS=3)
NOBODY_ALLOWED = override_settings(RUBRICA_OUTBOUND_ALLOWED_HOSTS=[], RUBRICA_WEBHOOK_MAX_ATTEMPTS=3)


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def project(pm):
    return make_project_with_tasks(n_questions=1, items_per_question=2, overlap=2, pm=pm)


def _endpoint(project, pm, url, events=(WebhookEvent.TASK_COMPLETED, WebhookEvent.CONSENSUS_READY)):
    return webhook_endpoint_create(project=project, url=url, events=list(events), by=pm, now=timezone.now())


def _complete_the_task(project):
    experts = [ExpertFactory() for _ in range(project.overlap)]
    for expert in experts:
        project_add_member(project=project, user=expert)
    for expert in experts:
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
        keys = [i.item_key for i in rubric_items_for_task(lease.task)]
        labels_submit(expert=expert, assignment_id=lease.pk, labels={k: 1 for k in keys}, now=timezone.now())
    return lease.task


@LOOPBACK_ALLOWED
def test_a_completed_task_reaches_the_endpoint_signed_with_its_secret(project, pm, receiver,
                                                                      django_capture_on_commit_callbacks):
    created = _endpoint(project, pm, receiver.url())

    with django_capture_on_commit_callbacks(execute=True):
        task = _complete_the_task(project)

    events = {}
    for _, _, headers, body in receiver.received:
        expected = webhook_signature(secret=created.secret, timestamp=headers["X-Rubrica-Timestamp"], body=body)
        assert hmac.compare_digest(headers["X-Rubrica-Signature"], expected)
        mac = hmac.new(created.secret.encode(), headers["X-Rubrica-Timestamp"].encode() + b"." + body, hashlib.sha256)
        assert headers["X-Rubrica-Signature"] == "sha256=" + mac.hexdigest()
        payload = json.loads(body)
        assert set(payload) == {"event", "id", "timestamp", "data"}
        events[payload["event"]] = payload["data"]
    assert set(events) == {"task.completed", "consensus.ready"}
    assert events["task.completed"]["task_id"] == task.pk
    assert events["task.completed"]["project_id"] == project.pk
    assert set(WebhookMessage.objects.values_list("status", flat=True)) == {"delivered"}


def test_a_completed_task_queues_nothing_for_a_disabled_endpoint_or_another_projects(pm):
    project = make_project_with_tasks(n_questions=2, items_per_question=2, overlap=2, pm=pm)
    disabled = _endpoint(project, pm, "https://hooks.example.com/off").endpoint
    disabled.is_active = False
    disabled.save(update_fields=["is_active"])
    other = make_project_with_tasks(n_questions=1, items_per_question=2, overlap=2, pm=pm)
    _endpoint(other, pm, "https://hooks.example.com/other")

    _complete_the_task(project)
    assert not WebhookMessage.objects.exists()

    _endpoint(project, pm, "https://hooks.example.com/on")
    _complete_the_task(project)
    assert sorted(WebhookMessage.objects.values_list("event", flat=True)) == ["consensus.ready", "task.completed"]


def test_the_secret_is_not_stored_in_plain_text(project, pm):
    created = _endpoint(project, pm, "https://hooks.example.com/in")

    assert created.secret not in WebhookEndpoint.objects.get().secret_encrypted


@LOOPBACK_ALLOWED
def test_a_500_is_retried_and_the_next_attempt_delivers(project, pm, receiver, django_capture_on_commit_callbacks):
    receiver.responses = [(500, {}), (200, {})]
    _endpoint(project, pm, receiver.url(), events=[WebhookEvent.JUDGE_RUN_FINISHED])

    with django_capture_on_commit_callbacks(execute=True):
        webhook_emit(project_id=project.pk, event=WebhookEvent.JUDGE_RUN_FINISHED, data={"judge_run_id": 1},
                     now=timezone.now())

    message = WebhookMessage.objects.get()
    assert (message.status, message.attempt_count) == ("delivered", 2)
    assert list(WebhookAttempt.objects.values_list("number", "status_code", "error_class")) == [
        (1, 500, "http_status"), (2, 200, "")]
    assert len(receiver.received) == 2


@LOOPBACK_ALLOWED
def test_a_target_that_keeps_failing_is_given_up_after_the_last_attempt_and_can_be_resent(
        project, pm, receiver, django_capture_on_commit_callbacks):
    receiver.responses = [(503, {})]
    _endpoint(project, pm, receiver.url(), events=[WebhookEvent.EXPORT_READY])
    with django_capture_on_commit_callbacks(execute=True):
        webhook_emit(project_id=project.pk, event=WebhookEvent.EXPORT_READY, data={}, now=timezone.now())
    message = WebhookMessage.objects.get()
    assert (message.status, message.attempt_count) == ("failed", 3)

    receiver.responses = [(200, {})]
    receiver.received.clear()
    with django_capture_on_commit_callbacks(execute=True):
        webhook_resend(project=project, message_id=message.pk, by=pm, now=timezone.now())

    message.refresh_from_db()
    assert (message.status, message.attempt_count) == ("delivered", 4)
    assert len(receiver.received) == 1


@NOBODY_ALLOWED
@pytest.mark.parametrize("url", ["https://127.0.0.1/hook", "https://localhost/hook",
                                 "https://169.254.169.254/latest/meta-data/", "https://10.0.0.8/hook",
                                 "https://[::1]/hook", "http://hooks.example.com/hook"])
def test_private_targets_are_refused_at_registration(project, pm, url):
    with pytest.raises(DomainError):
        _endpoint(project, pm, url)
    assert not WebhookEndpoint.objects.exists()


@NOBODY_ALLOWED
def test_a_name_resolving_to_loopback_is_refused_at_delivery_and_nothing_is_sent(project, pm):
    # A name passes the form check; delivery resolves it (here: to 127.0.0.1) and refuses.
    endpoint = WebhookEndpoint.objects.create(project=project, url="https://127.0.0.1.nip.io/hook",
                                              events=["export.ready"],
                                              secret_encrypted=_endpoint(project, pm, "https://x.example/").endpoint
                                              .secret_encrypted, created_by=pm, created_at=timezone.now())
    message = WebhookMessage.objects.create(endpoint=endpoint, event="export.ready", payload={},
                                            created_at=timezone.now())

    with mock.patch("core.outbound._system_resolve", return_value=["127.0.0.1"]):
        webhook_deliver(message_id=message.pk)

    message.refresh_from_db()
    assert message.status == "failed"
    assert list(message.attempts.values_list("status_code", "error_class")) == [(None, "refused")]


@LOOPBACK_ALLOWED
def test_a_redirect_to_loopback_is_refused(project, pm, receiver, django_capture_on_commit_callbacks):
    receiver.responses = [(307, {"Location": "https://localhost:1/steal"})]
    _endpoint(project, pm, receiver.url(), events=[WebhookEvent.EXPORT_READY])

    with django_capture_on_commit_callbacks(execute=True):
        webhook_emit(project_id=project.pk, event=WebhookEvent.EXPORT_READY, data={}, now=timezone.now())

    message = WebhookMessage.objects.get()
    assert message.status == "failed"
    assert message.attempts.get().error_class == "refused"


def test_an_event_no_endpoint_subscribed_to_queues_nothing(project, pm):
    _endpoint(project, pm, "https://hooks.example.com/in", events=[WebhookEvent.STATEMENT_ISSUED])

    assert webhook_emit(project_id=project.pk, event=WebhookEvent.TASK_COMPLETED, data={}, now=timezone.now()) == 0
    assert not WebhookMessage.objects.exists()


def test_the_pm_registers_an_endpoint_on_the_page_and_sees_the_secret_once(client, project, pm):
    client.force_login(pm)
    url = reverse("webhooks", args=[project.pk])

    posted = client.post(url, {"url": "https://hooks.example.com/in", "events": ["task.completed"]})
    created = client.get(url)
    again = client.get(url)

    assert posted.status_code == 302
    secret = created.context["created"]["secret"]
    assert secret.startswith("whsec_") and secret in created.content.decode()
    assert secret not in again.content.decode()
    assert "https://hooks.example.com/in" in again.content.decode()
    assert AuditEntry.objects.filter(action="webhook.create", project=project).count() == 1


def test_a_bad_url_on_the_page_answers_422_and_writes_nothing(client, project, pm):
    client.force_login(pm)

    response = client.post(reverse("webhooks", args=[project.pk]), {"url": "ftp://x", "events": ["task.completed"]})

    assert response.status_code == 422
    assert "此 URL 不可用" in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_another_projects_pm_gets_404_on_every_webhook_page(client, project, pm):
    endpoint = _endpoint(project, pm, "https://hooks.example.com/in").endpoint
    message = WebhookMessage.objects.create(endpoint=endpoint, event="task.completed", payload={},
                                            status="failed", created_at=timezone.now())
    client.force_login(PMFactory())

    assert client.get(reverse("webhooks", args=[project.pk])).status_code == 404
    assert client.post(reverse("webhooks", args=[project.pk]),
                       {"url": "https://evil.example/", "events": ["task.completed"]}).status_code == 404
    assert client.post(reverse("webhook_disable", args=[project.pk, endpoint.pk]),
                       {"confirmed": "yes"}).status_code == 404
    assert client.post(reverse("webhook_resend", args=[project.pk, message.pk])).status_code == 404
    endpoint.refresh_from_db()
    message.refresh_from_db()
    assert endpoint.is_active and message.status == "failed"
    assert WebhookEndpoint.objects.count() == 1


def test_a_message_of_another_project_cannot_be_resent_through_ones_own(project, pm):
    other_pm = PMFactory()
    other = make_project_with_tasks(n_questions=1, pm=other_pm)
    endpoint = _endpoint(project, pm, "https://hooks.example.com/in").endpoint
    message = WebhookMessage.objects.create(endpoint=endpoint, event="task.completed", payload={},
                                            status="failed", created_at=timezone.now())

    with pytest.raises(NotFound):
        webhook_resend(project=other, message_id=message.pk, by=other_pm, now=timezone.now())


def test_disabling_asks_first_then_stops_sending(client, project, pm):
    endpoint = _endpoint(project, pm, "https://hooks.example.com/in").endpoint
    client.force_login(pm)
    url = reverse("webhook_disable", args=[project.pk, endpoint.pk])

    asked = client.post(url)
    endpoint.refresh_from_db()
    assert asked.status_code == 200 and endpoint.is_active
    client.post(url, {"confirmed": "yes"})

    endpoint.refresh_from_db()
    assert not endpoint.is_active
    assert webhook_emit(project_id=project.pk, event=WebhookEvent.TASK_COMPLETED, data={}, now=timezone.now()) == 0


def test_the_delivery_log_page_shows_each_attempt_and_the_fragment_alone(client, project, pm):
    endpoint = _endpoint(project, pm, "https://hooks.example.com/in").endpoint
    message = WebhookMessage.objects.create(endpoint=endpoint, event="task.completed", payload={},
                                            status="failed", attempt_count=1, created_at=timezone.now())
    WebhookAttempt.objects.create(message=message, number=1, at=timezone.now(), status_code=502,
                                  error_class="http_status", duration_ms=12)
    client.force_login(pm)

    page = client.get(reverse("webhooks", args=[project.pk]))
    fragment = client.get(reverse("webhooks", args=[project.pk]), HTTP_HX_REQUEST="true")

    assert "HTTP 502" in page.content.decode()
    assert "HTTP 502" in fragment.content.decode() and "<html" not in fragment.content.decode()


@LOOPBACK_ALLOWED
def test_the_sweep_queues_again_a_pending_message_whose_chain_was_lost_and_leaves_fresh_ones(project, pm, receiver):
    endpoint = _endpoint(project, pm, receiver.url(), events=[WebhookEvent.EXPORT_READY]).endpoint
    old = timezone.now() - timedelta(days=1)
    lost = WebhookMessage.objects.create(endpoint=endpoint, event="export.ready", payload={"n": 1}, created_at=old)
    fresh = WebhookMessage.objects.create(endpoint=endpoint, event="export.ready", payload={"n": 2},
                                          created_at=timezone.now())

    assert webhooks_sweep(now=timezone.now()) == 1

    lost.refresh_from_db()
    fresh.refresh_from_db()
    assert (lost.status, fresh.status) == ("delivered", "pending")
    assert len(receiver.received) == 1


def test_the_webhook_page_reads_in_a_fixed_number_of_queries(client, project, pm, django_assert_max_num_queries):
    endpoint = _endpoint(project, pm, "https://hooks.example.com/in").endpoint
    for n in range(20):
        message = WebhookMessage.objects.create(endpoint=endpoint, event="task.completed", payload={"n": n},
                                                status="failed", attempt_count=1, created_at=timezone.now())
        WebhookAttempt.objects.create(message=message, number=1, at=timezone.now(), status_code=500,
                                      error_class="http_status", duration_ms=3)
    client.force_login(pm)

    with django_assert_max_num_queries(12):
        assert client.get(reverse("webhooks", args=[project.pk])).status_code == 200
