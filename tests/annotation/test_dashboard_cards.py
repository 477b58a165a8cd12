"""The quality dashboard's first screen: four headline cards, each linking to its detail, and the tabs."""
import re
from datetime import date, timedelta
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.agreement.services import agreement_report_compute
from annotation.dashboard.context import forecast_finish
from annotation.models import Assignment, Project, Task
from payments.ledger import ledger_post_earning
from payments.selectors import project_cost
from tests.annotation.test_agreement_report import JUDGE, PANEL, T0, build
from tests.factories import PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def reported():
    project, experts, tasks, run = build(PANEL, JUDGE)
    report = agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
    return project, experts, tasks, run, report


def page_url(project) -> str:
    return reverse("quality_dashboard", args=[project.pk])


def card(html: str, key: str) -> str:
    match = re.search(rf'<li class="headline-card[^"]*" data-card="{key}">(.*?)</li>', html, re.S)
    assert match, f"no {key} card"
    return unescape(match.group(1))


def test_the_first_screen_is_four_cards_and_no_long_table(client, reported):
    project, experts, *_ = reported
    client.force_login(project.created_by)

    html = client.get(page_url(project), HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert re.findall(r'data-card="(\w+)"', html) == ["judge", "experts", "time", "cost"]
    assert "<table" not in html  # the long tables live on the tabs
    assert experts[0].expert_profile.pseudonym not in html
    for tab in ("judge", "experts", "zones", "leaderboard", "disagreements"):
        assert f"?tab={tab}" in html
    assert f'href="{page_url(project)}?tab=judge"' in card(html, "judge")
    assert f'href="{page_url(project)}?tab=experts"' in card(html, "experts")
    assert f'href="{reverse("board", args=[project.pk])}"' in card(html, "time")
    assert f'href="{reverse("project_costs", args=[project.pk])}"' in card(html, "cost")


def test_the_judge_card_gives_the_headline_agreement_its_interval_and_the_bar(client, reported):
    project, _, _, _, report = reported
    overall = report.payload["judge"]["overall"]
    low, high = overall["agreement_ci"]
    client.force_login(project.created_by)

    passing = card(client.get(page_url(project), HTTP_ACCEPT_LANGUAGE="en").content.decode(), "judge")
    Project.objects.filter(pk=project.pk).update(judge_agreement_bar_pct=int(100 * overall["agreement"]) + 1)
    failing = card(client.get(page_url(project), HTTP_ACCEPT_LANGUAGE="en").content.decode(), "judge")

    headline = f"{100 * overall['agreement']:.1f}%"
    assert overall["agreement"] < 0.75  # so the default bar of 75% fails it, and a low bar passes
    assert headline in passing and f"{100 * low:.1f}% – {100 * high:.1f}%" in passing
    assert "bar 75%" in passing and "below the bar" in passing
    assert f"bar {int(100 * overall['agreement']) + 1}%" in failing and "below the bar" in failing
    Project.objects.filter(pk=project.pk).update(judge_agreement_bar_pct=50)
    lowered = card(client.get(page_url(project), HTTP_ACCEPT_LANGUAGE="en").content.decode(), "judge")
    assert "bar 50%" in lowered and "passes" in lowered
    assert "headline-pass" in client.get(page_url(project)).content.decode()


def test_the_experts_card_gives_ac1_with_its_interval_and_the_open_alerts(client, reported):
    project, _, _, _, report = reported
    panel = report.payload["panel"]["overall"]
    alerts = sum(bool((r.get("peer") or {}).get("alert_active")) + bool((r.get("golden") or {}).get("alert_active"))
                 for r in report.payload["experts"])
    client.force_login(project.created_by)

    shown = card(client.get(page_url(project), HTTP_ACCEPT_LANGUAGE="en").content.decode(), "experts")

    low, high = panel["gwet_ac1_ci"]
    assert low is not None and low <= panel["gwet_ac1"] <= high
    assert f"AC1 {panel['gwet_ac1']:.2f}" in shown and f"{low:.2f} – {high:.2f}" in shown
    assert f"α {panel['krippendorff_alpha']:.2f}" in shown
    assert f"{alerts} open alert" in shown


def test_the_time_card_forecasts_the_finish_from_the_last_seven_days(client):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=10, items_per_question=1, pm=pm)
    today = timezone.localdate()
    project.due_date = today + timedelta(days=3)
    project.save(update_fields=["due_date"])
    done = list(Task.objects.filter(project=project).order_by("pk")[:4])
    # Three completed within the week, one long ago: 3/7 a day, 6 left -> 14 days, past the due date.
    for i, task in enumerate(done):
        at = timezone.now() - timedelta(days=1 if i < 3 else 30)
        Task.objects.filter(pk=task.pk).update(status=Task.Status.COMPLETE, completed_at=at, live_count=3,
                                               submitted_count=3)
    client.force_login(pm)

    shown = card(client.get(page_url(project), HTTP_ACCEPT_LANGUAGE="en").content.decode(), "time")

    assert "4 / 10" in shown
    assert f"finish {(today + timedelta(days=14)).isoformat()}" in shown
    assert f"due {project.due_date.isoformat()}" in shown and ">late<" in shown


