"""Pages: the expert's loop (home, next task, annotate, draft, submit) and the PM's project page.

Every view parses input, calls one selector or service, and renders. An htmx request
gets only the fragment it swaps (`"annotation/annotate.html#workspace"`), any other
request the whole page, so each page also works without JavaScript.
"""
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ObjectDoesNotExist
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotation.assignment.selectors import (
    TASKS_LEFT_CAP,
    assignment_state,
    expert_work_for_projects,
    lease_clock,
    tasks_left_for_projects,
)
from annotation.assignment.services import assignment_claim_next, assignment_claim_next_in
from annotation.assignment.views import skip_reasons
from annotation.exchange.jsonl import upload_open
from annotation.exchange.questions import questions_import
from annotation.exchange.responses import responses_import
from annotation.library.selectors import CASES_PER_ITEM, RelevantCase, cases_for_items
from annotation.models import Assignment, Draft, Project, Question, Response
from annotation.quality.standing import HomeCard, expert_home_cards
from annotation.reveal.selectors import judge_has_labels
from annotation.selectors import (
    assignment_get_for_expert,
    project_access_for_user,
    project_get_for_user,
    project_list_for_user,
    rubric_items_for_task,
    rubric_version_current,
    task_progress_for_project,
    task_progress_for_projects,
)
from annotation.submission.services import draft_save, labels_submit
from core.errors import DomainError, NotFound, error_message
from core.pages import render_page
from experts.models import User
from rubrics.models import Category, RubricItem

ANNOTATE = "annotation/annotate.html"
HOME = "annotation/home.html"
PROJECT = "annotation/project.html"
# A re-rendered form after a refused request: htmx swaps 422 responses (see base.html).
UNPROCESSABLE = 422
MINUS = "\u2212"


# --- Home ----------------------------------------------------------------------------

@dataclass(frozen=True)
class ExpertProjectRow:
    project: Project
    submitted: int
    in_progress: int
    tasks_left: int  # open tasks of the current version they may still take, up to TASKS_LEFT_CAP + 1
    card: HomeCard | None  # tier and calibration standing; None for an expert without a profile

    @property
    def tasks_left_more(self) -> bool:
        """More tasks are left than the count goes to: the page says "more than N"."""
        return self.tasks_left > TASKS_LEFT_CAP

    @property
    def tasks_left_cap(self) -> int:
        return TASKS_LEFT_CAP


