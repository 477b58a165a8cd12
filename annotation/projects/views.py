"""Project setup pages: create a project, its settings page with the lifecycle and the history.

Only a PM of the project or an admin reaches a project's settings (404 for anyone else,
through `project_get_for_user(manage=True)`); creating needs a PM or admin account.
"""
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.models import Project, ProjectState
from annotation.projects.fields import BY_NAME, FIELDS, setting_label
from annotation.projects.selectors import open_leases, overlap_preview, setting_changes_for_project
from annotation.projects.services import (
    project_archive,
    project_clone,
    project_close,
    project_pause,
    project_resume,
    project_settings_update,
)
from annotation.selectors import project_get_for_user
from annotation.services import project_create
from core.confirm import Confirmation, confirmation_given, confirmation_page
from core.errors import DomainError, error_message
from experts.models import Tier, User

NEW = "annotation/projects/new.html"
SETTINGS = "annotation/projects/settings.html"
UNPROCESSABLE = 422
FORM_KEYS = tuple(f.name for f in FIELDS)


def _user(request: HttpRequest) -> User:
    """The signed-in user (every view here is behind `login_required`)."""
    user = request.user
    if not isinstance(user, User):
        raise Http404
    return user


def _lease_seconds(minutes: str) -> Any:
    """The page asks for minutes; the service checks seconds. A non-number passes through
    unchanged so that the service names it."""
    text = (minutes or "").strip()
    return int(text) * 60 if text.isdigit() else text


def _posted_settings(request: HttpRequest, keys: tuple[str, ...]) -> dict[str, Any]:
    values: dict[str, Any] = {k: request.POST[k] for k in keys if k in request.POST}
    if "lease_timeout_min" in request.POST:
        values["lease_timeout_s"] = _lease_seconds(request.POST["lease_timeout_min"])
    return values


def _errors_by_field(exc: DomainError) -> dict[str, str]:
    return {str(e.get("field")): str(e.get("message", "")) for e in exc.errors}


@login_required
@require_http_methods(["GET", "POST"])
def project_new(request: HttpRequest) -> HttpResponse:
    """Create a project: name, description, overlap, lease timeout (minutes) and due date."""
    if not (_user(request).is_pm or _user(request).is_platform_admin):
        raise Http404
    context: dict[str, Any] = {"posted": {}, "errors": {}}
    if request.method == "POST":
        values = _posted_settings(request, ("name", "description", "overlap", "due_date"))
        try:
            project = project_create(created_by=_user(request), name=values.get("name", ""),
                                     description=values.get("description", ""),
                                     overlap=values.get("overlap", ""),
                                     lease_timeout_s=values.get("lease_timeout_s", ""),
                                     due_date=values.get("due_date") or None)
        except DomainError as exc:
            context = {"posted": request.POST, "errors": _errors_by_field(exc), "error": error_message(exc)}
            return render(request, NEW, context, status=UNPROCESSABLE)
        messages.success(request, _("Project “%(name)s” created. Import its questions and responses next.")
                         % {"name": project.name})
        return redirect("project_detail", project.pk)
    return render(request, NEW, context)


def _history_rows(project: Project) -> list[dict[str, Any]]:
    tiers = dict(Tier.choices)
    states = dict(ProjectState.choices)

    booleans = {f.name for f in FIELDS if f.kind == "bool"}

    def shown(name: str, value: str) -> str:
        if name in booleans and value in ("True", "False"):
            return str(_("on") if value == "True" else _("off"))
        if name == "hard_min_tier":
            return str(tiers.get(value, value))
        if BY_NAME.get(name) is not None and BY_NAME[name].kind == "choice":
            return str(dict(BY_NAME[name].choices).get(value, value))
        if name == "state":
            return str(states.get(value, value))
        if name == "archived":
            return _("yes") if value else ""
        return value

    return [{"change": c, "label": setting_label(c.setting), "old": shown(c.setting, c.old_value),
             "new": shown(c.setting, c.new_value)} for c in setting_changes_for_project(project)]


