"""Issue 13's journey in Chromium: a PM runs two versions of a judge configuration against a
loopback chat-completions server, compares the runs, opens the worst item, sends it to the
rubric draft, then reads the convergence view and the benchmark quality gates.

The fake server answers each prompt with labels derived from a hash of its text, so the two
versions (the built-in prompt, then the same with one more instruction) label differently.
Celery runs eagerly: each run, its agreement report and the drift check finish inside the
start form's request.
"""
import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.judging.configs import builtin_prompt_template, judge_config_create, judge_config_edit
from annotation.models import JudgeRun, RubricItemSuggestion
from tests.annotation.test_agreement_report import PANEL, build
from tests.e2e.conftest import sign_in
from tests.e2e.test_judge_run import fast_judge  # noqa: F401  (autouse: short timeouts, eager tasks, loopback allowed)
from tests.support.fake_llm import FakeLLMServer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SECRET = "sk-e2e-versions-9a8b7c6d-never-rendered"
RUN_URL = re.compile(r"/judge-runs/(\d+)/$")
STRICTER = "\n请特别注意：回复是否具体回应了用户说出的感受，泛泛的安慰判为未命中。"


def _start(page, base: str, project_id: int, name: str, version_label: str, llm: FakeLLMServer) -> JudgeRun:
    page.goto(f"{base}/projects/{project_id}/judge-runs/")
    page.fill("#id_name", name)
    page.select_option("#id_config_version", label=version_label)
    page.fill("#id_base_url", llm.base_url)  # the model comes from the version
    page.fill("#id_api_key", SECRET)
    page.fill("#id_requests_per_second", "20")
    page.locator("#judge-start button[type=submit]").click()
    page.wait_for_url(RUN_URL)
    expect(page.locator("#judge-progress")).to_have_attribute("data-status", "done")
    return JudgeRun.objects.get(project_id=project_id, name=name)


def test_two_judge_versions_compared_worst_item_to_the_draft_convergence_and_gates(page, browser, live_server,
                                                                                   artifacts):
    project, _experts, _tasks, _ = build(PANEL, None)
    now = timezone.now()
    first = judge_config_create(project=project, name="heartbench", prompt_template=builtin_prompt_template(),
                                judge_model="fake-judge", created_by=project.created_by, now=now)
    second = judge_config_edit(config=first.config, prompt_template=builtin_prompt_template() + STRICTER,
                               judge_model="fake-judge", note="stricter on naming the feeling",
                               created_by=project.created_by, now=now)
    sign_in(page, live_server.url, project.created_by.username)
    base = live_server.url

    with FakeLLMServer() as llm:
        run_a = _start(page, base, project.pk, "judge-v1", "heartbench · v1 · fake-judge", llm)
        run_b = _start(page, base, project.pk, "judge-v2", "heartbench · v2 · fake-judge", llm)
        prompts = [r["messages"][0]["content"] for r in llm.requests]
    assert (run_a.config_version_id, run_b.config_version_id) == (first.pk, second.pk)
    assert sum(STRICTER.strip() in p for p in prompts) == len(prompts) // 2  # the second run's prompts only

    page.goto(f"{base}/projects/{project.pk}/judge/compare/?a={run_a.pk}&b={run_b.pk}")
    result = page.locator("#compare-result").inner_text()
    assert "McNemar" in result and "p =" in result
    page.screenshot(path=str(artifacts / "versions-compare-1440.png"), full_page=True)

    page.goto(f"{base}/projects/{project.pk}/judge/items/?run={run_b.pk}")
    worst = page.locator(".judge-items-table tbody tr").first
    key = re.search(r"q\d+:\d+", worst.inner_text()).group(0)
    worst.get_by_role("link").click()
    page.wait_for_url("**/judge/items/*/**")
    page.fill("#suggest-text", "请写明：须具体回应用户说出的感受")
    page.get_by_role("button", name="发送到评分标准草稿").click()
    page.wait_for_selector(".toasts", timeout=5000)
    assert RubricItemSuggestion.objects.filter(project=project, item_key=key).exists()

    page.goto(f"{base}/projects/{project.pk}/judge/convergence/")
    body = page.locator("main").inner_text()
    assert "heartbench v1" in body and "heartbench v2" in body
    assert page.locator("svg").count() >= 2  # the overall chart and one per dimension
    page.screenshot(path=str(artifacts / "versions-convergence-1440.png"), full_page=True)

    page.goto(f"{base}/projects/{project.pk}/dashboard/benchmark/?run={run_b.pk}")
    recompute = page.get_by_role("button", name="立即重新计算")
    if recompute.count():
        recompute.click()
    expect(page.locator("tr[data-gate]")).to_have_count(5, timeout=15000)
    page.screenshot(path=str(artifacts / "versions-gates-1440.png"), full_page=True)

    phone = browser.new_context(viewport={"width": 390, "height": 844}, locale="zh-CN", device_scale_factor=2)
    small = phone.new_page()
    sign_in(small, base, project.created_by.username)
    for name, path in (("convergence", "judge/convergence/"), ("gates", f"dashboard/benchmark/?run={run_b.pk}"),
                       ("compare", f"judge/compare/?a={run_a.pk}&b={run_b.pk}")):
        small.goto(f"{base}/projects/{project.pk}/{path}")
        assert small.evaluate("() => document.documentElement.scrollWidth") <= 390, name
        small.screenshot(path=str(artifacts / f"versions-{name}-390.png"), full_page=True)
    phone.close()

