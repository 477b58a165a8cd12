"""The benchmark quality report page, reached from the quality dashboard.

It renders the newest stored report (never raw labels); when the labels changed since,
it says so and asks for a recompute, which a Celery worker does. Only the project's PM
or an admin reaches it; anyone else gets the 404 of a page that does not exist.
"""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.agreement.selectors import judge_run_get_for_project, judge_run_list_for_project
from annotation.agreement.services import judge_run_default
from annotation.benchmark_report.context import BenchmarkView
from annotation.benchmark_report.forms import BenchmarkGatesForm
from annotation.benchmark_report.services import (
    benchmark_gates_update,
    benchmark_report_request,
    benchmark_report_shown,
    benchmark_thresholds,
)
from annotation.models import BenchmarkGates, JudgeRun, Project
from annotation.selectors import project_get_for_user
from core.pages import render_page

PAGE = "annotation/benchmark_report/page.html"


def _managed_project(request: HttpRequest, project_id: int) -> Project:
    return project_get_for_user(request.user, project_id, manage=True)


def _chosen_run(project: Project, raw: str | None) -> JudgeRun | None:
    if raw in (None, ""):
        return judge_run_default(project=project)
    return judge_run_get_for_project(project, raw)


def _context(project: Project, run: JudgeRun | None, form: BenchmarkGatesForm | None = None) -> dict[str, Any]:
    shown = benchmark_report_shown(project=project, run=run, now=timezone.now())
    report = shown.report
    gates_row = BenchmarkGates.objects.filter(project=project).first() or BenchmarkGates(project=project)
    thresholds = benchmark_thresholds(project=project, row=gates_row)
    view = BenchmarkView(payload=report.payload, thresholds=thresholds) if report else None
    bars_at = gates_row.updated_at.timestamp() if gates_row.updated_at else 0
    return {
        "project": project,
        "run": run,
        "runs": judge_run_list_for_project(project),
        "report": report,
        "stale": shown.stale,
        "in_flight": shown.in_flight,
        "failed": shown.failed,
        "view": view,
        "cache_bits": f"{report.pk if report else 0}-{bars_at}",
        "form": form or BenchmarkGatesForm(instance=gates_row),
        "dashboard_url": reverse("quality_dashboard", args=[project.pk]),
        "self_url": reverse("benchmark_report", args=[project.pk]) + (f"?run={run.pk}" if run else ""),
    }


@login_required
@require_GET
def benchmark_report_page(request: HttpRequest, project_id: int) -> HttpResponse:
    """The report of the judge run picked with `?run=` (default: the project's default run)."""
    project = _managed_project(request, project_id)
    run = _chosen_run(project, request.GET.get("run"))
    return render_page(request, PAGE, "report", _context(project, run))


@login_required
@require_POST
def benchmark_report_recompute(request: HttpRequest, project_id: int) -> HttpResponse:
    """Recompute from every label now."""
    project = _managed_project(request, project_id)
    run = _chosen_run(project, request.POST.get("run"))
    benchmark_report_request(project=project, run=run, now=timezone.now())
    url = reverse("benchmark_report", args=[project.pk]) + (f"?run={run.pk}" if run else "")
    if request.headers.get("HX-Request"):
        return render_page(request, PAGE, "report", _context(project, run))
    return redirect(url)


@login_required
@require_http_methods(["POST"])
def benchmark_gates_edit(request: HttpRequest, project_id: int) -> HttpResponse:
    """Store the gate bars; bad input re-renders the page with each field's message and writes nothing."""
    project = _managed_project(request, project_id)
    run = _chosen_run(project, request.POST.get("run"))
    instance = BenchmarkGates.objects.filter(project=project).first() or BenchmarkGates(project=project)
    form = BenchmarkGatesForm(request.POST, instance=instance)
    if not form.is_valid():
        return render_page(request, PAGE, "report", _context(project, run, form), status=422)
    benchmark_gates_update(project=project, values={name: form.cleaned_data[name] for name in form.Meta.fields})
    messages.success(request, _("Gate bars saved."))
    return redirect(reverse("benchmark_report", args=[project.pk]) + (f"?run={run.pk}" if run else ""))
