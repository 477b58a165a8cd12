"""Pages of the case library and the FAQ. Thin: parse, call one selector or service, render.

Every URL is under a project; `library_access` gives the same 404 to anyone outside it,
and a case or entry of another project is "missing" too. A refused form comes back with
status 422 and everything typed kept.
"""
from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.library.search import search_query_parse
from annotation.library.selectors import (
    case_get,
    case_list,
    faq_can_answer,
    faq_get,
    faq_list,
    faq_mine,
    faq_similar,
    library_access,
)
from annotation.library.services import (
    case_create,
    case_prefill_from_consultation,
    case_publish,
    case_read_record,
    case_unpublish,
    case_update,
    faq_answer,
    faq_ask,
)
from annotation.models import Case, CaseOutcome, CaseStatus, Consultation, Project
from annotation.models.library import FAQ_ANSWER_MAX, FAQ_QUESTION_MAX, TEXT_MAX, TITLE_MAX
from core.error_codes import ErrorCode
from core.errors import DomainError, Forbidden, NotFound, error_message, field_error_message
from core.pages import render_page
from experts.models import User
from rubrics.models import Dimension

CASES = "annotation/library/cases.html"
CASE = "annotation/library/case.html"
CASE_FORM = "annotation/library/case_form.html"
FAQ = "annotation/library/faq.html"
FAQ_ASK = "annotation/library/faq_ask.html"
FAQ_ENTRY = "annotation/library/faq_entry.html"
UNPROCESSABLE = 422
PAGE_SIZE = 50
CASE_TEXT_FIELDS = ("title", "problem", "disagreement", "discussion", "reading", "outcome", "question")


def _user(request: HttpRequest) -> User:
    return cast(User, request.user)  # login_required: never anonymous


def _field_errors(exc: DomainError) -> dict[str, str]:
    errors: dict[str, str] = {}
    for entry in exc.errors:
        errors.setdefault(str(entry.get("field", "")), field_error_message(entry))
    return errors


def _lines(text: str) -> list[str]:
    """Values typed one per line or separated by commas (either kind)."""
    return [part.strip() for line in (text or "").splitlines() for part in line.replace("，", ",").split(",")
            if part.strip()]


def _filters(request: HttpRequest) -> dict[str, str]:
    return {"q": request.GET.get("q", "").strip()[:100], "dimension": request.GET.get("dimension", "").strip()[:40],
            "scene": request.GET.get("scene", "").strip()[:100]}


# --- Cases -----------------------------------------------------------------------------

@login_required
@require_GET
def cases(request: HttpRequest, project_id: int) -> HttpResponse:
    """The project's case library: search (Chinese phrases work), filter by dimension or scene."""
    access = library_access(_user(request), project_id)
    filters = _filters(request)
    status = request.GET.get("status", "") if access.manages else ""
    query = search_query_parse(filters["q"])
    rows = list(case_list(access, query=query, dimension=filters["dimension"], scene=filters["scene"],
                          status=status)[:PAGE_SIZE])
    return render_page(request, CASES, "results", {
        "project": access.project, "manages": access.manages, "cases": rows, "filters": filters, "status": status,
        "query": query, "dimensions": Dimension.objects.order_by("sort_order", "code"),
        "statuses": CaseStatus.choices,
    })


@login_required
@require_GET
def case_detail(request: HttpRequest, project_id: int, case_id: int) -> HttpResponse:
    """One case; the first visit of each expert counts a read (drafts count none)."""
    access = library_access(_user(request), project_id)
    case = case_get(access, case_id)
    # Experts' reads only: "most read" is what experts found worth reading, not PM previews.
    if access.annotates and case_read_record(case=case, user=access.user, now=timezone.now()):
        case.read_count += 1
    return render_page(request, CASE, "case", {"project": access.project, "manages": access.manages, "case": case})


def _case_form_values(source: Any, case: Case | None = None) -> dict[str, str]:
    """The form's values: typed ones, else the case's, else GET prefill (a consultation links here)."""
    if case is not None and source is None:
        return {
            "title": case.title, "problem": case.problem, "disagreement": case.disagreement,
            "discussion": case.discussion, "reading": case.reading, "outcome": case.outcome,
            "question": case.question.external_id if case.question else "",
            "item_keys": "\n".join(link.item_key for link in case.items.all()),
            "scenes": ", ".join(case.scenes or []),
            "dimensions": " ".join(d.code for d in case.dimensions.all()),
        }
    values = {name: str(source.get(name, ""))[:TEXT_MAX] for name in CASE_TEXT_FIELDS}
    values["item_keys"] = "\n".join(source.getlist("item_keys")) if hasattr(source, "getlist") else ""
    values["scenes"] = ", ".join(source.getlist("scenes")) if hasattr(source, "getlist") else ""
    values["dimensions"] = " ".join(source.getlist("dimensions")) if hasattr(source, "getlist") else ""
    return values


