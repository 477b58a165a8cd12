"""The judge under the microscope in Chromium: from the dashboard to the worst item, a suggestion, two runs compared."""
from datetime import timedelta

import pytest

from annotation.agreement.services import agreement_report_compute
from annotation.models import JudgeTaskResult, Label, RubricItemSuggestion
from tests.annotation.test_agreement_report import JUDGE, PANEL, T0, build
from tests.annotation.test_judge_items import JUDGE_SPLIT_WRONG, add_run
from tests.e2e.conftest import sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_pm_opens_the_worst_item_sends_it_to_the_draft_and_compares_two_runs(page, browser, live_server,
                                                                               artifacts):
    project, experts, tasks, run = build(PANEL, JUDGE)
    other = add_run(project, tasks, "judge-b", JUDGE_SPLIT_WRONG)
    for task in tasks[2:4]:  # q1, whose third item is the worst
        JudgeTaskResult.objects.create(run=other, task=task, status=JudgeTaskResult.Status.DONE,
                                       reason="逐条核对：第3条回复只是泛泛安慰，没有具体回应「失眠」，判为未命中。")
    Label.objects.filter(task=tasks[2], assignment__expert=experts[0]).update(note="回复点到了失眠，但很浅。")
    agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
    agreement_report_compute(project=project, judge_run=other, now=T0 + timedelta(days=2))
    sign_in(page, live_server.url, project.created_by.username)

    page.goto(f"{live_server.url}/projects/{project.pk}/dashboard/?tab=judge&run={other.pk}")
    assert "分区一致率" in page.locator("#quality-report").inner_text()
    page.get_by_role("link", name="按评分条目：评判模型错在哪里").click()
    page.wait_for_url("**/judge/items/**")
    first = page.locator(".judge-items-table tbody tr").first
    assert "q1:3" in first.inner_text() and "0.0%" in first.inner_text()
    page.screenshot(path=str(artifacts / "judge-items-1440.png"), full_page=True)

    first.get_by_role("link").click()
    page.wait_for_url("**/judge/items/*/**")
    assert page.locator(".item-unit").count() == 2
    assert "没有具体回应「失眠」" in page.locator(".item-units").inner_text()
    page.screenshot(path=str(artifacts / "judge-item-1440.png"), full_page=True)
    page.fill("#suggest-text", "回复须具体回应用户提到的失眠，而不是泛泛安慰")
    page.get_by_role("button", name="发送到评分标准草稿").click()
    page.wait_for_selector(".toasts", timeout=5000)
    assert RubricItemSuggestion.objects.filter(project=project, item_key="q1:3").exists()

    page.goto(f"{live_server.url}/projects/{project.pk}/judge/compare/?a={run.pk}&b={other.pk}")
    result = page.locator("#compare-result").inner_text()
    assert "p = 0.791" in result and "71.4%" in result and "61.9%" in result
    page.screenshot(path=str(artifacts / "judge-compare-1440.png"), full_page=True)

    phone = browser.new_context(viewport={"width": 390, "height": 844}, locale="zh-CN", device_scale_factor=2)
    small = phone.new_page()
    sign_in(small, live_server.url, project.created_by.username)
    for name, path in (("judge-items", f"judge/items/?run={other.pk}"),
                       ("judge-compare", f"judge/compare/?a={run.pk}&b={other.pk}")):
        small.goto(f"{live_server.url}/projects/{project.pk}/{path}")
        # Nothing wider than the phone except inside the scrolling tables.
        assert small.evaluate("() => document.documentElement.scrollWidth") <= 390
        small.screenshot(path=str(artifacts / f"{name}-390.png"), full_page=True)
    small.goto(f"{live_server.url}/projects/{project.pk}/judge/items/")
    small.locator(".judge-items-table tbody tr").first.get_by_role("link").click()
    small.wait_for_url("**/judge/items/*/**")
    assert small.evaluate("() => document.documentElement.scrollWidth") <= 390
    small.screenshot(path=str(artifacts / "judge-item-390.png"), full_page=True)
    phone.close()
