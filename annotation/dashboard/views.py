"""The PM's quality dashboard: progress, experts, judge-vs-human agreement, leaderboard.

The dashboard page reads the newest stored agreement report (plus a few cheap counts),
never raw labels, so it renders in the same time at 400,000 units as at 400. Every
figure links to the items page, which lists the units behind it; that page reads raw
labels, one page of 50 units at a time. Only the project's PM or an admin reaches
these pages; anyone else gets the 404 of a page that does not exist.

Each view answers htmx with the fragment it swaps (`"page.html#report"`) and any
other request with the whole page.
"""
from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from annotation.agreement.selectors import (
    UNIT_FILTERS,
    agreement_report_in_flight,
    agreement_report_latest,
    judge_run_get_for_project,
    judge_run_list_for_project,
    quality_units_page,
)
from annotation.agreement.services import agreement_report_request, judge_run_default
from annotation.dashboard.context import (
    TABS,
    THROUGHPUT_DAYS,
    ReportView,
    forecast_finish,
    headline_cards,
    tab_links,
)
from annotation.models import JudgeRun, Project, Task
from annotation.rubric_editing.pricing import period_spend
from annotation.selectors import project_get_for_user, task_progress_for_project
from core.pages import render_page

PAGE = "annotation/dashboard/page.html"
ITEMS = "annotation/dashboard/items.html"


def _managed_project(request: HttpRequest, project_id: int) -> Project:
    return project_get_for_user(request.user, project_id, manage=True)


def _chosen_run(project: Project, raw: str | None) -> JudgeRun | None:
    if raw in (None, ""):
        return None
    return judge_run_get_for_project(project, raw)


def _status_context(project: Project) -> dict[str, Any]:
    return {"project": project, "in_flight": agreement_report_in_flight(project)}


def _cards(project: Project, view: ReportView | None, progress: Any, run_id: int | None) -> list[dict[str, Any]]:
    now = timezone.now()
    recent = Task.objects.filter(project=project, is_golden=False, status=Task.Status.COMPLETE,
                                 completed_at__gte=now - timedelta(days=THROUGHPUT_DAYS)).count()
    forecast = forecast_finish(done=progress.complete, total=progress.tasks, completed_recently=recent,
                               today=timezone.localdate(now), due=project.due_date)
    tabs = {t["key"]: t["url"] for t in tab_links(project, run_id)}
    links = {"judge": tabs["judge"], "experts": tabs["experts"], "time": reverse("board", args=[project.pk]),
             "cost": reverse("project_costs", args=[project.pk])}
    return headline_cards(project=project, view=view, forecast=forecast,
                          spend=period_spend(project_id=project.pk, at=now), links=links)


def _page_context(project: Project, run: JudgeRun | None, tab: str = "overview") -> dict[str, Any]:
    report = agreement_report_latest(project, judge_run_id=run.pk if run else None)
    view = ReportView(project=project, report=report) if report else None
    progress = task_progress_for_project(project)
    run_id = run.pk if run else None
    return {
        "tab": tab,
        "tabs": tab_links(project, run_id),
        "cards": _cards(project, view, progress, run_id),
        **_status_context(project),
        # The report on screen: the status line offers a newer one when it lands.
        "shown_report": str(report.pk) if report else "",
        "runs": judge_run_list_for_project(project),
        "selected_run": run.pk if run else (report.judge_run_id if report else None),
        "report": report,
        "view": view,
        "progress": progress,
        # Autoescaped into a data attribute; dashboard.js parses it back.
        "charts": json.dumps(view.charts(), ensure_ascii=False, separators=(",", ":")) if view else "",
    }


@login_required
@require_GET
def quality_dashboard(request: HttpRequest, project_id: int) -> HttpResponse:
    """The newest report, or the newest of the judge run picked with `?run=`.

    `?tab=` picks the section: the first screen (headline cards) or one long section.
    """
    project = _managed_project(request, project_id)
    run = _chosen_run(project, request.GET.get("run"))
    tab = request.GET.get("tab", "overview")
    context = _page_context(project, run, tab if tab in TABS else "overview")
    return render_page(request, PAGE, "report", context)


@login_required
@require_GET
def quality_status(request: HttpRequest, project_id: int) -> HttpResponse:
    """The "recompute queued / computing" line; it polls itself while a report is on its way."""
    project = _managed_project(request, project_id)
    context = {**_status_context(project), "report": agreement_report_latest(project),
               "shown_report": request.GET.get("shown", "")}
    return render(request, f"{PAGE}#status", context)


@login_required
@require_POST
def quality_recompute(request: HttpRequest, project_id: int) -> HttpResponse:
    """Recompute the report from every label now (for the chosen judge run, else the default one)."""
    project = _managed_project(request, project_id)
    run = _chosen_run(project, request.POST.get("run"))
    agreement_report_request(project=project, judge_run=run, now=timezone.now(), debounce_s=0)
    if not request.htmx:
        return redirect("quality_dashboard", project.pk)
    context = {**_status_context(project), "report": agreement_report_latest(project), "shown_report": ""}
    return render_page(request, PAGE, "status", context)


@login_required
@require_GET
def quality_items(request: HttpRequest, project_id: int) -> HttpResponse:
    """The units behind a dashboard figure: filtered by dimension, model, zone, expert, disagreement."""
    project = _managed_project(request, project_id)
    run = _chosen_run(project, request.GET.get("run")) or judge_run_default(project=project)
    filters = {key: request.GET.get(key, "") for key in UNIT_FILTERS}
    page, rows = quality_units_page(project, run=run, filters=filters, page=request.GET.get("page", 1))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "project": project,
        "run": run,
        "filters": {k: v for k, v in filters.items() if v},
        "page": page,
        "rows": rows,
        "query": query.urlencode(),
        "english": (request.LANGUAGE_CODE or "").startswith("en"),
    }
    return render_page(request, ITEMS, "units", context)
