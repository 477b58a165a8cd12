"""A real Celery worker, fed through Redis, computes and stores agreement reports."""
import os
import time
from contextlib import contextmanager

import pytest
import redis
from celery.contrib.testing.worker import start_worker

from annotation.agreement.tasks import agreement_report_compute_task, agreement_report_request_task
from annotation.models import AgreementReport
from config.celery import app
from tests.annotation.test_agreement_report import JUDGE, PANEL, build
from tests.support.faults import forget_celery_connections as _forget_connections

pytestmark = pytest.mark.django_db(transaction=True)


def redis_test_url() -> str:
    return os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


def redis_key_prefix() -> str:
    """A prefix for every broker and result key of this test process.

    Its queue is then its own, so the worker never sees (or steals) the messages of another
    xdist worker, or of another checkout's suite on the same Redis, and the cleanup deletes
    only its own keys where a flushdb would wipe theirs.
    """
    return f"rubrica-test:{os.environ.get('PYTEST_XDIST_WORKER', 'main')}:{os.getpid()}:"


def _delete_keys(url: str, prefix: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            client.delete(key)
    finally:
        client.close()


@contextmanager
def redis_worker():
    url, prefix = redis_test_url(), redis_key_prefix()
    options = ("broker_url", "result_backend", "task_always_eager",
               "broker_transport_options", "result_backend_transport_options")
    saved = {key: app.conf[key] for key in options}
    app.conf.update(
        broker_url=url, result_backend=url, task_always_eager=False,
        broker_transport_options={**saved["broker_transport_options"], "global_keyprefix": prefix},
        result_backend_transport_options={**saved["result_backend_transport_options"], "global_keyprefix": prefix},
    )
    _forget_connections()
    _delete_keys(url, prefix)
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            yield
    finally:
        app.conf.update(saved)
        _forget_connections()
        _delete_keys(url, prefix)


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
