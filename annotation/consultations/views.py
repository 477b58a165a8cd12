"""Consultation pages: the PM's list per project, the consultation itself, the expert's own list,
and the forms that open one. Thin: parse, call one service or selector, render.

Every page and action answers 404 to anyone who is neither a participant nor the project's
PM or an admin (through `consultation_access_for_user`).
"""
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.consultations.opening import consultation_open_by_expert, consultation_open_by_pm
from annotation.consultations.selectors import (
    ConsultationAccess,
    consultation_access_for_user,
    consultation_counts,
    consultation_list_for_expert,
    consultation_list_for_project,
    consultation_view,
    invite_candidates,
)
from annotation.consultations.services import (
    consultation_invite,
    consultation_post,
    consultation_resolve,
    consultation_reveal_now,
    consultation_vote,
    consultations_reveal_due,
    rubric_suggestion_dismiss,
    rubric_suggestion_take,
)
from annotation.models import Assignment, Consultation, Outcome
from annotation.selectors import assignment_get_for_expert, project_get_for_user, rubric_items_for_task
from core.errors import DomainError, NotFound, error_message
from core.pages import render_page
from experts.models import User

LIST = "annotation/consultations/list.html"
DETAIL = "annotation/consultations/detail.html"
MINE = "annotation/consultations/mine.html"
ASK = "annotation/consultations/ask.html"
UNPROCESSABLE = 422


def _user(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User):
        raise Http404
    return user


