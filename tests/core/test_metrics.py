"""`/metrics`: refused without an admin session or the scraper's token; with one, Prometheus text that
names request latency by route, queue depth, task outcomes and open leases with the values they have."""
import secrets
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from annotation.assignment.services import assignment_claim_next
from annotation.services import project_add_member
from config.celery import app
from tests.factories import AdminFactory, ExpertFactory, make_project_with_tasks

# One xdist worker runs these: the task outcome counts live in the one Redis hash every worker shares,
# and two tests counting `tests.metrics_succeeds` at once each saw the other's count.
pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("metrics_counts")]
TOKEN = "metrics-" + "t" * 32


@pytest.fixture
def token(settings):
    settings.RUBRICA_METRICS_TOKEN = TOKEN
    return TOKEN


def _families(body: bytes) -> dict:
    return {family.name: family for family in text_string_to_metric_families(body.decode())}


def _value(families: dict, family: str, sample: str, **labels: str) -> float:
    matches = [s.value for s in families[family].samples if s.name == sample and all(
        s.labels.get(k) == v for k, v in labels.items())]
    assert len(matches) == 1, f"{sample} {labels}: {matches}"
    return matches[0]


@app.task(name="tests.metrics_succeeds")
def _succeeds() -> str:
    return "ok"


@app.task(name="tests.metrics_fails")
def _fails() -> None:
    raise ValueError("broken on purpose")


@app.task(name="tests.metrics_retries", bind=True, max_retries=1, default_retry_delay=0)
def _retries(self) -> None:
    if self.request.retries == 0:
        raise self.retry(countdown=0)


def test_anonymous_a_wrong_token_and_a_non_admin_are_refused(token):
    anonymous = Client().get("/metrics")
    wrong = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer " + "x" * len(TOKEN))
    expert = Client()
    expert.force_login(ExpertFactory())

    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"].startswith("Bearer")
    assert wrong.status_code == 401
    assert expert.get("/metrics").status_code == 403
    assert b"rubrica_" not in anonymous.content + wrong.content


def test_without_a_configured_token_no_bearer_is_accepted(settings):
    settings.RUBRICA_METRICS_TOKEN = ""

    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401


def test_the_token_reads_latency_by_route_leases_and_queue_depth(token, settings):
    project = make_project_with_tasks(n_questions=3)
    experts = [ExpertFactory() for _ in range(2)]
    for expert in experts:
        project_add_member(project=project, user=expert)
        assignment_claim_next(project=project, expert=expert, now=timezone.now())
    stale = ExpertFactory()
    project_add_member(project=project, user=stale)
    assignment_claim_next(project=project, expert=stale, now=timezone.now() - timedelta(days=2))  # expired by now
    queue = f"metrics-test-{secrets.token_hex(4)}"
    settings.RUBRICA_METRICS_QUEUES = [queue]
    broker = redis.Redis.from_url(settings.REDIS_URL)
    broker.rpush(queue, "a", "b", "c")
    client = Client()
    for _ in range(3):
        assert client.get("/healthz").status_code == 200

    try:
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    finally:
        broker.delete(queue)
        broker.close()

    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    families = _families(response.content)
    assert _value(families, "rubrica_http_request_duration_seconds", "rubrica_http_request_duration_seconds_count",
                  route="healthz", method="GET", status="200") >= 3
    assert _value(families, "rubrica_http_request_duration_seconds", "rubrica_http_request_duration_seconds_bucket",
                  route="healthz", method="GET", status="200", le="+Inf") >= 3
    assert _value(families, "rubrica_leases_open", "rubrica_leases_open") == 2
    assert _value(families, "rubrica_celery_queue_length", "rubrica_celery_queue_length", queue=queue) == 3
    assert _value(families, "rubrica_redis_up", "rubrica_redis_up") == 1


def test_a_path_no_url_matches_is_one_route_label_not_one_per_path(token):
    client = Client()
    for n in range(3):
        client.get(f"/no-such-page-{secrets.token_hex(4)}-{n}/")

    families = _families(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content)

    routes = {s.labels["route"] for s in families["rubrica_http_request_duration_seconds"].samples}
    assert "unmatched" in routes
    assert not any(route.startswith("no-such-page") or "/" in route for route in routes)


def test_task_outcomes_are_counted_by_task_and_outcome_for_an_admin_session():
    admin = Client()
    admin.force_login(AdminFactory())

    def counts() -> dict[tuple[str, str], float]:
        families = _families(admin.get("/metrics").content)
        return {(s.labels["task"], s.labels["outcome"]): s.value for s in families["rubrica_celery_tasks"].samples
                if s.name == "rubrica_celery_tasks_total"}

    before = counts()
    _succeeds.apply()
    _succeeds.apply()
    _fails.apply(throw=False)
    _retries.apply(throw=False)
    after = counts()

    def delta(task: str, outcome: str) -> float:
        return after.get((task, outcome), 0) - before.get((task, outcome), 0)

    assert delta("tests.metrics_succeeds", "succeeded") == 2
    assert delta("tests.metrics_fails", "failed") == 1
    assert delta("tests.metrics_fails", "succeeded") == 0
    assert delta("tests.metrics_retries", "retried") == 1
    assert settings.REDIS_URL  # the counters live in Redis, as in production


def test_a_failing_source_leaves_the_other_metrics_readable(token, monkeypatch):
    from core import metrics

    def broken() -> float:
        raise RuntimeError("database gone")

    monkeypatch.setattr(metrics, "_gauge_sources", [("rubrica_broken", "fails", broken), *metrics._gauge_sources])

    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    families = _families(response.content)
    assert response.status_code == 200
    assert "rubrica_broken" not in families and "rubrica_leases_open" in families


def test_with_redis_gone_a_task_still_succeeds_and_the_scrape_says_redis_is_down(token, settings, caplog):
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    healthy = settings.REDIS_URL
    admin = Client()
    admin.force_login(AdminFactory())
    before = _families(admin.get("/metrics").content)
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"

    result = _succeeds.apply()
    families = _families(Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content)

    assert result.successful()
    assert "task outcome not counted" in caplog.text
    assert _value(families, "rubrica_redis_up", "rubrica_redis_up") == 0
    # Back on the healthy Redis, counting goes on where it was (the dead URL's client is not reused).
    settings.REDIS_URL = healthy
    _succeeds.apply()
    after = _families(admin.get("/metrics").content)

    def succeeded(found: dict) -> float:
        return next((s.value for s in found["rubrica_celery_tasks"].samples if s.name == "rubrica_celery_tasks_total"
                     and s.labels == {"task": "tests.metrics_succeeds", "outcome": "succeeded"}), 0)

    assert succeeded(after) == succeeded(before) + 1
