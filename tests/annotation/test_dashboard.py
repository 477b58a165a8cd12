"""The quality dashboard, its items page and the agreement API, over a stored report."""
import json
import re
from datetime import timedelta
from html import unescape

import pytest
from django.urls import reverse

from annotation.agreement.services import agreement_report_compute
from annotation.models import AgreementReport, JudgeLabel, JudgeRun
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from rubrics.models import Dimension
from tests.annotation.test_agreement_report import JUDGE, PANEL, T0, build
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def reported():
    project, experts, tasks, run = build(PANEL, JUDGE)
    report = agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
    return project, experts, tasks, run, report


def page_url(project) -> str:
    return reverse("quality_dashboard", args=[project.pk])


def charts_of(html: str) -> dict:
    match = re.search(r'<div id="quality-report" class="quality-report" data-charts="([^"]*)"', html)
    assert match, "the chart data rides in the report fragment's data-charts attribute"
    return json.loads(unescape(match.group(1)))


def test_the_full_page_shows_the_stored_report(client, reported):
    project, experts, _, _, report = reported
    client.force_login(project.created_by)

    response = client.get(page_url(project))

    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" in html and 'id="quality-report"' in html
    assert "71.4%" in html  # 15 of 21 complete units
    # The long sections moved to tabs of the same page.
    judge = client.get(page_url(project), {"tab": "judge"}).content.decode()
    assert "model-0" in judge and "model-1" in judge
    assert experts[0].expert_profile.pseudonym in client.get(page_url(project), {"tab": "experts"}).content.decode()
    # first item of the "judge disagrees with a unanimous panel" list
    assert "q0:2" in client.get(page_url(project), {"tab": "disagreements"}).content.decode()
    # Strict CSP: every script is a file, never inline code.
    for tag in re.findall(r"<script[^>]*>", html):
        assert "src=" in tag
    charts = charts_of(html)
    assert charts["by_dimension"]["value"] == [row["agreement"] for row in report.payload["judge"]["by_dimension"]]
    assert set(charts["curves"]) == {str(e.pk) for e in experts}


def test_the_htmx_request_gets_only_the_report_fragment(client, reported):
    project, _, _, run, _ = reported
    client.force_login(project.created_by)

    response = client.get(page_url(project), {"run": run.pk}, **HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and "run-select" not in html
    assert html.lstrip().startswith('<div id="quality-report"')
    assert "71.4%" in html


def test_picking_another_judge_run_shows_its_report(client, reported):
    project, _, tasks, _, _ = reported
    always = JudgeRun.objects.create(project=project, rubric_version=tasks[0].rubric_version, name="always-hit",
                                     source=JudgeRun.Source.IMPORTED, status=JudgeRun.Status.DONE)
    JudgeLabel.objects.bulk_create(JudgeLabel(run=always, task=task, rubric_item=item, value=1)
                                   for task in tasks for item in rubric_items_for_task(task))
    agreement_report_compute(project=project, judge_run=always, now=T0 + timedelta(days=2))
    client.force_login(project.created_by)

    response = client.get(page_url(project), {"run": always.pk}, **HTMX)

    charts = charts_of(response.content.decode())
    payload = AgreementReport.objects.get(judge_run=always).payload
    assert charts["by_model"]["value"] == [row["agreement"] for row in payload["judge"]["by_model"]]
    assert payload["judge"]["overall"]["agreement"] == round(10 / 21, 4)


def test_a_project_without_a_report_says_so(client):
    pm = PMFactory()
    project = make_project_with_tasks(pm=pm)
    client.force_login(pm)

    response = client.get(page_url(project))

    assert response.status_code == 200
    assert "data-charts" not in response.content.decode()


@pytest.mark.parametrize("who", ["other_pm", "expert"])
def test_anyone_but_the_projects_pm_gets_404(client, reported, who):
    project, _, _, _, _ = reported
    user = PMFactory() if who == "other_pm" else ExpertFactory()
    if who == "expert":
        project_add_member(project=project, user=user)
    client.force_login(user)

    assert client.get(page_url(project)).status_code == 404
    assert client.get(reverse("quality_items", args=[project.pk])).status_code == 404
    assert client.post(reverse("quality_recompute", args=[project.pk])).status_code == 404


def test_another_projects_judge_run_is_404(client, reported):
    project, _, _, _, _ = reported
    other = build(PANEL, JUDGE)[3]
    client.force_login(project.created_by)

    assert client.get(page_url(project), {"run": other.pk}).status_code == 404


def test_the_items_page_lists_the_units_behind_a_figure(client, reported):
    project, _, tasks, run, _ = reported
    client.force_login(project.created_by)
    url = reverse("quality_items", args=[project.pk])

    full = client.get(url, {"zone": "unanimous", "disagree": 1, "run": run.pk})
    fragment = client.get(url, {"zone": "unanimous", "disagree": 1, "run": run.pk}, **HTMX)

    assert full.status_code == 200 and "<html" in full.content.decode()
    html = fragment.content.decode()
    assert "<html" not in html
    assert html.count('<tr id="item-') == 6
    assert f'id="item-{tasks[0].pk}-2"' in html
    assert "model-1" in html


def test_the_items_page_filters_by_model_and_expert(client, reported):
    project, experts, _, run, _ = reported
    client.force_login(project.created_by)
    url = reverse("quality_items", args=[project.pk])

    by_model = client.get(url, {"model": "model-1", "run": run.pk}, **HTMX).content.decode()
    by_expert = client.get(url, {"expert": experts[2].pk, "run": run.pk}, **HTMX).content.decode()

    assert by_model.count('<tr id="item-') == 9
    assert by_expert.count('<tr id="item-') == 21
    assert experts[2].expert_profile.pseudonym in by_expert


def test_the_api_returns_the_stored_report(api, reported):
    project, _, _, run, report = reported
    api.force_authenticate(project.created_by)

    body = api.get(f"/api/v1/projects/{project.pk}/agreement/").json()

    assert body["status"] == "done" and body["id"] == report.pk
    assert body["judge_run"] == run.pk and body["units"] == 24
    assert body["report"] == report.payload
    assert body["report"]["judge"]["overall"]["agreement"] == round(15 / 21, 4)


@pytest.mark.parametrize("who", ["other_pm", "expert"])
def test_the_api_is_404_for_anyone_but_the_projects_pm(api, reported, who):
    project, _, _, _, _ = reported
    user = PMFactory() if who == "other_pm" else ExpertFactory()
    if who == "expert":
        project_add_member(project=project, user=user)
    api.force_authenticate(user)

    assert api.get(f"/api/v1/projects/{project.pk}/agreement/").status_code == 404
    assert api.post(f"/api/v1/projects/{project.pk}/agreement/recompute/").status_code == 404


def test_the_api_says_none_before_any_report(api, admin_user):
    project = make_project_with_tasks()
    api.force_authenticate(admin_user)

    body = api.get(f"/api/v1/projects/{project.pk}/agreement/").json()

    assert body["status"] == "none" and body["report"] is None


def test_recompute_over_the_api_stores_a_new_report(api, reported, django_capture_on_commit_callbacks):
    project, _, _, run, report = reported
    api.force_authenticate(project.created_by)

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"/api/v1/projects/{project.pk}/agreement/recompute/", {"run": run.pk}, format="json")

    assert response.status_code == 202
    fresh = AgreementReport.objects.get(pk=response.json()["id"])
    assert fresh.pk != report.pk and fresh.status == AgreementReport.Status.DONE
    assert fresh.payload["judge"]["overall"] == report.payload["judge"]["overall"]