def _expert_rows(user: User, projects: list[Project], now: datetime) -> list[ExpertProjectRow]:
    cards = expert_home_cards(user, projects, now=now)
    work = expert_work_for_projects(user, projects, now=now)
    # The cards read the expert's profile; its tier saves the tasks-left count reading it again.
    tier = next(iter(cards.values())).profile.tier if cards else None
    left = tasks_left_for_projects(user, projects, tier=tier)
    return [
        ExpertProjectRow(project=p, submitted=work[p.pk].submitted, in_progress=work[p.pk].in_progress,
                         tasks_left=left[p.pk], card=cards.get(p.pk))
        for p in projects
    ]


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Experts see the projects they annotate in; PMs and admins the projects they manage."""
    user = request.user
    archived = not user.is_expert and request.GET.get("archived") == "1"
    projects = project_list_for_user(user, archived=archived).order_by("name", "pk")
    context: dict[str, Any]
    if user.is_expert:
        context = {"expert_rows": _expert_rows(user, list(projects), timezone.now())}
    else:
        context = {"managed_rows": task_progress_for_projects(projects), "archived": archived,
                   "can_create": user.is_pm or user.is_platform_admin}
    return render_page(request, HOME, "projects", context)


# --- The expert's loop ---------------------------------------------------------------

@login_required
@require_POST
def next_task(request: HttpRequest, project_id: int) -> HttpResponse:
    """Lease the next task of the project and open it; back home with a message when none is left."""
    try:
        if request.user.is_expert:
            project, assignment = assignment_claim_next_in(project_id=project_id, expert=request.user,
                                                           now=timezone.now())
        else:  # a PM or an admin: the project's page is theirs to see, its work is not
            project = project_access_for_user(request.user, project_id).project
            assignment = assignment_claim_next(project=project, expert=request.user, now=timezone.now())
    except DomainError as exc:
        if isinstance(exc, NotFound):  # a project that is not yours answers 404, as every page does
            raise
        if exc.code == "calibration_required":
            messages.info(request, error_message(exc))
            return _redirect(request, reverse("calibration", args=[project_id]))
        messages.error(request, error_message(exc))
        return _redirect(request, reverse("home"))
    if assignment is None:
        messages.info(request, _("No task is waiting for you in “%(project)s” right now. Thank you!")
                      % {"project": project.name})
        return _redirect(request, reverse("home"))
    return _redirect(request, reverse("annotate", args=[assignment.pk]))


def _redirect(request: HttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@dataclass(frozen=True)
class ItemRow:
    """One rubric item as the annotation form shows it."""

    key: str
    position: int
    dimension: str
    dimension_code: str  # its guidelines section is `dim-<code>` (rubrics.guidelines)
    category: str
    score_text: str
    tone: str  # "positive", "negative", "zero" or "gate"
    content: str
    value: int | None
    note: str
    missing: bool
    cases: tuple[RelevantCase, ...] = ()  # published cases of the library beside the item, best first
    cases_total: int = 0


def _score_text(score: int | None) -> tuple[str, str]:
    if score is None:
        return "", "gate"
    if score > 0:
        return f"+{score}", "positive"
    if score < 0:
        return f"{MINUS}{abs(score)}", "negative"
    return "0", "zero"


def _item_rows(items: list[RubricItem], labels: dict[str, Any], notes: dict[str, str],
               missing: set[str], cases: dict[str, list[RelevantCase]] | None = None) -> list[ItemRow]:
    rows = []
    for item in items:
        relevant = (cases or {}).get(item.item_key, [])
        score_text, tone = _score_text(item.score)
        value = labels.get(item.item_key)
        rows.append(ItemRow(
            key=item.item_key, position=item.position, dimension=item.dimension.display_name,
            dimension_code=item.dimension.code,
            # A gate item's category is "gate" too; its badge already says so.
            category="" if tone == "gate" else Category(item.dimension.category).label,
            score_text=score_text, tone=tone,
            content=item.content, value=value if value in (0, 1) else None,
            note=notes.get(item.item_key, ""), missing=item.item_key in missing,
            cases=tuple(relevant[:CASES_PER_ITEM]), cases_total=len(relevant),
        ))
    return rows


def _draft_of(assignment: Assignment) -> Draft | None:
    try:
        return assignment.draft
    except ObjectDoesNotExist:
        return None


def _posted_marks(request: HttpRequest) -> tuple[dict[str, Any], dict[str, str]]:
    """Labels and notes from the form: `label-<item key>` = 0|1, `note-<item key>` = text.

    A value other than "0" or "1" is passed on as is, so the service names it in its error.
    """
    labels: dict[str, Any] = {}
    notes: dict[str, str] = {}
    for name, value in request.POST.items():
        if name.startswith("label-"):
            labels[name.removeprefix("label-")] = {"0": 0, "1": 1}.get(value, value)
        elif name.startswith("note-"):
            notes[name.removeprefix("note-")] = value
    return labels, notes


def _annotate_context(assignment: Assignment, *, labels: dict[str, Any] | None = None,
                      notes: dict[str, str] | None = None, error: DomainError | None = None,
                      now: datetime) -> dict[str, Any]:
    task = assignment.task
    question: Question = task.response.question
    draft = _draft_of(assignment) if assignment.status != Assignment.Status.SUBMITTED else None
    if labels is None:
        labels = dict(draft.labels) if draft else {}
        notes = dict(draft.notes) if draft else {}
    missing = {
        e["field"].removeprefix("labels.") for e in (error.errors if error else [])
        if str(e.get("field", "")).startswith("labels.")
    }
    rubric_items = rubric_items_for_task(task)
    cases = cases_for_items(project=task.project, question=question, items=rubric_items)
    items = _item_rows(rubric_items, labels, notes or {}, missing, cases)
    state = assignment_state(assignment, now=now)
    returned = getattr(assignment, "submission_return", None) if state == "leased" else None
    return {
        "assignment": assignment,
        "returned_comment": returned.comment if returned and returned.resubmitted_at is None
        and returned.lapsed_at is None else "",
        "project": task.project,
        "question": question,
        "difficulty": question.get_difficulty_display(),
        "turns": question.dialogue,
        "final_user_turn": question.final_user_turn,
        "reply": task.response.text,
        "items": items,
        "done": sum(1 for row in items if row.value is not None),
        "total": len(items),
        "state": state,
        "draft_saved_at": draft.updated_at if draft else None,
        "save_state": "saved" if draft else "idle",
        "error": error_message(error) if error else "",
        # Reveal after submission (annotation.reveal): offered once the judge has labelled the task.
        "compare_with_judge": (state == "submitted" and task.project.judge_reveal and not task.is_golden
                               and assignment.kind == Assignment.Kind.WORK and judge_has_labels(task=task)),
        "submitted_count": (expert_work_for_projects(assignment.expert, [task.project], now=now)[task.project_id]
                            .submitted if state == "submitted" else 0),
        "strings": annotate_strings(),
        "clock": lease_clock(assignment, now=now),
        "skip_reasons": skip_reasons(),
    }


def annotate_strings() -> dict[str, str]:
    """Texts the page script shows, in the user's language (placeholders in %(name)s form)."""
    return {
        "saving": _("Saving…"),
        "saved": _("Saved"),
        "unsaved": _("Not saved: kept in this browser, retrying"),
        "offline": _("Offline: kept in this browser, will save when back"),
        "restored": _("Restored unsaved marks from this browser."),
        "unlabelled": _("Items still without a mark: %(count)s. Jumped to item %(position)s."),
        "ready": _("All items marked. Press Enter to submit."),
        "submitting": _("Submitting…"),
        "lease_warning": _("Less than %(minutes)s min left on this task. Press W to keep working."),
        "lease_over": _("Your time on this task is up. You can still submit while the task has a free place."),
        "lease_extended": _("Your time on this task was extended."),
    }