def _settings_context(project: Project, *, posted: Any = None, **extra: Any) -> dict[str, Any]:
    form: dict[str, Any] = {f.name: getattr(project, f.name) for f in FIELDS}
    form["due_date"] = project.due_date.isoformat() if project.due_date else ""
    form["lease_timeout_min"] = project.lease_timeout_s // 60
    if posted is not None:
        # A refused form comes back with what was typed, so nothing has to be typed twice.
        form.update({k: v for k, v in posted.items() if k in form})
        form["apply_to_existing"] = posted.get("apply_to_existing") == "on"
    switches = [
        ("consult_on_unbroken_tie", _("Open one on a tie the extra experts could not break")),
        ("consult_on_score_split", _("Open one on any split of an item whose |score| reaches the threshold")),
        ("consult_on_many_splits", _("Open one on each split item of a task where many items split")),
        ("consult_show_judge", _("Show the judge's label and reason once the votes are revealed")),
    ]
    review_switches = ("review_repeated_notes", "remind_lease_expiring", "alert_quality", "alert_deadline_risk")
    review_numbers = ("min_seconds_per_item", "review_run_length", "remind_lease_minutes", "remind_idle_days")
    return {"project": project, "tiers": Tier.choices, "history": _history_rows(project),
            "fill_orders": BY_NAME["fill_order"].choices,
            "consensus_label_choices": BY_NAME["consensus_labels"].choices,
            "consult_switches": [(name, text, form[name] in (True, "on")) for name, text in switches],
            "review_switches": [(name, setting_label(name), form[name] in (True, "on")) for name in review_switches],
            "review_numbers": [(name, setting_label(name), form[name], BY_NAME[name].range)
                               for name in review_numbers],
            "open_leases": open_leases(project).count(), "form": form, "errors": {}, **extra}


def _overlap_confirmation(request: HttpRequest, project: Project, values: dict[str, Any]) -> HttpResponse | None:
    """Ask before giving existing tasks more slots, with how many tasks it touches."""
    if request.POST.get("apply_to_existing") != "on" or confirmation_given(request):
        return None
    try:
        overlap = int(str(values.get("overlap", "")))
    except ValueError:
        return None
    preview = overlap_preview(project, overlap)
    if not preview["tasks"]:
        return None
    consequences = [
        ngettext("%(n)d existing task gets slots up to %(overlap)d experts.",
                 "%(n)d existing tasks get slots up to %(overlap)d experts.", preview["tasks"])
        % {"n": preview["tasks"], "overlap": overlap},
        ngettext("%(n)d completed task reopens and its consensus is recomputed when it completes again.",
                 "%(n)d completed tasks reopen and their consensus is recomputed when they complete again.",
                 preview["reopen"]) % {"n": preview["reopen"]},
        _("No submitted work is removed; golden tasks are not changed."),
    ]
    fields = {k: str(v) for k, v in request.POST.items() if k not in ("csrfmiddlewaretoken", "confirmed")}
    return confirmation_page(request, Confirmation(
        title=_("Raise the overlap of existing tasks?"), consequences=consequences, action_url=request.path,
        cancel_url=reverse("project_settings", args=[project.pk]), confirm_label=_("Save and apply"),
        fields=fields, danger=False))


