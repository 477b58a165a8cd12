"""Pages for expert quality: calibration (expert), portrait and notifications (everyone),
quality settings, golden import and expert standing (PM).

Every view parses input, calls one selector or service and renders; a missing object
and someone else's object both give 404.
"""
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.calibration.control import control_accuracy, expert_resume
from annotation.calibration.golden import golden_import
from annotation.calibration.portrait import expert_stats, own_view_cutoff, portrait_for
from annotation.calibration.project_settings import project_quality_update
from annotation.calibration.selectors import (
    attempt_get_for_expert,
    golden_usable_tasks,
    project_expert_get,
    project_experts,
    project_has_golden_set,
)
from annotation.calibration.services import (
    calibration_answer,
    calibration_answered_positions,
    calibration_feedback,
    calibration_start,
    calibration_state,
    calibration_task_get,
)
from annotation.calibration.standing import expert_evaluate
from annotation.exchange.jsonl import upload_read
from annotation.models import Assignment, CalibrationAttempt, Project
from annotation.selectors import (
    project_get_for_user,
    project_list_for_user,
    rubric_items_for_task,
    rubric_version_current,
)
from core.errors import DomainError, NotFound
from experts.models import ExpertProfile, TierChange, User
from experts.notifications import notification_list_for_user, notification_text, notifications_mark_read
from experts.tiers import tier_progress

UNPROCESSABLE = 422


def quality_message(exc: DomainError) -> str:
    """A domain error in the reader's language where its code is known, else the service's text."""
    known = {
        "not_found": _("Not found, or not yours."),
        "not_member": _("You are not an annotator in this project."),
        "calibration_required": _("Pass the calibration on the project's current rubric version before "
                                  "taking real tasks."),
        "calibration_not_ready": _("Calibration for the current rubric version is not ready yet: the project "
                                   "manager has to import more golden reference labels."),
        "already_calibrated": _("You have already passed calibration on this rubric version."),
        "retry_later": _("You can retry the calibration a little later; see the time below."),
        "calibration_stale": _("The rubric changed while you were calibrating; start a new calibration."),
        "calibration_finished": _("This calibration attempt is finished."),
        "invalid_labels": _("Mark every item as Hit or Miss; nothing was saved."),
        "invalid_settings": _("Some settings are out of range; nothing was changed."),
        "invalid_file": _("The golden file has problems; nothing was imported."),
        "no_version": _("Publish a rubric version (import questions) before importing golden labels."),
        "too_large": _("The file is over the import size limit; split it into smaller files."),
    }
    return known.get(exc.code, exc.message)


def _project_or_404(user: User, project_id: int, *, manage: bool = False) -> Project:
    try:
        return project_get_for_user(user, project_id, manage=manage)
    except NotFound:
        raise Http404 from None


def _attempt_or_404(user: User, attempt_id: int) -> CalibrationAttempt:
    try:
        return attempt_get_for_expert(user, attempt_id)
    except NotFound:
        raise Http404 from None


# --- Calibration (expert) -------------------------------------------------------------

@login_required
@require_GET
def calibration(request: HttpRequest, project_id: int) -> HttpResponse:
    """Where the expert stands on calibration in a project, with the way forward."""
    project = _project_or_404(request.user, project_id)
    if not request.user.is_expert:
        raise Http404
    now = timezone.now()
    state = calibration_state(project=project, expert=request.user, now=now)
    attempts = CalibrationAttempt.objects.filter(project=project, expert=request.user).select_related(
        "rubric_version")[:20]
    answered = len(calibration_answered_positions(state.open)) if state.open is not None else 0
    return render(request, "annotation/calibration/calibration.html", {
        "project": project, "state": state, "attempts": attempts, "answered": answered,
        "can_start": state.status in ("needed", "stale", "failed") and state.ready and state.retry_at is None,
    })


@login_required
@require_POST
def calibration_start_view(request: HttpRequest, project_id: int) -> HttpResponse:
    """Start (or resume) a calibration attempt and open its first unanswered task."""
    project = _project_or_404(request.user, project_id)
    try:
        attempt = calibration_start(project=project, expert=request.user, now=timezone.now())
    except DomainError as exc:
        messages.error(request, quality_message(exc))
        return redirect("calibration", project.pk)
    answered = calibration_answered_positions(attempt)
    position = next((ct.position for ct in attempt.tasks.order_by("position") if ct.position not in answered), 1)
    return redirect("calibration_task", attempt.pk, position)