def test_recompute_from_the_page_answers_with_the_status_fragment(client, reported):
    project, _, _, _, _ = reported
    client.force_login(project.created_by)

    response = client.post(reverse("quality_recompute", args=[project.pk]), **HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<p id="quality-status"')
    assert 'hx-trigger="every 5s"' in html  # it polls until the report is ready


def test_the_status_line_offers_a_newer_report_once_it_lands(client, reported):
    project, _, _, run, report = reported
    client.force_login(project.created_by)
    status_url = reverse("quality_status", args=[project.pk])
    before = client.get(status_url, {"shown": report.pk}, **HTMX).content.decode()

    newer = agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=3))
    after = client.get(status_url, {"shown": report.pk}, **HTMX).content.decode()

    assert newer.pk != report.pk
    assert page_url(project) not in before
    assert f'href="{page_url(project)}"' in after


@pytest.fixture
def reported_with_gate():
    project, experts, tasks, run = build(PANEL, JUDGE)
    # The third rubric position's dimension becomes the gate (published items cannot change).
    Dimension.objects.filter(pk=rubric_items_for_task(tasks[0])[2].dimension_id).update(is_gate=True)
    report = agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
    return project, report


def test_the_page_shows_the_headline_without_the_gate_and_the_gate_on_its_own_line(client, reported_with_gate):
    project, report = reported_with_gate
    client.force_login(project.created_by)
    judge = report.payload["judge"]

    html = client.get(page_url(project), {"tab": "judge"}, HTTP_ACCEPT_LANGUAGE="en").content.decode()

    headline = f"{100 * judge['overall']['agreement']:.1f}%"
    gate = f"{100 * judge['gate']['agreement']:.1f}%"
    assert judge["overall"]["n"] == 14 and judge["gate"]["n"] == 7
    assert re.search(rf'<dt>Strict agreement</dt><dd><a href="[^"]*">{re.escape(headline)}</a>', html)
    assert f"Gate items: {gate} agreement" in html
    assert "All units, gate included: 71.4% agreement" in html
    assert "rests on 4 dialogues only" in html


def test_thin_slices_and_scorer_quirks_are_shown_beside_the_figures(client, reported):
    project, _, _, _, report = reported
    client.force_login(project.created_by)
    board = report.payload["leaderboard"]

    html = "".join(client.get(page_url(project), {"tab": tab}, HTTP_ACCEPT_LANGUAGE="en").content.decode()
                   for tab in ("judge", "leaderboard"))

    assert html.count("few dialogues") >= len(report.payload["judge"]["by_dimension"])
    assert "Like for like" in html and f"on the {board['tasks']['both']} tasks" in html
    assert "Human consensus on every complete task" in html and "Judge on every task it labelled" in html
    untouched = board["human_all"]["quirks"]["penalty_only_untouched"]
    assert re.search(rf"<strong>{untouched}</strong> abilities holding only penalty items", unescape(html))
    assert "failed judge calls" in html


def test_the_report_explanations_read_in_chinese(client, reported_with_gate):
    project, _ = reported_with_gate
    client.force_login(project.created_by)

    html = "".join(client.get(page_url(project), {"tab": tab}, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
                   for tab in ("judge", "leaderboard"))

    assert "门槛项：一致率" in html and "同口径对比" in html and "对话较少" in html
    assert "这些分数背后的评分规则特性" in html
