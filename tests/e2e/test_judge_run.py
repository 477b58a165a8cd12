"""A PM starts a live judge run in Chromium against a loopback chat-completions server.

Celery runs eagerly here, so the run finishes inside the form's request and the run
page opens on the finished state; one task fails first, so the page also shows the
failures list, and "resume" asks again about that task only.
"""
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from annotation.models import JudgeRun
from config.celery import app as celery_app
from tests.e2e.conftest import sign_in
from tests.e2e.scenario import build_counselling_project
from tests.factories import PMFactory
from tests.support.fake_llm import FakeLLMServer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SECRET = "sk-e2e-4c1d8f0a9b7e6d5c-never-rendered"
RUN_URL = re.compile(r"/judge-runs/(\d+)/$")


@pytest.fixture(autouse=True)
def fast_judge(settings, monkeypatch) -> None:
    settings.RUBRICA_JUDGE_TIMEOUT_S = 1.0
    settings.RUBRICA_JUDGE_MAX_RETRIES = 2
    settings.RUBRICA_JUDGE_BACKOFF_BASE_S = 0.01
    settings.RUBRICA_JUDGE_BACKOFF_MAX_S = 0.05
    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.REDIS_URL = ""
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    # The first task meets three server errors in a row and is recorded as failed.
    with FakeLLMServer(script=["500", "500", "500"]) as server:
        yield server


def test_pm_starts_a_judge_run_and_watches_it_finish(live_server, page, artifacts, llm) -> None:
    pm = PMFactory(username="zhou.pm", first_name="周")
    project = build_counselling_project(pm=pm, questions=2)
    sign_in(page, live_server.url, pm.username)

    page.goto(f"{live_server.url}/projects/{project.pk}/judge-runs/")
    page.fill("#id_name", "gpt-judge-夜间")
    page.fill("#id_base_url", llm.base_url)
    page.fill("#id_judge_model", "fake-judge")
    page.fill("#id_api_key", SECRET)
    page.fill("#id_requests_per_second", "20")
    page.locator("#judge-start button[type=submit]").click()
    page.wait_for_url(RUN_URL)

    progress = page.locator("#judge-progress")
    expect(progress).to_have_attribute("data-status", "failed")
    expect(page.locator("#judge-done")).to_have_text("1")
    expect(page.locator("#judge-failed")).to_have_text("1")
    expect(page.locator("#judge-remaining")).to_have_text("0")
    expect(progress.locator("table")).to_contain_text("gave up after 3 attempts")
    page.screenshot(path=artifacts / "judge_run_failed.png", full_page=True)

    progress.locator("form[action$='/resume/'] button").click()

    expect(progress).to_have_attribute("data-status", "done")
    bar = page.locator("#judge-progress-bar")
    expect(bar).to_have_attribute("value", "2")
    expect(bar).to_have_attribute("max", "2")
    expect(page.locator("#judge-done")).to_have_text("2")
    expect(page.locator("#judge-failed")).to_have_text("0")
    expect(progress).not_to_have_attribute("hx-trigger", re.compile("."))  # finished: polling stopped
    page.screenshot(path=artifacts / "judge_run.png", full_page=True)

    assert SECRET not in page.content()
    assert len(llm.requests) == 3 + 1 + 1  # the failed task's three tries, the other task, one retry
    run = JudgeRun.objects.get()
    assert run.status == "done" and SECRET not in run.api_key_encrypted
    page.goto(f"{live_server.url}/projects/{project.pk}/judge-runs/")
    expect(page.locator("#judge-runs")).to_contain_text("gpt-judge-夜间")
    page.screenshot(path=artifacts / "judge_runs.png", full_page=True)
    assert SECRET not in page.content()