def _task_context(attempt: CalibrationAttempt, position: int, *, marks: dict[str, Any] | None = None,
                  error: str = "") -> dict[str, Any]:
    calibration_task = calibration_task_get(attempt=attempt, position=position)
    task = calibration_task.task
    items = rubric_items_for_task(task)
    if marks is None:
        saved = dict(attempt.answers.filter(task=task).values_list("rubric_item_id", "value"))
        marks = {item.item_key: saved.get(item.pk) for item in items}
    total = attempt.tasks.count()
    return {
        "attempt": attempt, "project": attempt.project, "position": position, "total": total,
        "question": task.response.question, "reply": task.response.text,
        "items": [{"item": item, "value": marks.get(item.item_key)} for item in items],
        "answered": len(calibration_answered_positions(attempt)), "error": error,
        "positions": range(1, total + 1),
    }


@login_required
@require_http_methods(["GET", "POST"])
def calibration_task(request: HttpRequest, attempt_id: int, position: int) -> HttpResponse:
    """One golden task of the attempt: GET shows it, POST records the marks and moves on."""
    attempt = _attempt_or_404(request.user, attempt_id)
    if attempt.finished_at is not None or attempt.status != CalibrationAttempt.Status.IN_PROGRESS:
        return redirect("calibration_result", attempt.pk) if attempt.finished_at else redirect(
            "calibration", attempt.project_id)
    try:
        if request.method == "GET":
            return render(request, "annotation/calibration/task.html", _task_context(attempt, position))
        marks = {name.removeprefix("label-"): {"0": 0, "1": 1}.get(value, value)
                 for name, value in request.POST.items() if name.startswith("label-")}
        try:
            result = calibration_answer(expert=request.user, attempt_id=attempt.pk, position=position,
                                        labels=marks, now=timezone.now())
        except DomainError as exc:
            if exc.status == 404:
                raise
            context = _task_context(attempt, position, marks=marks, error=quality_message(exc))
            return render(request, "annotation/calibration/task.html", context, status=UNPROCESSABLE)
    except NotFound:
        raise Http404 from None
    if result.next_position is None:
        return redirect("calibration_result", attempt.pk)
    return redirect("calibration_task", attempt.pk, result.next_position)


@login_required
@require_GET
def calibration_result(request: HttpRequest, attempt_id: int) -> HttpResponse:
    """The score, and every item the expert got wrong with the reference answer and rationale."""
    attempt = _attempt_or_404(request.user, attempt_id)
    if attempt.finished_at is None:
        return redirect("calibration", attempt.project_id)
    state = calibration_state(project=attempt.project, expert=request.user, now=timezone.now())
    return render(request, "annotation/calibration/result.html", {
        "attempt": attempt, "project": attempt.project, "feedback": calibration_feedback(attempt), "state": state,
        "passed": attempt.status == CalibrationAttempt.Status.PASSED
        or (attempt.status == CalibrationAttempt.Status.STALE and attempt.score_pct is not None
            and attempt.score_pct >= attempt.threshold_pct),
    })


# --- Portrait and notifications ----------------------------------------------------

@login_required
@require_GET
def my_portrait(request: HttpRequest) -> HttpResponse:
    """The expert's own portrait across their projects, their tier and what the next one needs."""
    profile = ExpertProfile.objects.filter(user=request.user).first()
    if profile is None:
        raise Http404
    cutoff = own_view_cutoff(timezone.now())
    return render(request, "annotation/calibration/portrait.html", {
        "subject": request.user, "profile": profile, "own": True,
        "portrait": portrait_for(request.user, control_before=cutoff),
        "progress": tier_progress(tier=profile.tier, stats=expert_stats(request.user, control_before=cutoff)),
        "tier_changes": TierChange.objects.filter(profile=profile)[:20],
        "projects": project_list_for_user(request.user),
    })


@login_required
@require_GET
def notifications(request: HttpRequest) -> HttpResponse:
    """The user's notifications, newest first, in their language."""
    rows = [{"n": n, "text": notification_text(n)} for n in notification_list_for_user(request.user)[:100]]
    return render(request, "annotation/calibration/notifications.html", {"rows": rows})


@login_required
@require_POST
def notifications_read(request: HttpRequest) -> HttpResponse:
    notifications_mark_read(user=request.user, now=timezone.now())
    return redirect("notifications")


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
    project = _project_or_404(request.user, project_id, manage=True)
    if request.method == "POST":
        values = {k: v for k, v in request.POST.items() if k != "csrfmiddlewaretoken"}
        try:
            project = project_quality_update(project=project, values=values)
        except DomainError as exc:
            context = {**_quality_context(project), "settings_error": quality_message(exc),
                       "settings_errors": exc.errors, "posted": values}
            return render(request, "annotation/calibration/quality.html", context, status=UNPROCESSABLE)
        messages.success(request, _("Quality settings saved."))
        return redirect("quality", project.pk)
    return render(request, "annotation/calibration/quality.html", _quality_context(project))


