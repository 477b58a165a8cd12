"""The quality dashboard in Chromium: charts drawn under the strict CSP, judge run switched by htmx."""
from datetime import timedelta

import pytest

from annotation.agreement.services import agreement_report_compute
from annotation.models import JudgeLabel, JudgeRun
from annotation.selectors import rubric_items_for_task
from tests.annotation.test_agreement_report import JUDGE, PANEL, T0, build
from tests.e2e.conftest import sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MODEL_CHART_DRAWN = ("() => window.Chart && "
                     "window.Chart.getChart(document.querySelector(\"canvas[data-chart='by-model']\"))")


def drawn(page, name: str) -> bool:
    return page.evaluate("name => Boolean(window.Chart && window.Chart.getChart("
                         "document.querySelector(`canvas[data-chart='${name}']`)))", name)


def test_the_dashboard_draws_its_charts_and_switches_judge_runs(page, live_server, artifacts):
    project, _, tasks, run = build(PANEL, JUDGE)
    other = JudgeRun.objects.create(project=project, rubric_version=tasks[0].rubric_version, name="always-hit",
                                    source=JudgeRun.Source.IMPORTED, status=JudgeRun.Status.DONE)
    JudgeLabel.objects.bulk_create(JudgeLabel(run=other, task=task, rubric_item=item, value=1)
                                   for task in tasks for item in rubric_items_for_task(task))
    agreement_report_compute(project=project, judge_run=other, now=T0 + timedelta(days=1))
    agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=2))
    sign_in(page, live_server.url, project.created_by.username)

    base = f"{live_server.url}/projects/{project.pk}/dashboard/"
    # The first screen: headline cards and the progress chart; the other charts sit on their tabs.
    page.goto(base)
    page.wait_for_function("() => window.Chart && window.Chart.getChart("
                           "document.querySelector(\"canvas[data-chart='labels-per-day']\"))")
    assert page.locator("[data-card]").count() == 4
    assert page.locator("#quality-report").inner_text().count("71.4%") >= 1
    page.screenshot(path=str(artifacts / "quality-dashboard.png"), full_page=True)
    page.locator("[data-card='judge'] a").click()
    page.wait_for_url("**/dashboard/?tab=judge**")
    page.wait_for_function(MODEL_CHART_DRAWN)
    assert drawn(page, "by-dimension") and drawn(page, "by-model")
    page.goto(base + "?tab=experts")
    page.wait_for_function("() => document.querySelectorAll('canvas.sparkline').length === 3")
    assert page.locator("canvas.sparkline").count() == 3
    page.goto(base + "?tab=leaderboard")
    page.wait_for_function("() => window.Chart && window.Chart.getChart("
                           "document.querySelector(\"canvas[data-chart='leaderboard']\"))")

    page.goto(base + "?tab=judge")
    page.wait_for_function(MODEL_CHART_DRAWN)
    page.select_option("#run-select", str(other.pk))
    page.wait_for_url(f"**/dashboard/?tab=judge&run={other.pk}")
    page.wait_for_function("() => document.querySelector('#quality-report').innerText.includes('47.6%')")
    page.wait_for_function(MODEL_CHART_DRAWN)
    assert drawn(page, "by-dimension") and drawn(page, "by-model")

    page.goto(base + "?tab=disagreements")
    page.locator("#q-disagree ~ .table-scroll table a").first.click()
    page.wait_for_url("**/quality/items/**")
    assert page.locator("tr[id^='item-']").count() >= 1
    page.screenshot(path=str(artifacts / "quality-items.png"), full_page=True)