@login_required
@require_GET
def annotate(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """The annotation page of the expert's own assignment: dialogue, reply, rubric items."""
    assignment = assignment_get_for_expert(request.user, assignment_id)
    context = _annotate_context(assignment, now=timezone.now())
    return render_page(request, ANNOTATE, "workspace", context)


@login_required
@require_POST
def draft_save_view(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """Autosave the marks so far; answers htmx with the save-status fragment."""
    labels, notes = _posted_marks(request)
    now = timezone.now()
    try:
        draft = draft_save(expert=request.user, assignment_id=assignment_id, labels=labels, notes=notes, now=now)
    except NotFound:
        raise  # the 404 page, from core.middleware
    except DomainError as exc:
        if not request.htmx:
            messages.error(request, error_message(exc))
            return redirect("annotate", assignment_id)
        return render_page(request, ANNOTATE, "save_status",
                           {"save_state": "error", "save_error": error_message(exc)}, status=UNPROCESSABLE)
    if not request.htmx:
        messages.success(request, _("Draft saved."))
        return redirect("annotate", assignment_id)
    return render_page(request, ANNOTATE, "save_status", {"save_state": "saved", "draft_saved_at": draft.updated_at})


@login_required
@require_POST
def submit_view(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """Submit every mark at once; a refusal re-renders the form with every mark kept."""
    labels, notes = _posted_marks(request)
    now = timezone.now()
    try:
        labels_submit(expert=request.user, assignment_id=assignment_id, labels=labels, notes=notes, now=now)
    except NotFound:
        raise  # the 404 page, from core.middleware
    except DomainError as exc:
        assignment = assignment_get_for_expert(request.user, assignment_id)
        context = _annotate_context(assignment, labels=labels, notes=notes, error=exc, now=now)
        return render_page(request, ANNOTATE, "workspace", context, status=UNPROCESSABLE)
    if not request.htmx:
        messages.success(request, _("Submitted. Thank you!"))
        return redirect("annotate", assignment_id)
    assignment = assignment_get_for_expert(request.user, assignment_id)
    context = _annotate_context(assignment, now=now)
    context["just_submitted"] = True
    return render_page(request, ANNOTATE, "workspace", context)


# --- The PM's project page -----------------------------------------------------------

IMPORT_KINDS = ("questions", "responses")


def _project_context(project: Project) -> dict[str, Any]:
    version = rubric_version_current(project)
    limit = settings.RUBRICA_MAX_IMPORT_BYTES
    return {
        "import_limit": limit,
        "import_limit_label": f"{limit / 2**20:.0f} MB" if limit % 2**20 == 0 else f"{limit / 2**20:.1f} MB",
        "project": project,
        "row": task_progress_for_project(project),
        "questions": Question.objects.filter(project=project).count(),
        "responses": Response.objects.filter(project=project).count(),
        "version": version,
    }


@login_required
@require_GET
def project_detail(request: HttpRequest, project_id: int) -> HttpResponse:
    """A managed project: progress, imports and export links (its PM and admins only)."""
    project = project_get_for_user(request.user, project_id, manage=True)
    return render_page(request, PROJECT, "main", _project_context(project))


@login_required
@require_POST
def project_import(request: HttpRequest, project_id: int, kind: str) -> HttpResponse:
    """Import a questions or responses JSONL into the project, all or nothing."""
    project = project_get_for_user(request.user, project_id, manage=True)
    if kind not in IMPORT_KINDS:
        raise Http404
    upload = request.FILES.get("file")
    outcome: dict[str, Any] = {"kind": kind}
    status = 200
    if upload is None:
        outcome["error"] = _("Choose a JSONL file to import.")
        status = UNPROCESSABLE
    else:
        try:
            data = upload_open(upload)
            if kind == "questions":
                result = questions_import(project=project, data=data, now=timezone.now(), by=request.user)
            else:
                model = request.POST.get("model", "").strip() or None
                result = responses_import(project=project, data=data, model=model, now=timezone.now(),
                                          by=request.user)
            outcome["result"] = result
        except DomainError as exc:
            outcome["error"] = error_message(exc)
            outcome["errors"] = exc.errors
            status = UNPROCESSABLE
    context = {**_project_context(project), "outcome": outcome}
    return render_page(request, PROJECT, "main", context, status=status)
