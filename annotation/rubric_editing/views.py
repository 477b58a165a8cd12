"""The PM's rubric editor: the draft version's items by question, the diff against the published
version, and publishing with a reason. Only the project's PM and admins reach it (404 otherwise).
"""
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import Truncator
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST

from annotation.models import ItemConsensus, Project, Question, RubricItemSuggestion
from annotation.rubric_editing.impact import rubric_impact
from annotation.rubric_editing.services import (
    rubric_draft_guidelines_update,
    rubric_draft_item_add,
    rubric_draft_item_delete,
    rubric_draft_item_removal,
    rubric_draft_item_update,
    rubric_draft_start,
    rubric_draft_view,
    rubric_version_publish_by_number,
)
from annotation.rubric_editing.versions import (
    rubric_changelog,
    rubric_published_version_get,
    rubric_versions_compare,
)
from annotation.selectors import project_access_for_user, project_get_for_user
from core.confirm import Confirmation, confirmation_given, confirmation_page
from core.errors import DomainError, NotFound, error_message
from rubrics.guidelines import GUIDELINES_MAX, dimension_anchor
from rubrics.models import Dimension, RubricItem

TEMPLATE = "annotation/rubric_editing/draft.html"
QUESTIONS_PER_PAGE = 40
UNPROCESSABLE = 422


def _context(request: HttpRequest, project: Project, **extra: Any) -> dict[str, Any]:
    view = rubric_draft_view(project)
    shown = view.draft or view.published
    search = request.GET.get("q", "").strip()
    questions = Question.objects.filter(project=project).order_by("external_id")
    if search:
        questions = questions.filter(external_id__icontains=search)
    page = Paginator(questions.values_list("external_id", flat=True), QUESTIONS_PER_PAGE).get_page(
        request.GET.get("page"))
    selected = request.GET.get("question") or (page.object_list[0] if page.object_list else None)
    items = []
    if shown is not None and selected:
        items = list(RubricItem.objects.filter(version=shown, question_ref=selected).select_related("dimension")
                     .order_by("position"))
    changed_keys: set[str] = set()
    if view.diff is not None:
        changed_keys = {c.after.item_key for c in view.diff.changed} | {i.item_key for i in view.diff.added}
    return {
        "project": project, "view": view, "shown": shown, "page": page, "search": search,
        "selected": selected, "items": items, "changed_keys": changed_keys,
        "touched": view.diff.touched_questions if view.diff is not None else set(),
        "dimensions": Dimension.objects.order_by("sort_order"),
        "guidelines_text": extra.pop("guidelines_text", shown.guidelines if shown is not None else ""),
        "guidelines_max": GUIDELINES_MAX, "anchor_example": dimension_anchor("warmth"),
        "impact": rubric_impact(project=project, published=view.published, diff=view.diff, at=timezone.now()),
        "suggestions": list(RubricItemSuggestion.objects.filter(project=project,
                                                               status=RubricItemSuggestion.Status.OPEN)[:50]),
        **extra,
    }


def _back(project: Project, question: str | None) -> str:
    url = reverse("rubric_draft", args=[project.pk])
    return f"{url}?question={question}" if question else url


@login_required
@require_GET
def rubric_draft(request: HttpRequest, project_id: int) -> HttpResponse:
    """The draft editor (the published items, read-only, until a draft is started)."""
    project = project_get_for_user(request.user, project_id, manage=True)
    return render(request, TEMPLATE, _context(request, project))


@login_required
@require_POST
def rubric_draft_start_view(request: HttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, manage=True)
    draft = rubric_draft_start(project=project)
    messages.success(request, _("Draft version v%(n)s started as a copy of the published rubric.") % {"n": draft.number})
    return redirect(_back(project, request.POST.get("question")))


def _item_fields(request: HttpRequest) -> dict[str, Any]:
    return {"content": request.POST.get("content", ""), "score": request.POST.get("score", ""),
            "dimension": request.POST.get("dimension", "")}


def _refused(request: HttpRequest, project: Project, exc: DomainError, **extra: Any) -> HttpResponse:
    context = _context(request, project, error=error_message(exc), errors=exc.errors, **extra)
    return render(request, TEMPLATE, context, status=UNPROCESSABLE)


@login_required
@require_POST
def rubric_item_edit(request: HttpRequest, project_id: int, item_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, manage=True)
    try:
        item = rubric_draft_item_update(project=project, item_id=item_id, by=request.user, **_item_fields(request))
    except NotFound:
        raise  # the 404 page, from core.middleware
    except DomainError as exc:
        return _refused(request, project, exc)
    messages.success(request, _("Item %(key)s saved in the draft.") % {"key": item.item_key})
    return redirect(_back(project, item.question_ref))


@login_required
@require_POST
def rubric_item_add(request: HttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, manage=True)
    try:
        item = rubric_draft_item_add(project=project, question_ref=request.POST.get("question", ""),
                                     by=request.user, **_item_fields(request))
    except NotFound:
        raise  # the 404 page, from core.middleware
    except DomainError as exc:
        return _refused(request, project, exc)
    messages.success(request, _("Item %(key)s added to the draft.") % {"key": item.item_key})
    return redirect(_back(project, item.question_ref))