def _case_form_context(access, values: dict[str, str], *, case: Case | None = None, error: str = "",
                       errors: dict[str, str] | None = None) -> dict[str, Any]:
    chosen = set(values.get("dimensions", "").split())
    return {
        "project": access.project, "manages": True, "case": case, "values": values, "error": error,
        "errors": errors or {}, "outcomes": CaseOutcome.choices,
        "dimensions": [(d, d.code in chosen) for d in Dimension.objects.order_by("sort_order", "code")],
        "limits": {"title": TITLE_MAX, "text": TEXT_MAX},
    }


def _case_input(post) -> dict[str, Any]:
    return {
        "title": post.get("title", ""), "problem": post.get("problem", ""),
        "disagreement": post.get("disagreement", ""), "discussion": post.get("discussion", ""),
        "reading": post.get("reading", ""), "outcome": post.get("outcome", "") or None,
        "item_keys": _lines(post.get("item_keys", "")), "question": post.get("question", "").strip() or None,
        "scenes": _lines(post.get("scenes", "")), "dimension_codes": post.getlist("dimensions"),
    }


def _posted_values(post) -> dict[str, str]:
    values = {name: post.get(name, "") for name in (*CASE_TEXT_FIELDS, "item_keys", "scenes")}
    values["dimensions"] = " ".join(post.getlist("dimensions"))
    return values


