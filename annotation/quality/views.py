"""Expert quality pages: the expert's own portrait; the PM's quality settings, golden import,
experts table and one expert's standing.

Every view parses input, calls one selector or service and renders; a missing object
and someone else's object both give 404 (`core.middleware.DomainErrorMiddleware`).
"""
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.calibration.selectors import attempt_list_for_expert, golden_usable_tasks, project_has_golden_set
from annotation.exchange.golden import golden_import
from annotation.exchange.jsonl import upload_open
from annotation.models import Project
from annotation.quality.control import control_accuracy, expert_resume
from annotation.quality.portrait import expert_stats, own_view_cutoff, portrait_for
from annotation.quality.project_settings import project_quality_update
from annotation.quality.selectors import expert_quality_rows_for_project
from annotation.quality.standing import expert_evaluate
from annotation.selectors import (
    project_expert_get,
    project_experts,
    project_get_for_user,
    project_list_for_user,
    rubric_version_current,
)
from core.errors import DomainError, error_message
from experts.models import ExpertProfile, TierChange
from experts.tiers import tier_progress

UNPROCESSABLE = 422


@login_required
@require_GET
def my_portrait(request: HttpRequest) -> HttpResponse:
    """The expert's own portrait across their projects, their tier and what the next one needs."""
    profile = ExpertProfile.objects.filter(user=request.user).first()
    if profile is None:
        raise Http404
    cutoff = own_view_cutoff(timezone.now())
    return render(request, "annotation/quality/portrait.html", {
        "subject": request.user, "profile": profile, "own": True,
        "portrait": portrait_for(request.user, control_before=cutoff),
        "progress": tier_progress(tier=profile.tier, stats=expert_stats(request.user, control_before=cutoff)),
        "tier_changes": TierChange.objects.filter(profile=profile)[:20],
        "projects": project_list_for_user(request.user),
    })



# --- PM: quality settings, golden set, experts -----------------------------------------

def _quality_context(project: Project) -> dict[str, Any]:
    version = rubric_version_current(project)
    return {
        "project": project, "version": version,
        "usable": golden_usable_tasks(project=project, version=version).count() if version else 0,
        "has_golden": project_has_golden_set(project),
        "experts_count": project_experts(project).count(),
        "tiers": ExpertProfile._meta.get_field("tier").choices,
    }


@login_required
@require_http_methods(["GET", "POST"])
def quality(request: HttpRequest, project_id: int) -> HttpResponse:
    """The project's quality settings and golden set (its PM and admins only)."""
    project = project_get_for_user(request.user, project_id, manage=True)
    if request.method == "POST":
        values = {k: v for k, v in request.POST.items() if k != "csrfmiddlewaretoken"}
        try:
            project = project_quality_update(project=project, values=values, changed_by=request.user)
        except DomainError as exc:
            context = {**_quality_context(project), "settings_error": error_message(exc),
                       "settings_errors": exc.errors, "posted": values}
            return render(request, "annotation/quality/quality.html", context, status=UNPROCESSABLE)
        messages.success(request, _("Quality settings saved."))
        return redirect("quality", project.pk)
    return render(request, "annotation/quality/quality.html", _quality_context(project))


@login_required
@require_POST
def golden_import_view(request: HttpRequest, project_id: int) -> HttpResponse:
    """Import reference labels for golden tasks, all or nothing."""
    project = project_get_for_user(request.user, project_id, manage=True)
    now = timezone.now()
    upload = request.FILES.get("file")
    outcome: dict[str, Any] = {}
    status = 200
    if upload is None:
        outcome["error"] = _("Choose a JSONL file to import.")
        status = UNPROCESSABLE
    else:
        try:
            outcome["result"] = golden_import(project=project, data=upload_open(upload), now=now, source=upload.name,
                                              by=request.user)
        except DomainError as exc:
            outcome["error"] = error_message(exc)
            outcome["errors"] = exc.errors
            status = UNPROCESSABLE
    context = {**_quality_context(project), "outcome": outcome}
    return render(request, "annotation/quality/quality.html", context, status=status)


@login_required
@require_GET
def quality_experts(request: HttpRequest, project_id: int) -> HttpResponse:
    """Every expert of the project: tier, status, calibration, control accuracy and work done."""
    project = project_get_for_user(request.user, project_id, manage=True)
    rows = expert_quality_rows_for_project(project, now=timezone.now())
    return render(request, "annotation/quality/experts.html", {"project": project, "rows": rows})


@login_required
@require_GET
def quality_expert(request: HttpRequest, project_id: int, user_id: int) -> HttpResponse:
    """One expert of the project: portrait (this project's work), tier history, calibration attempts."""
    project = project_get_for_user(request.user, project_id, manage=True)
    expert = project_expert_get(project, user_id)
    profile = ExpertProfile.objects.filter(user=expert).first()
    return render(request, "annotation/quality/portrait.html", {
        "subject": expert, "profile": profile, "own": False, "project": project,
        "portrait": portrait_for(expert, projects=[project]),
        "progress": tier_progress(tier=profile.tier, stats=expert_stats(expert)) if profile else None,
        "tier_changes": TierChange.objects.filter(profile=profile)[:20] if profile else [],
        "attempts": attempt_list_for_expert(project=project, expert=expert),
        "control": control_accuracy(project=project, expert=expert, window=project.control_window),
    })


@login_required
@require_POST
def quality_expert_resume(request: HttpRequest, project_id: int, user_id: int) -> HttpResponse:
    """Resume a paused expert of the project."""
    project = project_get_for_user(request.user, project_id, manage=True)
    profile = expert_resume(project=project, expert_id=user_id, now=timezone.now(), by=request.user)
    messages.success(request, _("%(expert)s can take tasks again.") % {"expert": profile.pseudonym})
    return redirect("quality_experts", project.pk)


@login_required
@require_POST
def quality_expert_evaluate(request: HttpRequest, project_id: int, user_id: int) -> HttpResponse:
    """Apply the tier rules to one expert now."""
    project = project_get_for_user(request.user, project_id, manage=True)
    expert = project_expert_get(project, user_id)
    changes = expert_evaluate(expert=expert, now=timezone.now())
    if changes:
        messages.success(request, _("Tier now: %(tier)s.") % {"tier": changes[-1].get_to_tier_display()})
    else:
        messages.info(request, _("The tier rules call for no change."))
    return redirect("quality_expert", project.pk, expert.pk)
