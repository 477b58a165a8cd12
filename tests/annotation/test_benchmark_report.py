"""The benchmark quality report: computed by a Celery task, cached per labels state, rendered from the cache."""
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from annotation.agreement.services import agreement_report_compute
from annotation.benchmark_report.services import benchmark_report_compute, benchmark_report_process
from annotation.benchmark_report.tasks import benchmark_report_compute_task
from annotation.models import BenchmarkGates, BenchmarkReport
from annotation.services import project_add_member
from tests.annotation.test_agreement_report import JUDGE, PANEL, T0, build
from tests.factories import ExpertFactory, PMFactory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def opened(client, django_capture_on_commit_callbacks):
    """Open the page as a PM would: the request queues the computation, the worker runs it after commit."""

    def open_page(project, **params):
        with django_capture_on_commit_callbacks(execute=True):
            first = client.get(page(project), params)
        return first, client.get(page(project), params)

    return open_page


@pytest.fixture
def reported():
    project, experts, tasks, run = build(PANEL, JUDGE)
    agreement = agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
    return project, run, agreement


def page(project) -> str:
    return reverse("benchmark_report", args=[project.pk])


def gate_cell(html: str, gate: str, side: str) -> str:
    row = re.search(rf'<tr data-gate="{gate}">(.*?)</tr>', html, re.S)
    assert row, gate
    cell = re.search(rf'<td class="num" data-side="{side}"[^>]*>(.*?)</td>', row.group(1), re.S)
    assert cell, side
    return " ".join(cell.group(1).split())


def test_the_scores_are_the_leaderboards_scores(reported):
    project, run, agreement = reported

    report = benchmark_report_compute(project=project, run=run, now=T0 + timedelta(days=1))

    board = {r["model"]: r for r in agreement.payload["leaderboard"]["models"]}
    payload = report.payload
    for k, model in enumerate(payload["models"]):
        assert payload["sides"]["human"]["overall"][k] == board[model]["human"]["score"]
        assert payload["sides"]["judge"]["overall"][k] == board[model]["judge"]["score"]
    assert report.labels_state_id == agreement.pk
    assert payload["params"]["n_boot"] == 1000


def test_the_page_asks_a_worker_for_the_report_and_shows_the_gates(client, reported, opened):
    project, run, _ = reported
    client.force_login(project.created_by)

    queued, response = opened(project)

    assert queued.status_code == 200
    # The queued page polls itself until the worker's report lands.
    assert 'data-state="computing"' in queued.content.decode() and 'hx-trigger="every 5s"' in queued.content.decode()
    html = response.content.decode()
    assert response.status_code == 200
    assert BenchmarkReport.objects.filter(project=project, status=BenchmarkReport.Status.DONE).count() == 1
    assert 'data-state="computing"' not in html and "every 5s" not in html
    for gate in ("spread", "separation", "gaps", "saturation", "stability"):
        assert gate_cell(html, gate, "human") and gate_cell(html, gate, "judge")


def test_a_label_change_makes_the_report_stale_and_it_is_recomputed(client, reported, opened):
    project, run, _ = reported
    client.force_login(project.created_by)
    opened(project)
    first = BenchmarkReport.objects.get(project=project)

    # Labels changed: the dashboard's debounced recompute stored a newer agreement report.
    newer = agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=2))
    stale, _ = opened(project)

    assert 'data-state="computing"' in stale.content.decode()

    latest = BenchmarkReport.objects.filter(project=project, status="done").order_by("-computed_at", "-pk").first()
    assert latest.pk != first.pk and latest.labels_state_id == newer.pk
    # Unchanged labels: the cached report is served, nothing recomputed.
    client.get(page(project))
    assert BenchmarkReport.objects.filter(project=project).count() == 2


def test_the_htmx_request_gets_only_the_report_fragment(client, reported, opened):
    project, run, _ = reported
    client.force_login(project.created_by)
    opened(project)

    html = client.get(page(project), {"run": run.pk}, **HTMX).content.decode()

    assert "<html" not in html
    assert html.lstrip().startswith('<div id="bq-report"')


def test_a_pending_report_is_filled_once(reported):
    project, run, _ = reported
    row = BenchmarkReport.objects.create(project=project, judge_run=run, requested_at=T0)

    assert benchmark_report_compute_task.run(project_id=project.pk, report_id=row.pk) == row.pk
    assert benchmark_report_process(report_id=row.pk, now=T0) is None
    row.refresh_from_db()
    assert row.status == BenchmarkReport.Status.DONE and row.payload["sides"]["human"]


def test_the_pm_changes_a_bar_and_the_verdict_follows(client, reported, opened):
    project, run, _ = reported
    client.force_login(project.created_by)
    html = opened(project)[1].content.decode()
    assert "badge-positive" in gate_cell(html, "saturation", "human")

    response = client.post(reverse("benchmark_gates_edit", args=[project.pk]),
                           {"run": run.pk, "spread_min": 10, "separation_min_pct": 95,
                            "gaps_significant_min_pct": 100, "saturation_max": 0, "rank_stability_min_pct": 95})

    assert response.status_code == 302
    assert BenchmarkGates.objects.get(project=project).saturation_max == 0
    html = client.get(page(project)).content.decode()
    assert "badge-negative" in gate_cell(html, "saturation", "human")
    assert "&lt; 0.0" in html


@pytest.mark.parametrize("value", ["101", "-1", "abc", "", "nan"])
def test_a_bad_bar_is_refused_with_a_message_and_writes_nothing(client, reported, value):
    project, run, _ = reported
    client.force_login(project.created_by)
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = "en"

    response = client.post(reverse("benchmark_gates_edit", args=[project.pk]),
                           {"run": run.pk, "spread_min": value, "separation_min_pct": 95,
                            "gaps_significant_min_pct": 100, "saturation_max": 90, "rank_stability_min_pct": 95})

    assert response.status_code == 422
    html = response.content.decode()
    field = html[html.index('id="id_spread_min"'):html.index('id="id_separation_min_pct"')]
    assert "Enter a number from 0 to 100." in field
    assert not BenchmarkGates.objects.filter(project=project).exists()


@pytest.mark.parametrize("who", ["other_pm", "expert"])
def test_anyone_but_the_projects_pm_gets_404(client, reported, who):
    project, _, _ = reported
    user = PMFactory() if who == "other_pm" else ExpertFactory()
    if who == "expert":
        project_add_member(project=project, user=user)
    client.force_login(user)

    assert client.get(page(project)).status_code == 404
    assert client.post(reverse("benchmark_report_recompute", args=[project.pk])).status_code == 404
    assert client.post(reverse("benchmark_gates_edit", args=[project.pk]), {"spread_min": 1}).status_code == 404
    assert not BenchmarkGates.objects.exists()


def test_the_quality_dashboard_links_to_the_report(client, reported):
    project, run, _ = reported
    client.force_login(project.created_by)

    html = client.get(reverse("quality_dashboard", args=[project.pk])).content.decode()

    assert f'href="{page(project)}?run={run.pk}"' in html