def _source_consultation(project: Project, raw: Any) -> Consultation | None:
    """The consultation a new case is written from (`?consultation=`), of this project only; none when blank."""
    if raw in (None, ""):
        return None
    try:
        return Consultation.objects.select_related("case").get(project=project, pk=int(str(raw)))
    except (Consultation.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such consultation.") from None


@login_required
@require_http_methods(["GET", "POST"])
def case_new(request: HttpRequest, project_id: int) -> HttpResponse:
    """A PM writes a case. GET parameters prefill the form (title, problem, …, item_keys, scenes, dimensions)."""
    access = library_access(_user(request), project_id, manage=True)
    data = request.GET if request.method == "GET" else request.POST
    source = _source_consultation(access.project, data.get("consultation"))
    if request.method == "GET":
        if source is not None and hasattr(source, "case"):
            messages.info(request, _("This consultation is already a case in the library."))
            return redirect("case_detail", access.project.pk, source.case.pk)
        if source is not None and source.status == Consultation.Status.RESOLVED:
            values = case_prefill_from_consultation(source)
        else:
            values = _case_form_values(request.GET)
        return render_page(request, CASE_FORM, "form", _case_form_context(access, values))
    try:
        case = case_create(project=access.project, by=access.user, now=timezone.now(),
                           publish=request.POST.get("publish") == "1", consultation=source,
                           **_case_input(request.POST))
    except DomainError as exc:
        if isinstance(exc, NotFound):
            raise
        values = _posted_values(request.POST) | ({"consultation": str(source.pk)} if source is not None else {})
        context = _case_form_context(access, values, error=error_message(exc), errors=_field_errors(exc))
        status = exc.status if exc.status == 409 else UNPROCESSABLE
        return render_page(request, CASE_FORM, "form", context, status=status)
    messages.success(request, _("Case published.") if case.is_published else _("Case saved as a draft."))
    return redirect("case_detail", access.project.pk, case.pk)


@login_required
@require_http_methods(["GET", "POST"])
def case_edit(request: HttpRequest, project_id: int, case_id: int) -> HttpResponse:
    """A PM changes a case's text and links; its status and readers stay."""
    access = library_access(_user(request), project_id, manage=True)
    case = case_get(access, case_id)
    if request.method == "GET":
        return render_page(request, CASE_FORM, "form",
                           _case_form_context(access, _case_form_values(None, case), case=case))
    try:
        case_update(case=case, by=access.user, now=timezone.now(), **_case_input(request.POST))
    except DomainError as exc:
        context = _case_form_context(access, _posted_values(request.POST), case=case, error=error_message(exc),
                                     errors=_field_errors(exc))
        return render_page(request, CASE_FORM, "form", context, status=UNPROCESSABLE)
    messages.success(request, _("Case saved."))
    return redirect("case_detail", access.project.pk, case.pk)


@login_required
@require_POST
def case_publish_view(request: HttpRequest, project_id: int, case_id: int) -> HttpResponse:
    access = library_access(_user(request), project_id, manage=True)
    case = case_publish(case=case_get(access, case_id), by=access.user, now=timezone.now())
    messages.success(request, _("Case published: experts see it beside its rubric items."))
    return redirect("case_detail", access.project.pk, case.pk)


@login_required
@require_POST
def case_unpublish_view(request: HttpRequest, project_id: int, case_id: int) -> HttpResponse:
    access = library_access(_user(request), project_id, manage=True)
    case = case_unpublish(case=case_get(access, case_id), by=access.user, now=timezone.now())
    messages.success(request, _("Case taken back to draft: experts no longer see it."))
    return redirect("case_detail", access.project.pk, case.pk)


# --- FAQ -------------------------------------------------------------------------------

@login_required
@require_GET
def faq(request: HttpRequest, project_id: int) -> HttpResponse:
    """The project's answered questions (searchable), the member's own, and the open ones for answerers."""
    access = library_access(_user(request), project_id)
    filters = _filters(request)
    can_answer = faq_can_answer(access)
    show_open = request.GET.get("show") == "open" and can_answer
    query = search_query_parse(filters["q"])
    entries = list(faq_list(access, query=query, dimension=filters["dimension"], scene=filters["scene"],
                            unanswered=show_open)[:PAGE_SIZE])
    open_count = faq_list(access, unanswered=True).count() if can_answer else 0
    return render_page(request, FAQ, "results", {
        "project": access.project, "manages": access.manages, "entries": entries, "filters": filters,
        "query": query, "can_answer": can_answer, "show_open": show_open, "open_count": open_count,
        "mine": [] if show_open else faq_mine(access),
        "dimensions": Dimension.objects.order_by("sort_order", "code"),
    })


def _ask_values(source) -> dict[str, str]:
    return {"question": str(source.get("question", ""))[:FAQ_QUESTION_MAX + 100],
            "item": str(source.get("item", ""))[:110], "source": str(source.get("source", ""))[:100]}


@login_required
@require_http_methods(["GET", "POST"])
def faq_ask_view(request: HttpRequest, project_id: int) -> HttpResponse:
    """Ask a question. When answered questions are close to it, the answers come first with
    "post anyway?"; `?item=` and `?source=` (from the annotation page) tag it by the item."""
    access = library_access(_user(request), project_id)
    source = request.POST if request.method == "POST" else request.GET
    values = _ask_values(source)
    context: dict[str, Any] = {"project": access.project, "manages": access.manages, "values": values,
                               "limit": FAQ_QUESTION_MAX, "similar": [], "confirming": False}
    if request.method == "GET":
        return render_page(request, FAQ_ASK, "form", context)
    if request.POST.get("confirmed") != "1" and values["question"].strip():
        similar = faq_similar(access.project, values["question"])
        if similar:
            return render_page(request, FAQ_ASK, "form", {**context, "similar": similar, "confirming": True})
    try:
        entry = faq_ask(project=access.project, by=access.user, now=timezone.now(), question=values["question"],
                        source_question=values["source"] or None, item_key=values["item"])
    except DomainError as exc:
        return render_page(request, FAQ_ASK, "form", {**context, "error": error_message(exc),
                                                     "errors": _field_errors(exc)}, status=UNPROCESSABLE)
    messages.success(request, _("Question posted. You get a notification when it is answered."))
    return redirect("faq_detail", access.project.pk, entry.pk)


@login_required
@require_GET
def faq_similar_view(request: HttpRequest, project_id: int) -> HttpResponse:
    """The htmx fragment under the question field: answered questions close to what is typed."""
    access = library_access(_user(request), project_id)
    if not getattr(request, "htmx", False):
        raise Http404  # a fragment only: the full page is the ask form
    text = request.GET.get("question", "")[:200]
    similar = faq_similar(access.project, text) if len(text.strip()) >= 2 else []
    return render_page(request, FAQ_ASK, "similar", {"project": access.project, "similar": similar})


@login_required
@require_GET
def faq_detail(request: HttpRequest, project_id: int, entry_id: int) -> HttpResponse:
    access = library_access(_user(request), project_id)
    entry = faq_get(access, entry_id)
    return render_page(request, FAQ_ENTRY, "entry", _entry_context(access, entry))


def _entry_context(access, entry, **extra: Any) -> dict[str, Any]:
    return {"project": access.project, "manages": access.manages, "entry": entry,
            "can_answer": faq_can_answer(access), "limit": FAQ_ANSWER_MAX,
            "answer_text": entry.answer, "dimensions": [
                (d, d in entry.dimensions.all()) for d in Dimension.objects.order_by("sort_order", "code")],
            "scenes_text": ", ".join(entry.scenes or []), **extra}


@login_required
@require_POST
def faq_answer_view(request: HttpRequest, project_id: int, entry_id: int) -> HttpResponse:
    """A gold or platinum expert, or a PM, answers (or corrects an answer) and tags the entry."""
    access = library_access(_user(request), project_id)
    entry = faq_get(access, entry_id)
    if not faq_can_answer(access):
        raise Forbidden("Only gold and platinum experts and the project's managers answer questions.",
                        code=ErrorCode.FAQ_ANSWER_NOT_ALLOWED)
    try:
        faq_answer(entry=entry, by=access.user, now=timezone.now(), answer=request.POST.get("answer", ""),
                   dimension_codes=request.POST.getlist("dimensions"), scenes=_lines(request.POST.get("scenes", "")))
    except DomainError as exc:
        context = _entry_context(access, entry, error=error_message(exc), errors=_field_errors(exc),
                                 answer_text=request.POST.get("answer", ""))
        return render_page(request, FAQ_ENTRY, "entry", context, status=UNPROCESSABLE)
    messages.success(request, _("Answer saved. The asker is notified."))
    return redirect("faq_detail", access.project.pk, entry.pk)
