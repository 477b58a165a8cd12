"""Calibration pages for experts: standing, the golden tasks of an attempt, the result.

Every view parses input, calls one selector or service and renders; a missing object
and someone else's object both give 404 (`core.middleware.DomainErrorMiddleware`).
"""
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.calibration.selectors import (
    attempt_get_for_expert,
    attempt_list_for_expert,
    calibration_answers_for_task,
    calibration_draft_for_task,
)
from annotation.calibration.services import (
    calibration_answer,
    calibration_attempt_passed,
    calibration_draft_save,
    calibration_feedback,
    calibration_progress,
    calibration_start,
    calibration_state,
    calibration_task_get,
)
from annotation.library.selectors import cases_most_read
from annotation.models import CalibrationAttempt
from annotation.selectors import project_get_for_user, rubric_items_for_task
from annotation.views import annotate_strings
from core.errors import DomainError, NotFound, error_message
from core.pages import render_page

UNPROCESSABLE = 422
# The annotation page's save-status fragment: calibration autosaves the same way.
SAVE_STATUS_TEMPLATE = "annotation/annotate.html"


@login_required
@require_GET
def calibration(request: HttpRequest, project_id: int) -> HttpResponse:
    """Where the expert stands on calibration in a project, with the way forward."""
    project = project_get_for_user(request.user, project_id)
    if not request.user.is_expert:
        raise Http404
    state = calibration_state(project=project, expert=request.user, now=timezone.now())
    answered = calibration_progress(state.open).answered_count if state.open is not None else 0
    return render(request, "annotation/calibration/calibration.html", {
        "project": project, "state": state, "attempts": attempt_list_for_expert(project=project, expert=request.user),
        "answered": answered, "can_start": state.can_start,
        # Before (re-)calibrating, the cases most experts read: where the standard was hard to read.
        "most_read_cases": cases_most_read(project) if state.status != "calibrated" else [],
    })


@login_required
@require_POST
def calibration_start_view(request: HttpRequest, project_id: int) -> HttpResponse:
    """Start (or resume) a calibration attempt and open its first unanswered task."""
    project = project_get_for_user(request.user, project_id)
    try:
        attempt = calibration_start(project=project, expert=request.user, now=timezone.now())
    except DomainError as exc:
        messages.error(request, error_message(exc))
        return redirect("calibration", project.pk)
    # An attempt in progress always has a task without answers (answering the last one scores
    # it); should that ever not hold, the first task is a page that still shows.
    return redirect("calibration_task", attempt.pk, calibration_progress(attempt).next_position or 1)


def _posted_marks(request: HttpRequest) -> tuple[dict[str, Any], dict[str, str]]:
    """`label-<item key>` = 0|1 and `note-<item key>` = text, as the annotation page posts them."""
    labels: dict[str, Any] = {}
    notes: dict[str, str] = {}
    for name, value in request.POST.items():
        if name.startswith("label-"):
            labels[name.removeprefix("label-")] = {"0": 0, "1": 1}.get(value, value)
        elif name.startswith("note-"):
            notes[name.removeprefix("note-")] = str(value)
    return labels, notes


def _task_context(attempt: CalibrationAttempt, position: int, *, marks: dict[str, Any] | None = None,
                  notes: dict[str, str] | None = None, error: str = "") -> dict[str, Any]:
    calibration_task = calibration_task_get(attempt=attempt, position=position)
    task = calibration_task.task
    items = rubric_items_for_task(task)
    draft = calibration_draft_for_task(attempt=attempt, task=task)
    if marks is None:
        saved = calibration_answers_for_task(attempt=attempt, task=task)
        if draft is not None:
            saved = {**saved, **draft.labels}
        marks = {item.item_key: saved.get(item.item_key) for item in items}
        notes = dict(draft.notes) if draft else {}
    notes = notes or {}
    progress = calibration_progress(attempt)
    rows = [{"item": item, "value": marks.get(item.item_key) if marks.get(item.item_key) in (0, 1) else None,
             "note": notes.get(item.item_key, "")} for item in items]
    return {
        "attempt": attempt, "project": attempt.project, "position": position, "total": progress.total,
        "question": task.response.question, "reply": task.response.text,
        "items": rows, "done": sum(1 for row in rows if row["value"] is not None),
        "answered": progress.answered_count, "error": error,
        "positions": range(1, progress.total + 1),
        "save_state": "saved" if draft else "idle", "draft_saved_at": draft.updated_at if draft else None,
        "strings": annotate_strings(),
    }


@login_required
@require_http_methods(["GET", "POST"])
def calibration_task(request: HttpRequest, attempt_id: int, position: int) -> HttpResponse:
    """One golden task of the attempt: GET shows it, POST records the marks and moves on."""
    attempt = attempt_get_for_expert(request.user, attempt_id)
    if attempt.finished_at is not None or attempt.status != CalibrationAttempt.Status.IN_PROGRESS:
        return redirect("calibration_result", attempt.pk) if attempt.finished_at else redirect(
            "calibration", attempt.project_id)
    if request.method == "GET":
        return render(request, "annotation/calibration/task.html", _task_context(attempt, position))
    marks, notes = _posted_marks(request)
    try:
        result = calibration_answer(expert=request.user, attempt_id=attempt.pk, position=position,
                                    labels=marks, notes=notes, now=timezone.now())
    except NotFound:
        raise
    except DomainError as exc:
        context = _task_context(attempt, position, marks=marks, notes=notes, error=error_message(exc))
        return render(request, "annotation/calibration/task.html", context, status=UNPROCESSABLE)
    if result.next_position is None:
        return redirect("calibration_result", attempt.pk)
    return redirect("calibration_task", attempt.pk, result.next_position)


@login_required
@require_POST
def calibration_draft_view(request: HttpRequest, attempt_id: int, position: int) -> HttpResponse:
    """Autosave one calibration task's marks and notes; htmx gets the save-status fragment."""
    labels, notes = _posted_marks(request)
    try:
        draft = calibration_draft_save(expert=request.user, attempt_id=attempt_id, position=position,
                                       labels=labels, notes=notes)
    except NotFound:
        raise
    except DomainError as exc:
        if not getattr(request, "htmx", False):
            messages.error(request, error_message(exc))
            return redirect("calibration_task", attempt_id, position)
        return render_page(request, SAVE_STATUS_TEMPLATE, "save_status",
                           {"save_state": "error", "save_error": error_message(exc)}, status=UNPROCESSABLE)
    if not getattr(request, "htmx", False):
        return redirect("calibration_task", attempt_id, position)
    return render_page(request, SAVE_STATUS_TEMPLATE, "save_status",
                       {"save_state": "saved", "draft_saved_at": draft.updated_at})


@login_required
@require_GET
def calibration_result(request: HttpRequest, attempt_id: int) -> HttpResponse:
    """The score, and every item the expert got wrong with the reference answer and rationale."""
    attempt = attempt_get_for_expert(request.user, attempt_id)
    if attempt.finished_at is None:
        return redirect("calibration", attempt.project_id)
    state = calibration_state(project=attempt.project, expert=request.user, now=timezone.now())
    return render(request, "annotation/calibration/result.html", {
        "attempt": attempt, "project": attempt.project, "feedback": calibration_feedback(attempt), "state": state,
        "passed": calibration_attempt_passed(attempt),
    })