@login_required
@require_http_methods(["GET", "POST"])
def project_settings(request: HttpRequest, project_id: int) -> HttpResponse:
    """All settings of the project, its lifecycle buttons and the history of changes."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    if request.method == "GET":
        return render(request, SETTINGS, _settings_context(project))
    values = _posted_settings(request, FORM_KEYS)
    asked = _overlap_confirmation(request, project, values)
    if asked is not None:
        return asked
    try:
        result = project_settings_update(project=project, values=values, changed_by=_user(request),
                                         now=timezone.now(),
                                         apply_to_existing=request.POST.get("apply_to_existing") == "on")
    except DomainError as exc:
        context = _settings_context(project, posted=request.POST, errors=_errors_by_field(exc),
                                    error=error_message(exc))
        return render(request, SETTINGS, context, status=UNPROCESSABLE)
    if result.changes or result.tasks_extended:
        text = ngettext("%(n)d setting changed.", "%(n)d settings changed.", len(result.changes)) % {
            "n": len(result.changes)}
        if result.tasks_extended:
            text += " " + ngettext("%(n)d existing task got more slots.", "%(n)d existing tasks got more slots.",
                                   result.tasks_extended) % {"n": result.tasks_extended}
        messages.success(request, text)
    else:
        messages.info(request, _("Nothing changed."))
    return redirect("project_settings", project.pk)


@login_required
@require_GET
def overlap_preview_view(request: HttpRequest, project_id: int) -> HttpResponse:
    """htmx: how many existing tasks a raised overlap would touch, shown before saving."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    try:
        overlap = int(request.GET.get("overlap", ""))
    except ValueError:
        overlap = project.overlap
    preview = overlap_preview(project, overlap) if overlap > project.overlap else {"tasks": 0, "reopen": 0}
    return render(request, f"{SETTINGS}#overlap-preview",
                  {"project": project, "preview": preview, "preview_overlap": overlap})


def _lifecycle_done(request: HttpRequest, project: Project, changed: bool, done: str) -> HttpResponse:
    if changed:
        messages.success(request, done)
    else:
        messages.info(request, _("Nothing changed."))
    return redirect("project_settings", project.pk)


@login_required
@require_POST
def project_pause_view(request: HttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(_user(request), project_id, manage=True)
    result = project_pause(project=project, by=_user(request), now=timezone.now())
    return _lifecycle_done(request, project, result.changed,
                           _("Project paused: no new tasks are handed out; open ones can be finished."))


@login_required
@require_POST
def project_resume_view(request: HttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(_user(request), project_id, manage=True)
    result = project_resume(project=project, by=_user(request), now=timezone.now())
    return _lifecycle_done(request, project, result.changed, _("Project resumed: tasks are handed out again."))


@login_required
@require_POST
def project_close_view(request: HttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(_user(request), project_id, manage=True)
    if not project.is_closed and not confirmation_given(request):
        leases = open_leases(project).count()
        return confirmation_page(request, Confirmation(
            title=_("Close “%(name)s”?") % {"name": project.name},
            consequences=[
                ngettext("%(n)d open lease ends now; its slot returns and the draft is kept.",
                         "%(n)d open leases end now; their slots return and the drafts are kept.", leases)
                % {"n": leases},
                _("Experts can no longer take or submit tasks."),
                _("Imports, rubric edits and setting changes are refused."),
                _("Exports and reports still work. A closed project cannot be reopened; clone it instead."),
            ],
            action_url=request.path, cancel_url=reverse("project_settings", args=[project.pk]),
            confirm_label=_("Close the project")))
    result = project_close(project=project, by=_user(request), now=timezone.now())
    return _lifecycle_done(request, project, result.changed, ngettext(
        "Project closed; %(n)d open lease ended.", "Project closed; %(n)d open leases ended.",
        result.leases_ended) % {"n": result.leases_ended})


@login_required
@require_POST
def project_archive_view(request: HttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(_user(request), project_id, manage=True)
    if project.is_closed and not project.is_archived and not confirmation_given(request):
        return confirmation_page(request, Confirmation(
            title=_("Archive “%(name)s”?") % {"name": project.name},
            consequences=[_("The project disappears from the project lists; “Show archived” still finds it."),
                          _("Nothing is deleted: its data, exports and reports stay.")],
            action_url=request.path, cancel_url=reverse("project_settings", args=[project.pk]),
            confirm_label=_("Archive")))
    result = project_archive(project=project, by=_user(request), now=timezone.now())
    return _lifecycle_done(request, project, result.changed, _("Project archived."))


@login_required
@require_POST
def project_clone_view(request: HttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(_user(request), project_id, manage=True)
    clone = project_clone(source=project, by=_user(request), name=request.POST.get("name", ""),
                          copy_members=request.POST.get("copy_members") == "on", now=timezone.now())
    messages.success(request, _("Project “%(name)s” created as a copy: rubric, golden set, settings and prices; "
                                "no work.") % {"name": clone.name})
    return redirect("project_settings", clone.pk)
