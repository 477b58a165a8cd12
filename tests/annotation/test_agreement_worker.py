"""A real Celery worker, fed through Redis, computes and stores agreement reports."""
import os
import time
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import pytest
from celery.contrib.testing.worker import start_worker

from annotation.agreement.tasks import agreement_report_compute_task, agreement_report_request_task
from annotation.models import AgreementReport
from config.celery import app
from tests.annotation.test_agreement_report import JUDGE, PANEL, build

pytestmark = pytest.mark.django_db(transaction=True)

# A database number of its own, so the test never sees (or steals) anyone else's messages.
TEST_DB = "/13"


def redis_test_url() -> str:
    parts = urlsplit(os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0")
    return urlunsplit((parts.scheme, parts.netloc, TEST_DB, "", ""))


def _forget_connections() -> None:
    """Drop the broker pool and result backend built for the previous configuration."""
    app._pool = None
    app._backend_cache = None
    if hasattr(app._local, "backend"):
        del app._local.backend
    if "amqp" in app.__dict__:
        app.amqp._producer_pool = None


@contextmanager
def redis_worker():
    url = redis_test_url()
    saved = {key: app.conf[key] for key in ("broker_url", "result_backend", "task_always_eager")}
    app.conf.update(broker_url=url, result_backend=url, task_always_eager=False)
    _forget_connections()
    with app.connection_for_write() as conn:
        conn.default_channel.client.flushdb()
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            yield
    finally:
        app.conf.update(saved)
        _forget_connections()


def wait_for(condition, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out waiting for the worker")


def test_the_worker_computes_and_stores_the_report():
    project, _, _, run = build(PANEL, JUDGE)

    with redis_worker():
        report_id = agreement_report_compute_task.apply_async(kwargs={"project_id": project.pk}).get(timeout=120)

    report = AgreementReport.objects.get(pk=report_id)
    assert report.status == AgreementReport.Status.DONE
    assert report.judge_run_id == run.pk
    assert report.payload["judge"]["overall"]["agreement"] == round(15 / 21, 4)
    assert report.units == 24


def test_label_arrivals_within_the_debounce_window_make_one_report(settings):
    settings.RUBRICA_AGREEMENT_DEBOUNCE_S = 2
    project, _, _, _ = build(PANEL, JUDGE)

    with redis_worker():
        first = agreement_report_request_task.apply_async(kwargs={"project_id": project.pk}).get(timeout=60)
        second = agreement_report_request_task.apply_async(kwargs={"project_id": project.pk}).get(timeout=60)
        wait_for(lambda: AgreementReport.objects.filter(pk=first, status=AgreementReport.Status.DONE).exists())

    assert first == second
    assert AgreementReport.objects.filter(project=project).count() == 1
