"""RUBRICA_LOG_FORMAT=json: one JSON object a line, naming the request (and for a task, the task and the
request it was sent from), so a log collector can follow one user's request across processes."""
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from config.celery import REQUEST_ID_HEADER, _send_request_id, app
from core.logging import JsonFormatter, TaskContextFilter
from core.request_id import RequestIdFilter, request_id_bind, request_id_reset


@pytest.fixture
def json_lines():
    """Everything logged while the test runs, through the JSON formatter and the project's filters."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    handler.addFilter(TaskContextFilter())
    root = logging.getLogger()
    requests_logger = logging.getLogger("rubrica.requests")
    old_levels = (root.level, requests_logger.level)
    root.addHandler(handler)
    requests_logger.setLevel(logging.INFO)
    logging.getLogger("tests.tasks").setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.removeHandler(handler)
    root.setLevel(old_levels[0])
    requests_logger.setLevel(old_levels[1])


@app.task(name="tests.logs_something")
def _logs_something(n: int) -> None:
    logging.getLogger("tests.tasks").info("working", extra={"n": n})


def test_a_record_is_one_json_object_with_the_fixed_fields_and_its_extras():
    record = logging.LogRecord("annotation.judging", logging.WARNING, __file__, 1, "judge run paused", None, None)
    record.run_id = 7
    record.request_id = "abc-123"

    line = JsonFormatter().format(record)

    body = json.loads(line)
    assert "\n" not in line
    assert body["level"] == "WARNING" and body["logger"] == "annotation.judging"
    assert body["message"] == "judge run paused" and body["request_id"] == "abc-123" and body["run_id"] == 7
    assert body["time"].endswith("+00:00") and "T" in body["time"]


def test_an_exception_stays_inside_the_one_line():
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())

    line = JsonFormatter().format(record)

    assert len(line.splitlines()) == 1
    assert "RuntimeError: boom" in json.loads(line)["exception"]


@pytest.mark.django_db
def test_each_request_logs_one_line_with_its_id_method_path_status_and_duration(json_lines):
    response = Client().get("/healthz", HTTP_X_REQUEST_ID="req-from-client-1")
    missing = Client().get("/no-such-page/")

    lines = [line for line in json_lines() if line["logger"] == "rubrica.requests"]
    first, second = lines[-2], lines[-1]
    assert response["X-Request-ID"] == "req-from-client-1"
    assert (first["request_id"], first["method"], first["path"], first["status"], first["route"]) == (
        "req-from-client-1", "GET", "/healthz", 200, "healthz")
    assert isinstance(first["duration_ms"], float) and first["duration_ms"] >= 0
    assert (second["status"], second["request_id"]) == (404, missing["X-Request-ID"])


def test_a_task_logs_with_its_id_and_the_request_id_it_was_sent_with(json_lines):
    result = _logs_something.apply(args=[3], headers={REQUEST_ID_HEADER: "req-42"})

    [line] = [line for line in json_lines() if line["message"] == "working"]
    assert (line["task_id"], line["task_name"], line["request_id"], line["n"]) == (
        result.id, "tests.logs_something", "req-42", 3)


def test_a_task_sent_outside_a_request_logs_without_a_request_id(json_lines):
    result = _logs_something.apply(args=[1])

    [line] = [line for line in json_lines() if line["message"] == "working"]
    assert (line["task_id"], line["request_id"]) == (result.id, "")


def test_sending_a_task_during_a_request_puts_the_request_id_in_its_headers():
    token = request_id_bind("req-77")
    try:
        during: dict = {}
        _send_request_id(headers=during)
    finally:
        request_id_reset(token)
    outside: dict = {}
    _send_request_id(headers=outside)

    assert during == {REQUEST_ID_HEADER: "req-77"}
    assert outside == {}


def test_the_setting_switches_the_console_to_json_lines():
    env = {k: v for k, v in os.environ.items() if k != "RUBRICA_LOG_FORMAT"} | {"RUBRICA_LOG_FORMAT": "json"}
    code = ("import django, logging; django.setup(); "
            "logging.getLogger('annotation').warning('lease expired', extra={'assignment_id': 5})")

    done = subprocess.run([sys.executable, "-c", code], cwd=Path(settings.BASE_DIR), env=env, capture_output=True,
                          text=True, timeout=60)

    [line] = [json.loads(raw) for raw in done.stderr.splitlines() if raw.startswith("{")]
    assert done.returncode == 0
    assert {k: line[k] for k in ("level", "logger", "message", "request_id", "assignment_id")} == {
        "level": "WARNING", "logger": "annotation", "message": "lease expired", "request_id": "",
        "assignment_id": 5}