@login_required
@require_GET
def consultation_list(request: HttpRequest, project_id: int) -> HttpResponse:
    """The project's consultations with open / revealed / resolved filters and their counts."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    # The beat reveals past deadlines every few minutes; the list shows them revealed at once.
    consultations_reveal_due(now=timezone.now(), project=project)
    status = request.GET.get("status", "")
    rows = consultation_list_for_project(project, status=status)[:500]
    context = {"project": project, "rows": rows, "status": status if status in Consultation.Status.values else "",
               "counts": consultation_counts(project), "statuses": Consultation.Status.choices}
    return render_page(request, LIST, "rows", context)


def _detail_context(access: ConsultationAccess, **extra: Any) -> dict[str, Any]:
    c = access.consultation
    question = c.task.response.question
    view = consultation_view(access)
    context = {
        "c": c, "access": access, "view": view, "project": c.project,
        "tally": [(value, label, view.tally.get(value, 0)) for value, label in Outcome.choices],
        "question": question, "turns": question.dialogue, "final_user_turn": question.final_user_turn,
        "reply": c.task.response.text, "outcomes": Outcome.choices,
        "categories": Consultation.ReasonCategory.choices, "errors": {}, "form": {},
    }
    if access.manages and c.status != Consultation.Status.RESOLVED:
        context["candidates"] = invite_candidates(c)
    return {**context, **extra}


def _access(request: HttpRequest, consultation_id: int) -> ConsultationAccess:
    return consultation_access_for_user(_user(request), consultation_id, now=timezone.now())


@login_required
@require_GET
def consultation_detail(request: HttpRequest, consultation_id: int) -> HttpResponse:
    """The case: the item in its dialogue, the opening notes, the votes (once revealed), the discussion."""
    return render_page(request, DETAIL, "case", _detail_context(_access(request, consultation_id)))


def _after(request: HttpRequest, access: ConsultationAccess, done: str, anchor: str = "") -> HttpResponse:
    target = reverse("consultation_detail", args=[access.consultation.pk]) + anchor
    if request.htmx:  # type: ignore[attr-defined]
        fresh = _access(request, access.consultation.pk)
        if fresh.consultation.status == access.consultation.status:
            return render_page(request, DETAIL, "case", _detail_context(fresh, done=done))
        # The action moved the consultation on (revealed, resolved): the page's heading and
        # status chip sit outside the fragment, so the whole page is loaded again.
        messages.success(request, done)
        response = HttpResponse(status=204)
        # Only the anchor differs from the page's URL, which would merely scroll: reload as well.
        response["HX-Redirect"] = target
        response["HX-Refresh"] = "true"
        return response
    messages.success(request, done)
    return redirect(target)


def _refused(request: HttpRequest, access: ConsultationAccess, exc: DomainError) -> HttpResponse:
    if isinstance(exc, NotFound):
        raise exc
    fields = {str(e.get("field")): error_message(exc) for e in exc.errors}
    context = _detail_context(_access(request, access.consultation.pk), error=error_message(exc), errors=fields,
                              form=request.POST)
    return render_page(request, DETAIL, "case", context, status=exc.status if exc.status != 400 else UNPROCESSABLE)


@login_required
@require_POST
def consultation_vote_view(request: HttpRequest, consultation_id: int) -> HttpResponse:
    access = _access(request, consultation_id)
    try:
        result = consultation_vote(user=access.user, consultation=access.consultation,
                                   choice=request.POST.get("choice"), reason=request.POST.get("reason"),
                                   now=timezone.now())
    except DomainError as exc:
        return _refused(request, access, exc)
    if result.revealed:
        done = _("Your vote is in. Everyone has voted: the votes are revealed.")
    elif not result.changed:
        done = _("Nothing changed: this vote was already recorded.")
    else:
        done = _("Your vote is recorded.")
    return _after(request, access, done, "#votes")


@login_required
@require_POST
def consultation_post_view(request: HttpRequest, consultation_id: int) -> HttpResponse:
    access = _access(request, consultation_id)
    try:
        post = consultation_post(user=access.user, consultation=access.consultation, text=request.POST.get("text"),
                                 reply_to=request.POST.get("reply_to") or None, quote=request.POST.get("quote", ""),
                                 now=timezone.now())
    except DomainError as exc:
        return _refused(request, access, exc)
    return _after(request, access, _("Message posted."), f"#post-{post.pk}")


@login_required
@require_POST
def consultation_invite_view(request: HttpRequest, consultation_id: int) -> HttpResponse:
    access = _access(request, consultation_id)
    if not access.manages:
        raise Http404
    try:
        added = consultation_invite(pm=access.user, consultation=access.consultation,
                                    expert_id=request.POST.get("expert"), now=timezone.now())
    except DomainError as exc:
        return _refused(request, access, exc)
    return _after(request, access, _("Invited: the expert is asked to vote.") if added
                  else _("Nothing changed: that expert is already asked to vote."), "#participants")


@login_required
@require_POST
def consultation_reveal_view(request: HttpRequest, consultation_id: int) -> HttpResponse:
    access = _access(request, consultation_id)
    if not access.manages:
        raise Http404
    changed = consultation_reveal_now(pm=access.user, consultation=access.consultation, now=timezone.now())
    return _after(request, access, _("The votes are revealed.") if changed else _("Nothing changed."), "#votes")


@login_required
@require_POST
def consultation_resolve_view(request: HttpRequest, consultation_id: int) -> HttpResponse:
    access = _access(request, consultation_id)
    if not access.manages:
        raise Http404
    try:
        result = consultation_resolve(pm=access.user, consultation=access.consultation,
                                      outcome=request.POST.get("outcome"), category=request.POST.get("category"),
                                      text=request.POST.get("text"),
                                      suggested_text=request.POST.get("suggested_text", ""), now=timezone.now())
    except DomainError as exc:
        return _refused(request, access, exc)
    done = _("Resolved: the item's final label is set (provenance “adjudicated”).") if result.changed \
        else _("Nothing changed: it was already resolved this way.")
    return _after(request, access, done, "#resolution")


@login_required
@require_GET
def my_consultations(request: HttpRequest) -> HttpResponse:
    """The consultations the expert is asked to vote on: waiting for their vote first."""
    rows = list(consultation_list_for_expert(_user(request))[:200])
    return render_page(request, MINE, "rows", {"rows": rows})


@login_required
@require_POST
def consultation_open_pm_view(request: HttpRequest, project_id: int) -> HttpResponse:
    """A PM opens a consultation on an item of a task (from the units page)."""
    user = _user(request)
    project_get_for_user(user, project_id, manage=True)
    try:
        result = consultation_open_by_pm(pm=user, task_id=request.POST.get("task"),
                                         rubric_item_id=request.POST.get("item"), reason=request.POST.get("reason"),
                                         now=timezone.now(), project_id=int(project_id))
    except NotFound:
        raise
    except DomainError as exc:
        messages.error(request, error_message(exc))
        return redirect("quality_items", project_id)
    messages.success(request, _("Consultation opened: the panel is asked to vote.") if result.created
                     else _("This item already has an open consultation."))
    return redirect("consultation_detail", result.consultation.pk)


@login_required
@require_http_methods(["GET", "POST"])
def consultation_ask_view(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """An expert asks for a consultation on an item of a task they submitted, with a reason."""
    user = _user(request)
    assignment = assignment_get_for_expert(user, assignment_id)
    if assignment.status != Assignment.Status.SUBMITTED or assignment.task.is_golden:
        raise Http404
    items = rubric_items_for_task(assignment.task)
    context: dict[str, Any] = {"assignment": assignment, "question": assignment.task.response.question,
                               "items": items, "form": {}, "errors": {}}
    if request.method == "GET":
        return render_page(request, ASK, "form", context)
    try:
        result = consultation_open_by_expert(expert=user, assignment_id=assignment.pk,
                                             rubric_item_id=request.POST.get("item"),
                                             reason=request.POST.get("reason"), now=timezone.now())
    except NotFound:
        raise
    except DomainError as exc:
        context.update(form=request.POST, error=error_message(exc),
                       errors={str(e.get("field")): error_message(exc) for e in exc.errors})
        return render_page(request, ASK, "form", context, status=UNPROCESSABLE)
    messages.success(request, _("Thank you: a consultation on this item is open.") if result.created
                     else _("This item already has an open consultation; you are asked to vote on it."))
    return redirect("consultation_detail", result.consultation.pk)


@login_required
@require_POST
def rubric_suggestion_take_view(request: HttpRequest, project_id: int, suggestion_id: int) -> HttpResponse:
    project = project_get_for_user(_user(request), project_id, manage=True)
    try:
        item = rubric_suggestion_take(project=project, suggestion_id=suggestion_id, by=_user(request),
                                      now=timezone.now())
    except NotFound:
        raise
    except DomainError as exc:
        messages.error(request, error_message(exc))
        return redirect("rubric_draft", project.pk)
    messages.success(request, _("The suggested wording is in the draft's item %(key)s.") % {"key": item.item_key})
    return redirect(reverse("rubric_draft", args=[project.pk]) + f"?question={item.question_ref}")


@login_required
@require_POST
def rubric_suggestion_dismiss_view(request: HttpRequest, project_id: int, suggestion_id: int) -> HttpResponse:
    project = project_get_for_user(_user(request), project_id, manage=True)
    changed = rubric_suggestion_dismiss(project=project, suggestion_id=suggestion_id, by=_user(request),
                                        now=timezone.now())
    messages.info(request, _("Suggestion dismissed.") if changed else _("Nothing changed."))
    return redirect("rubric_draft", project.pk)
