"""Pages for the expert's own controls on a lease (keep working, give back, skip), their history,
and the PM's list of skips. Thin: parse, call one service or selector, render."""
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import prefetch_related_objects
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotation.assignment.controls import assignment_extend, assignment_release, assignment_skip
from annotation.assignment.selectors import (
    SKIPS_LIMIT,
    assignment_state,
    expert_history,
    history_status,
    lease_clock,
    project_skip_counts,
    project_skips,
)
from annotation.models import TaskSkip
from annotation.selectors import assignment_get_for_expert, project_get_for_user
from core.errors import DomainError, NotFound, error_message
from core.pages import render_page
from experts.requests import SignedInRequest

ANNOTATE = "annotation/annotate.html"
HISTORY = "annotation/history.html"
SKIPS = "annotation/skips.html"
UNPROCESSABLE = 422
HISTORY_PAGE_SIZE = 25



def _go(request: SignedInRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _after_giving_back(request: SignedInRequest, text: str) -> HttpResponse:
    """Back to the home page, where "next task" (with the count of tasks left) is one key away."""
    messages.success(request, text)
    return _go(request, reverse("home"))


@login_required
@require_POST
def extend_view(request: SignedInRequest, assignment_id: int) -> HttpResponse:
    """Keep working: the lease runs a full timeout again; htmx gets the refreshed countdown."""
    now = timezone.now()
    try:
        assignment = assignment_extend(expert=request.user, assignment_id=assignment_id, now=now)
    except NotFound:
        raise
    except DomainError as exc:
        if not request.htmx:
            messages.error(request, error_message(exc))
            return redirect("annotate", assignment_id)
        assignment = assignment_get_for_expert(request.user, assignment_id)
        context = {"clock": lease_clock(assignment, now=now), "assignment": assignment,
                   "state": assignment_state(assignment, now=now), "clock_error": error_message(exc)}
        return render_page(request, ANNOTATE, "lease_clock", context, status=UNPROCESSABLE)
    if not request.htmx:
        messages.success(request, _("Your time on this task was extended."))
        return redirect("annotate", assignment_id)
    context = {"clock": lease_clock(assignment, now=now), "assignment": assignment, "state": "leased",
               "clock_extended": True}
    return render_page(request, ANNOTATE, "lease_clock", context)


@login_required
@require_POST
def release_view(request: SignedInRequest, assignment_id: int) -> HttpResponse:
    """Give the task back: the slot returns to the pool, the task is not offered to this expert again."""
    try:
        assignment_release(expert=request.user, assignment_id=assignment_id)
    except NotFound:
        raise
    except DomainError as exc:
        messages.error(request, error_message(exc))
        return _go(request, reverse("annotate", args=[assignment_id]))
    return _after_giving_back(request, _("Task given back. It will not be offered to you again."))


def skip_reasons() -> list[tuple[int, str, str]]:
    """(key, value, label) of each skip reason, in the order the dialog numbers them."""
    return [(n, value, str(label)) for n, (value, label) in enumerate(TaskSkip.Reason.choices, 1)]


@login_required
@require_POST
def skip_view(request: SignedInRequest, assignment_id: int) -> HttpResponse:
    """Skip the task with a reason; a refused skip re-renders the dialog's form with the reason kept."""
    reason = request.POST.get("reason", "")
    text = request.POST.get("text", "")
    try:
        assignment_skip(expert=request.user, assignment_id=assignment_id, reason=reason, text=text,
                                 now=timezone.now())
    except NotFound:
        raise
    except DomainError as exc:
        if not request.htmx:
            messages.error(request, error_message(exc))
            return redirect("annotate", assignment_id)
        assignment = assignment_get_for_expert(request.user, assignment_id)
        context = {"assignment": assignment, "skip_reasons": skip_reasons(), "skip_reason": reason,
                   "skip_text": text, "skip_error": error_message(exc)}
        return render_page(request, ANNOTATE, "skip_form", context, status=UNPROCESSABLE)
    return _after_giving_back(request, _("Task skipped. Thank you for telling us why."))


@login_required
@require_GET
def history(request: SignedInRequest) -> HttpResponse:
    """The expert's own finished tasks, newest first: question, when, what became of it; never the model."""
    if not request.user.is_expert:
        raise Http404
    page = Paginator(expert_history(request.user), HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
    assignments = list(page.object_list)
    # Appeals are payments' rows (a higher app): reached by their reverse relation, never imported.
    prefetch_related_objects(assignments, "appeals__correction")
    rows = [{"assignment": a, "question": a.task.response.question, "project": a.task.project,
             "status": history_status(a), "at": a.finished_at, "returned": getattr(a, "submission_return", None),
             "appeals": [x for x in a.appeals.all() if x.kind == "rejection"]} for a in assignments]
    return render_page(request, HISTORY, "history", {"page": page, "rows": rows})


@login_required
@require_GET
def skips(request: SignedInRequest, project_id: int) -> HttpResponse:
    """The project's skips for its PM: which question, why, who (pseudonym), when; filter by reason."""
    project = project_get_for_user(request.user, project_id, manage=True)
    reason = request.GET.get("reason") or None
    if reason not in (None, *TaskSkip.Reason.values):
        reason = None
    counts = project_skip_counts(project)
    context: dict[str, Any] = {
        "project": project, "reason": reason, "limit": SKIPS_LIMIT,
        "skips": list(project_skips(project, reason=reason)[:SKIPS_LIMIT]),
        "counts": [(value, label, counts[value]) for value, label in TaskSkip.Reason.choices],
        "total": sum(counts.values()),
    }
    return render_page(request, SKIPS, "skips", context)
