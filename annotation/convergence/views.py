"""The judge convergence page (Quality group): agreement of each successive judge run against the project's targets.

Only the project's PM or an admin reaches it; anyone else gets the 404 of a page that
does not exist. The page reads stored agreement reports only.
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
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotation.convergence.forms import ConvergenceTargetsForm
from annotation.convergence.services import (
    convergence_chart,
    convergence_lines,
    convergence_points,
    convergence_targets,
    convergence_targets_update,
)
from annotation.models import JudgeDriftAlert, Project
from annotation.projects.rules import project_check_writable
from annotation.selectors import project_get_for_user
from core.errors import DomainError, error_message
from core.pages import render_page, request_is_english
from experts.requests import SignedInRequest

PAGE = "annotation/convergence/page.html"


def _context(request: HttpRequest, project: Project, form: ConvergenceTargetsForm | None = None) -> dict[str, Any]:
    targets = convergence_targets(project=project)
    points = convergence_points(project=project)
    overall, lines = convergence_lines(points=points, targets=targets, english=request_is_english(request))
    labels = [p.label for p in points]
    form = form or ConvergenceTargetsForm(english=request_is_english(request), initial={
        "safety_target_pct": f"{targets.safety_pct:g}", "other_target_pct": f"{targets.other_pct:g}",
        "drift_threshold_pct": f"{targets.drift_pct:g}", "safety_dimensions": sorted(targets.safety_codes)})
    return {
        "project": project, "targets": targets, "points": points, "overall": overall, "lines": lines,
        "overall_chart": convergence_chart(overall, labels) if overall else None,
        "charts": [(line, convergence_chart(line, labels)) for line in lines],
        "converged": sum(1 for line in lines if line.converged), "form": form,
        "labels_used": sorted({p.labels_used for p in points}),
        "drifts": JudgeDriftAlert.objects.filter(run__project=project).select_related("run", "earlier_run")
        .order_by("-created_at")[:5],
    }


@login_required
@require_GET
def judge_convergence(request: SignedInRequest, project_id: int) -> HttpResponse:
    """Each judge run in order, overall and per dimension, with its interval, against the targets."""
    project = project_get_for_user(request.user, project_id, manage=True)
    return render_page(request, PAGE, "convergence", _context(request, project))


@login_required
@require_POST
def judge_convergence_targets(request: SignedInRequest, project_id: int) -> HttpResponse:
    """Store the targets; bad input re-renders the page with each field's message and writes nothing."""
    project = project_get_for_user(request.user, project_id, manage=True)
    form = ConvergenceTargetsForm(request.POST, english=request_is_english(request))
    if not form.is_valid():
        return render_page(request, PAGE, "targets", _context(request, project, form), status=422)
    data = form.cleaned_data
    try:
        project_check_writable(project)
        convergence_targets_update(project=project, safety_pct=data["safety_target_pct"],
                                   other_pct=data["other_target_pct"], drift_pct=data["drift_threshold_pct"],
                                   safety_codes=list(data["safety_dimensions"]), by=request.user,
                                   now=timezone.now())
    except DomainError as exc:
        form.add_error(None, error_message(exc))
        return render_page(request, PAGE, "targets", _context(request, project, form), status=422)
    messages.success(request, _("Targets saved."))
    url = reverse("judge_convergence", args=[project.pk])
    return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)
