"""Judge run pages: a project's runs (start one, import labels), and one run's live progress.

Only the project's PM or an admin reaches these; anyone else gets the 404 of a page
that does not exist. Every view parses input, calls one service or selector, and
renders the whole page, or for htmx only the fragment it swaps. The run page's
progress fragment polls itself every second while the run is active and renders
without the trigger once it has finished, which stops the polling.

The API key is a password input that is never rendered back, and no page shows it,
its ciphertext or anything derived from it.
"""
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotation.exchange.jsonl import upload_open
from annotation.exchange.judge_labels import judge_labels_import
from annotation.judging.runs import (
    ACTIVE,
    judge_run_can_cancel,
    judge_run_can_resume,
    judge_run_cancel,
    judge_run_progress,
    judge_run_resume,
    judge_run_start,
)
from annotation.judging.selectors import judge_run_failures, judge_run_get_for_user, judge_run_list_for_project
from annotation.models import JudgeConfigVersion, JudgeRun, Project
from annotation.selectors import project_get_for_user
from core.errors import DomainError, error_message, field_error_message
from core.pages import render_page

RUNS = "annotation/judging/runs.html"
RUN = "annotation/judging/run.html"
UNPROCESSABLE = 422


class JudgeRunStartForm(forms.Form):
    """Typed input only; what is allowed (URL, rps range, unique name) the service decides."""

    name = forms.CharField(label=gettext_lazy("Run name"), max_length=100)
    config_version = forms.ChoiceField(
        label=gettext_lazy("Judge configuration"), required=False,
        help_text=gettext_lazy("Its prompt, temperature and parameters are sent; its model and base URL fill the "
                               "fields below when they are left empty."),
    )
    base_url = forms.CharField(
        label=gettext_lazy("Base URL"), max_length=500, required=False,
        help_text=gettext_lazy("OpenAI-compatible, ending in the API version, e.g. https://api.openai.com/v1"),
        # Text inputs with an input mode: the shared stylesheet styles text inputs.
        widget=forms.TextInput(attrs={"placeholder": "https://api.openai.com/v1", "inputmode": "url",
                                      "autocomplete": "off", "spellcheck": "false"}),
    )
    judge_model = forms.CharField(label=gettext_lazy("Judge model"), max_length=200, required=False)
    api_key = forms.CharField(
        label=gettext_lazy("API key"), required=False, max_length=1000,
        help_text=gettext_lazy("Stored encrypted and never shown again."),
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    api_key_env = forms.CharField(
        label=gettext_lazy("…or environment variable with the key"), required=False, max_length=100,
        help_text=gettext_lazy("Admins only: read by the workers, e.g. OPENAI_API_KEY, on a project with a grant "
                               "for the variable (Judge key grants in the admin site)."),
        widget=forms.TextInput(attrs={"placeholder": "OPENAI_API_KEY", "autocomplete": "off"}),
    )
    requests_per_second = forms.FloatField(
        label=gettext_lazy("Requests per second"), initial=2,
        widget=forms.TextInput(attrs={"inputmode": "decimal", "autocomplete": "off"}),
    )

    def __init__(self, *args: Any, env_keys: bool = False, project: Project | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["config_version"].choices = [
            ("", gettext_lazy("Built-in HeartBench prompt, temperature 0")), *_version_choices(project)]
        if not env_keys:
            # A key from the server's environment is for admins: a PM is not offered the field
            # (and one sent anyway is refused by the service, with a message).
            del self.fields["api_key_env"]


class JudgeLabelsImportForm(forms.Form):
    file = forms.FileField(label=gettext_lazy("JSONL file"))
    run = forms.CharField(label=gettext_lazy("Run name"), max_length=100)
    judge_model = forms.CharField(label=gettext_lazy("Judge model"), max_length=200, required=False)
    prompt_version = forms.CharField(label=gettext_lazy("Prompt version"), max_length=100, required=False)
    config_version = forms.ChoiceField(
        label=gettext_lazy("Asked with judge configuration"), required=False,
        help_text=gettext_lazy("The configuration version these labels were produced with, if it is recorded here."),
    )

    def __init__(self, *args: Any, project: Project | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["config_version"].choices = [("", gettext_lazy("Not recorded")), *_version_choices(project)]


def _version_choices(project: Project | None) -> list[tuple[str, str]]:
    """The project's judge configuration versions as select options, newest first within a configuration."""
    if project is None:
        return []
    versions = (JudgeConfigVersion.objects.filter(config__project=project).select_related("config")
                .order_by("config__name", "-number"))
    return [(str(v.pk), f"{v.config.name} · v{v.number}" + (f" · {v.judge_model}" if v.judge_model else ""))
            for v in versions]


def _env_keys(request: HttpRequest) -> bool:
    return bool(getattr(request.user, "is_platform_admin", False))


def _runs_context(request: HttpRequest, project: Project, **extra: Any) -> dict[str, Any]:
    return {
        "project": project,
        "runs": judge_run_list_for_project(project),
        "form": JudgeRunStartForm(env_keys=_env_keys(request), project=project),
        "import_form": JudgeLabelsImportForm(project=project),
        **extra,
    }


@login_required
@require_http_methods(["GET", "POST"])
def judge_runs(request: HttpRequest, project_id: int) -> HttpResponse:
    """The project's judge runs and the form that starts a live one (POST)."""
    project = project_get_for_user(request.user, project_id, manage=True)
    if request.method == "GET":
        return render_page(request, RUNS, "runs", _runs_context(request, project))
    form = JudgeRunStartForm(request.POST, env_keys=_env_keys(request), project=project)
    if form.is_valid():
        data = form.cleaned_data
        env_name = data["api_key_env"] if "api_key_env" in form.fields else request.POST.get("api_key_env", "")
        try:
            run = judge_run_start(
                project=project, name=data["name"], base_url=data["base_url"], judge_model=data["judge_model"],
                api_key=data["api_key"] or None, api_key_env=env_name[:200] or None,
                requests_per_second=data["requests_per_second"], created_by=request.user,
                config_version=data["config_version"] or None,
            )
        except DomainError as exc:
            for error in exc.errors or [{"message": exc.message}]:
                field = error.get("field")
                form.add_error(field if field in form.fields else None, field_error_message(error))
        else:
            url = reverse("judge_run", args=[run.pk])
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    context = _runs_context(request, project, form=form)
    return render_page(request, RUNS, "start_form", context, status=UNPROCESSABLE)


@login_required
@require_POST
def judge_labels_import_view(request: HttpRequest, project_id: int) -> HttpResponse:
    """Import judge labels (JSONL) under a named run, all or nothing."""
    project = project_get_for_user(request.user, project_id, manage=True)
    form = JudgeLabelsImportForm(request.POST, request.FILES, project=project)
    outcome: dict[str, Any] = {}
    status = 200
    if not form.is_valid():
        outcome["error"] = _("Choose a JSONL file and name the judge run.")
        status = UNPROCESSABLE
    else:
        data = form.cleaned_data
        try:
            outcome["result"] = judge_labels_import(
                project=project, data=upload_open(data["file"]), run_name=data["run"], judge_model=data["judge_model"],
                prompt_version=data["prompt_version"], created_by=request.user, now=timezone.now(),
                source=data["file"].name, config_version=data["config_version"] or None)
            form = JudgeLabelsImportForm(project=project)
        except DomainError as exc:
            outcome["error"] = error_message(exc)
            outcome["errors"] = exc.errors
            status = UNPROCESSABLE
    context = _runs_context(request, project, import_form=form, outcome=outcome)
    return render_page(request, RUNS, "import_response", context, status=status)


def _run_context(run: JudgeRun, **extra: Any) -> dict[str, Any]:
    progress = judge_run_progress(run)
    run.status = progress["status"]
    return {
        "run": run,
        "project": run.project,
        "progress": progress,
        "finished_count": progress["done"] + progress["failed"],
        "active": run.status in ACTIVE,
        "can_cancel": judge_run_can_cancel(run),
        "can_resume": judge_run_can_resume(run),
        "failures": judge_run_failures(run) if progress["failed"] else [],
        **extra,
    }


@login_required
@require_GET
def judge_run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    """One run: settings, live progress (polled fragment), failures, cancel and resume."""
    run = judge_run_get_for_user(request.user, run_id)
    return render_page(request, RUN, "progress", _run_context(run))


def _run_action(request: HttpRequest, run_id: int, action) -> HttpResponse:
    run = judge_run_get_for_user(request.user, run_id)
    error = ""
    try:
        run = action(run=run, now=timezone.now())
    except DomainError as exc:
        error = error_message(exc)
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect("judge_run", run.pk)
    run = judge_run_get_for_user(request.user, run_id)
    return render_page(request, RUN, "progress", _run_context(run, action_error=error),
                       status=UNPROCESSABLE if error else 200)


@login_required
@require_POST
def judge_run_cancel_view(request: HttpRequest, run_id: int) -> HttpResponse:
    """Stop asking the judge; finished tasks keep their labels."""
    return _run_action(request, run_id, judge_run_cancel)


@login_required
@require_POST
def judge_run_resume_view(request: HttpRequest, run_id: int) -> HttpResponse:
    """Ask again about the pending and failed tasks, never the done ones."""
    return _run_action(request, run_id, judge_run_resume)