@login_required
@require_POST
def golden_import_view(request: HttpRequest, project_id: int) -> HttpResponse:
    """Import reference labels for golden tasks, all or nothing."""
    project = _project_or_404(request.user, project_id, manage=True)
    now = timezone.now()
    upload = request.FILES.get("file")
    outcome: dict[str, Any] = {}
    status = 200
    if upload is None:
        outcome["error"] = _("Choose a JSONL file to import.")
        status = UNPROCESSABLE
    else:
        try:
            outcome["result"] = golden_import(project=project, data=upload_read(upload), now=now, source=upload.name)
        except DomainError as exc:
            outcome["error"] = quality_message(exc)
            outcome["errors"] = exc.errors
            status = UNPROCESSABLE
    context = {**_quality_context(project), "outcome": outcome}
    return render(request, "annotation/calibration/quality.html", context, status=status)


@login_required
@require_GET
def quality_experts(request: HttpRequest, project_id: int) -> HttpResponse:
    """Every expert of the project: tier, status, calibration, control accuracy and work done."""
    project = _project_or_404(request.user, project_id, manage=True)
    now = timezone.now()
    version = rubric_version_current(project)
    available = golden_usable_tasks(project=project, version=version).count() if version else 0
    experts = list(project_experts(project).select_related("expert_profile"))
    submitted = dict(Assignment.objects.filter(task__project=project, expert__in=experts, kind=Assignment.Kind.WORK,
                                               status=Assignment.Status.SUBMITTED)
                     .values("expert").annotate(n=Count("pk")).values_list("expert", "n"))
    rows = []
    for expert in experts:
        rows.append({
            "expert": expert, "profile": getattr(expert, "expert_profile", None),
            "calibration": calibration_state(project=project, expert=expert, now=now, available=available),
            "control": control_accuracy(project=project, expert=expert, window=project.control_window),
            "submitted": submitted.get(expert.pk, 0),
        })
    return render(request, "annotation/calibration/experts.html", {"project": project, "rows": rows})


@login_required
@require_GET
def quality_expert(request: HttpRequest, project_id: int, user_id: int) -> HttpResponse:
    """One expert of the project: portrait (this project's work), tier history, calibration attempts."""
    project = _project_or_404(request.user, project_id, manage=True)
    try:
        expert = project_expert_get(project, user_id)
    except NotFound:
        raise Http404 from None
    profile = ExpertProfile.objects.filter(user=expert).first()
    return render(request, "annotation/calibration/portrait.html", {
        "subject": expert, "profile": profile, "own": False, "project": project,
        "portrait": portrait_for(expert, projects=[project]),
        "progress": tier_progress(tier=profile.tier, stats=expert_stats(expert)) if profile else None,
        "tier_changes": TierChange.objects.filter(profile=profile)[:20] if profile else [],
        "attempts": CalibrationAttempt.objects.filter(project=project, expert=expert).select_related(
            "rubric_version")[:20],
        "control": control_accuracy(project=project, expert=expert, window=project.control_window),
    })


@login_required
@require_POST
def quality_expert_resume(request: HttpRequest, project_id: int, user_id: int) -> HttpResponse:
    """Resume a paused expert of the project."""
    project = _project_or_404(request.user, project_id, manage=True)
    try:
        profile = expert_resume(project=project, expert_id=user_id, now=timezone.now(), by=request.user)
    except NotFound:
        raise Http404 from None
    messages.success(request, _("%(expert)s can take tasks again.") % {"expert": profile.pseudonym})
    return redirect("quality_experts", project.pk)


@login_required
@require_POST
def quality_expert_evaluate(request: HttpRequest, project_id: int, user_id: int) -> HttpResponse:
    """Apply the tier rules to one expert now."""
    project = _project_or_404(request.user, project_id, manage=True)
    try:
        expert = project_expert_get(project, user_id)
    except NotFound:
        raise Http404 from None
    changes = expert_evaluate(expert=expert, now=timezone.now())
    if changes:
        messages.success(request, _("Tier now: %(tier)s.") % {"tier": changes[-1].get_to_tier_display()})
    else:
        messages.info(request, _("The tier rules call for no change."))
    return redirect("quality_expert", project.pk, expert.pk)