def test_the_forecast_without_pace_or_without_a_due_date_says_so():
    today = date(2026, 12, 1)

    assert forecast_finish(done=5, total=5, completed_recently=0, today=today, due=today).finish == today
    stalled = forecast_finish(done=1, total=5, completed_recently=0, today=today, due=today)
    assert stalled.finish is None and stalled.late is None
    brisk = forecast_finish(done=1, total=8, completed_recently=7, today=today, due=today + timedelta(days=7))
    assert brisk.finish == today + timedelta(days=7) and brisk.late is False
    assert forecast_finish(done=1, total=8, completed_recently=7, today=today, due=None).late is None


def test_the_cost_card_reads_the_costs_pages_current_period(client, reported):
    project, *_ = reported
    for assignment in Assignment.objects.filter(task__project=project, status=Assignment.Status.SUBMITTED):
        ledger_post_earning(assignment_id=assignment.pk, now=assignment.submitted_at)
    client.force_login(project.created_by)

    shown = card(client.get(page_url(project), HTTP_ACCEPT_LANGUAGE="en").content.decode(), "cost")

    costs = project_cost(project)
    latest = costs.periods[0]
    assert latest.net > 0
    assert f"{latest.net} {costs.currency}" in shown
    if latest.per_label is not None:
        assert f"{latest.per_label} per consensus label" in shown
    else:
        assert "no consensus label this period" in shown


def test_before_any_pay_period_the_cost_card_says_so(client):
    pm = PMFactory()
    project = make_project_with_tasks(pm=pm)
    client.force_login(pm)

    shown = card(client.get(page_url(project), HTTP_ACCEPT_LANGUAGE="en").content.decode(), "cost")

    assert "no pay period yet" in shown and "—" in shown


def test_the_cards_read_in_chinese_and_an_unknown_tab_is_the_first_screen(client, reported):
    project, *_ = reported
    client.force_login(project.created_by)

    html = client.get(page_url(project), {"tab": "nonsense"}, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()

    assert "评审模型可信吗？" in html and "专家之间一致吗？" in html and "进度能按时完成吗？" in html
    assert "花费多少？" in html and 'data-card="judge"' in html


def test_the_overview_runs_a_bounded_number_of_queries(client, reported, django_assert_max_num_queries):
    project, *_ = reported
    client.force_login(project.created_by)

    with django_assert_max_num_queries(12):  # as many as the 100,000-task bench reads (bench/pages.py)
        response = client.get(page_url(project))

    assert response.status_code == 200


def test_the_bar_is_a_project_setting_with_its_range(client):
    pm = PMFactory()
    project = make_project_with_tasks(pm=pm)
    client.force_login(pm)
    url = reverse("project_settings", args=[project.pk])
    form = client.get(url).context["form"]

    refused = client.post(url, {**{k: v for k, v in form.items() if v is not None}, "judge_agreement_bar_pct": "101"})
    accepted = client.post(url, {**{k: v for k, v in form.items() if v is not None}, "judge_agreement_bar_pct": "82"})

    assert refused.status_code == 422
    assert accepted.status_code in (200, 302)
    project.refresh_from_db()
    assert project.judge_agreement_bar_pct == 82