@login_required
@require_POST
def rubric_item_delete(request: HttpRequest, project_id: int, item_id: int) -> HttpResponse:
    """Remove an item from the draft, after a step that names the item and what removing it does."""
    project = project_get_for_user(request.user, project_id, manage=True)
    question = request.POST.get("question", "")
    if not confirmation_given(request):
        try:
            removal = rubric_draft_item_removal(project=project, item_id=item_id)
        except NotFound:
            raise  # the 404 page, from core.middleware
        except DomainError as exc:
            return _refused(request, project, exc)
        item = removal.item
        consequences = [
            _("Item %(key)s of question %(question)s (%(dimension)s): “%(content)s”.") % {
                "key": item.item_key, "question": item.question_ref, "dimension": item.dimension.display_name,
                "content": Truncator(item.content).chars(160)},
            _("It leaves the draft: the next published version no longer has it, and its key is never reused."),
        ]
        if removal.published_labels:
            consequences.append(ngettext(
                "%(count)d label already made on it under v%(version)s stays with that version; after publishing, "
                "this question's tasks are annotated again on the new version.",
                "%(count)d labels already made on it under v%(version)s stay with that version; after publishing, "
                "this question's tasks are annotated again on the new version.",
                removal.published_labels) % {"count": removal.published_labels,
                                             "version": removal.published_version})
        else:
            consequences.append(_("No label has been made on it yet."))
        return confirmation_page(request, Confirmation(
            title=_("Remove item %(key)s from the draft?") % {"key": item.item_key},
            consequences=consequences, action_url=request.path,
            cancel_url=_back(project, question or item.question_ref),
            fields={"question": question or item.question_ref}, confirm_label=_("Remove from the draft")))
    try:
        rubric_draft_item_delete(project=project, item_id=item_id, by=request.user)
    except NotFound:
        raise  # the 404 page, from core.middleware
    except DomainError as exc:
        return _refused(request, project, exc)
    messages.success(request, _("Item removed from the draft."))
    return redirect(_back(project, question))


@login_required
@require_POST
def rubric_guidelines_save(request: HttpRequest, project_id: int) -> HttpResponse:
    """Save the draft's guidelines (a draft is started when there is none); a refusal keeps the text typed."""
    project = project_get_for_user(request.user, project_id, manage=True)
    text = request.POST.get("guidelines", "")
    try:
        draft = rubric_draft_guidelines_update(project=project, guidelines=text, by=request.user)
    except DomainError as exc:
        return _refused(request, project, exc, guidelines_text=text)
    messages.success(request, _("Guidelines saved in draft v%(n)s.") % {"n": draft.number})
    return redirect(reverse("rubric_draft", args=[project.pk]) + "#guidelines-title")


@login_required
@require_POST
def rubric_publish(request: HttpRequest, project_id: int) -> HttpResponse:
    """Publish the draft with a reason; experts are sent back to calibration when the standard changed."""
    project = project_get_for_user(request.user, project_id, manage=True)
    try:
        version = rubric_version_publish_by_number(project=project, number=request.POST.get("version"),
                                                   reason=request.POST.get("reason", ""), now=timezone.now(),
                                                   by=request.user)
    except NotFound:
        raise  # the 404 page, from core.middleware
    except DomainError as exc:
        return _refused(request, project, exc)
    messages.success(request, _("Version v%(n)s is published.") % {"n": version.number})
    return redirect("rubric_draft", project.pk)


@login_required
@require_GET
def rubric_versions(request: HttpRequest, project_id: int) -> HttpResponse:
    """The changelog of every published version (author, time, reason, diff): the project's PM and experts."""
    access = project_access_for_user(request.user, project_id)
    return render(request, "annotation/rubric_editing/versions.html",
                  {"project": access.project, "manages": access.manages, "entries": rubric_changelog(access.project)})


@login_required
@require_GET
def rubric_versions_compare_view(request: HttpRequest, project_id: int) -> HttpResponse:
    """Two published versions side by side on the items they share (PM): hit rate and zone counts."""
    project = project_get_for_user(request.user, project_id, manage=True)
    entries = rubric_changelog(project)
    numbers = [e.version.number for e in entries]
    a_number = request.GET.get("a") or (numbers[1] if len(numbers) > 1 else None)
    b_number = request.GET.get("b") or (numbers[0] if numbers else None)
    rows = None
    a = b = None
    zones = ItemConsensus.Zone.choices
    if a_number is not None and b_number is not None:
        a = rubric_published_version_get(project=project, number=a_number)
        b = rubric_published_version_get(project=project, number=b_number)
        kinds = {"content": _("reworded"), "score": _("rescored"), "dimension": _("dimension changed"),
                 "tags": _("tags changed")}
        rows = [{"item": row, "rate_a": _percent(row.a.hit_rate), "rate_b": _percent(row.b.hit_rate),
                 "changed": [kinds[name] for name in row.changed],
                 "zones": [(row.a.zones.get(value, 0), row.b.zones.get(value, 0)) for value, _label in zones]}
                for row in rubric_versions_compare(a=a, b=b)]
    return render(request, "annotation/rubric_editing/compare.html",
                  {"project": project, "numbers": numbers, "a": a, "b": b, "rows": rows, "zones": zones})


def _percent(rate: float | None) -> str:
    return "—" if rate is None else f"{round(rate * 100)}%"
