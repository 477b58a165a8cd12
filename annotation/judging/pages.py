"""Pages of the judge under the microscope: rubric items, judge configurations and their versions, run comparison.

Only the project's PM or an admin reaches these (`project_get_for_user(..., manage=True)`
answers anyone else with the 404 of a page that does not exist). Each view parses input,
calls one selector or service, and renders the whole page, or for htmx the fragment.
"""
from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from annotation.agreement.item_stats import SORTS, item_stats_facets, item_stats_page
from annotation.agreement.selectors import agreement_report_latest, judge_run_get_for_project
from annotation.agreement.services import judge_run_default
from annotation.dashboard.context import pct, span
from annotation.judging.compare import judge_runs_compare
from annotation.judging.configs import (
    builtin_prompt_template,
    judge_config_create,
    judge_config_diff,
    judge_config_edit,
    judge_config_get_for_project,
    judge_config_version_get,
)
from annotation.judging.items import judge_item_get, judge_item_stat, judge_item_suggest, judge_item_units
from annotation.models import AgreementItemStat, JudgeConfig, JudgeConfigVersion, JudgeRun, Project
from annotation.selectors import project_get_for_user
from core.errors import DomainError, error_message, field_error_message
from core.pages import render_page, request_is_english
from experts.models import User
from rubrics.models import Dimension

ITEMS = "annotation/judging/items.html"
ITEM = "annotation/judging/item.html"
CONFIGS = "annotation/judging/configs.html"
CONFIG = "annotation/judging/config.html"
DIFF = "annotation/judging/config_diff.html"
COMPARE = "annotation/judging/compare.html"
UNPROCESSABLE = 422


def _user(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User):  # login_required let only signed-in users through
        raise Http404
    return user


def _run(project: Project, raw: str | None) -> JudgeRun | None:
    return judge_run_get_for_project(project, raw) if raw else judge_run_default(project=project)


def _dimension_names(english: bool) -> dict[str, str]:
    return {code: (en if english else zh) for code, zh, en in Dimension.objects.values_list("code", "name_zh",
                                                                                            "name_en")}


def _figures(row: AgreementItemStat | None) -> dict[str, Any]:
    if row is None:
        return {}
    return {"units": row.units, "strict": pct(row.strict), "zone_aware": pct(row.zone_aware),
            "strict_ci": span([row.strict_low, row.strict_high]),
            "zone_aware_ci": span([row.zone_aware_low, row.zone_aware_high])}


# --- Rubric items ---------------------------------------------------------------------------

@login_required
@require_GET
def judge_items(request: HttpRequest, project_id: int) -> HttpResponse:
    """Every rubric item the judge labelled, worst strict agreement first; filter by dimension and scene."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    run = _run(project, request.GET.get("run"))
    report = agreement_report_latest(project, judge_run_id=run.pk) if run else None
    dimension, scene = request.GET.get("dimension", ""), request.GET.get("scene", "")
    sort = request.GET.get("sort", "worst")
    sort = sort if sort in SORTS else "worst"
    context: dict[str, Any] = {"project": project, "run": run, "report": report, "dimension": dimension,
                               "scene": scene, "sort": sort, "page": None, "rows": []}
    if report is not None:
        page = item_stats_page(report, dimension=dimension, scene=scene, sort=sort, page=request.GET.get("page", 1))
        names = _dimension_names(request_is_english(request))
        dims, scenes = item_stats_facets(report)
        query = request.GET.copy()
        query.pop("page", None)
        context.update(
            page=page, query=query.urlencode(), dimensions=[(code, names.get(code, code)) for code in dims],
            scenes=scenes,
            rows=[{"stat": r, "dimension": names.get(r.dimension_code, r.dimension_code), **_figures(r)}
                  for r in page.object_list])
    context["sorts"] = [("worst", _("Worst strict agreement first")),
                        ("worst_zone_aware", _("Worst zone-aware agreement first")),
                        ("best", _("Best strict agreement first")), ("units", _("Most units first")),
                        ("split", _("Most split panels first")), ("question", _("Question order"))]
    context["runs"] = JudgeRun.objects.filter(project=project).order_by("-created_at", "-pk")
    return render_page(request, ITEMS, "table", context)


def _item_context(request: HttpRequest, project: Project, run: JudgeRun, item_id: int, **extra: Any
                  ) -> dict[str, Any]:
    item = judge_item_get(project=project, run=run, rubric_item_id=item_id)
    report = agreement_report_latest(project, judge_run_id=run.pk)
    stat = judge_item_stat(report=report, item=item)
    english = request_is_english(request)
    return {"project": project, "run": run, "item": item, "stat": stat, "figures": _figures(stat),
            "dimension": item.dimension.name_en if english else item.dimension.name_zh,
            "units": judge_item_units(run=run, item=item), "suggestion_text": item.content, **extra}


@login_required
@require_http_methods(["GET", "POST"])
def judge_item(request: HttpRequest, project_id: int, item_id: int) -> HttpResponse:
    """One rubric item: per model, the judge's reason beside the experts' notes; POST sends a suggestion."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    run = _run(project, request.GET.get("run") or request.POST.get("run"))
    if run is None:
        return redirect("judge_items", project.pk)
    if request.method == "GET":
        return render_page(request, ITEM, "units", _item_context(request, project, run, item_id))
    context = _item_context(request, project, run, item_id)
    try:
        judge_item_suggest(project=project, run=run, item=context["item"], text=request.POST.get("text"),
                           figures=context["figures"], by=_user(request), now=timezone.now())
    except DomainError as exc:
        context.update(suggestion_error=error_message(exc), suggestion_text=request.POST.get("text", ""))
        return render_page(request, ITEM, "suggest", context, status=UNPROCESSABLE)
    messages.success(request, _("Sent to the rubric draft as a suggestion: take it or dismiss it there."))
    url = f"{reverse('judge_item', args=[project.pk, item_id])}?run={run.pk}"
    return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)


# --- Judge configurations -------------------------------------------------------------------

def _config_form_errors(exc: DomainError) -> dict[str, str]:
    return {str(e.get("field") or "form"): field_error_message(e) for e in (exc.errors or [])} or {
        "form": error_message(exc)}


@login_required
@require_http_methods(["GET", "POST"])
def judge_configs(request: HttpRequest, project_id: int) -> HttpResponse:
    """The project's judge configurations; POST creates one (its version 1)."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    context: dict[str, Any] = {
        "project": project,
        # A list per configuration (`to_attr`): the template's `|last` indexes it, which a queryset refuses.
        "configs": JudgeConfig.objects.filter(project=project).order_by("name").prefetch_related(
            Prefetch("versions", queryset=JudgeConfigVersion.objects.order_by("number"), to_attr="version_list")),
        "form": {"prompt_template": builtin_prompt_template(), "temperature": "0"}, "errors": {},
    }
    if request.method == "GET":
        return render_page(request, CONFIGS, "create", context)
    data = request.POST
    try:
        version = judge_config_create(
            project=project, name=data.get("name"), prompt_template=data.get("prompt_template"),
            judge_model=data.get("judge_model", ""), base_url=data.get("base_url", ""),
            temperature=data.get("temperature"), params=data.get("params"), note=data.get("note", ""),
            created_by=_user(request), now=timezone.now())
    except DomainError as exc:
        context.update(form=data, errors=_config_form_errors(exc))
        return render_page(request, CONFIGS, "create", context, status=UNPROCESSABLE)
    return redirect("judge_config", project.pk, version.config_id)


@login_required
@require_http_methods(["GET", "POST"])
def judge_config(request: HttpRequest, project_id: int, config_id: int) -> HttpResponse:
    """One configuration: its versions, the prompt of the one picked (`?v=`), and the form that writes the next."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    config = judge_config_get_for_project(project, config_id)
    versions = list(config.versions.order_by("-number"))
    latest = versions[0] if versions else None
    shown = judge_config_version_get(config, request.GET["v"]) if request.GET.get("v") else latest
    form: Any = {} if latest is None else {
        "prompt_template": latest.prompt_template, "judge_model": latest.judge_model, "base_url": latest.base_url,
        "temperature": f"{latest.temperature:g}", "params": _params_text(latest.params)}
    context: dict[str, Any] = {"project": project, "config": config, "versions": versions, "shown": shown,
                               "shown_params": _params_text(shown.params) if shown else "",
                               "form": form, "errors": {},
                               "runs": JudgeRun.objects.filter(config_version__config=config)
                               .select_related("config_version").order_by("-created_at")}
    if request.method == "GET":
        return render_page(request, CONFIG, "edit", context)
    data = request.POST
    try:
        version = judge_config_edit(
            config=config, prompt_template=data.get("prompt_template"), judge_model=data.get("judge_model", ""),
            base_url=data.get("base_url", ""), temperature=data.get("temperature"), params=data.get("params"),
            note=data.get("note", ""), created_by=_user(request), now=timezone.now())
    except DomainError as exc:
        context.update(form=data, errors=_config_form_errors(exc))
        return render_page(request, CONFIG, "edit", context, status=UNPROCESSABLE)
    messages.success(request, _("Version %(number)s written; the earlier versions stay as they were.")
                     % {"number": version.number})
    return redirect(f"{reverse('judge_config_diff', args=[project.pk, config.pk])}?a={version.number - 1}"
                    f"&b={version.number}" if version.number > 1 else reverse("judge_config",
                                                                               args=[project.pk, config.pk]))


def _params_text(params: dict[str, Any]) -> str:
    return json.dumps(params, ensure_ascii=False, sort_keys=True) if params else ""


@login_required
@require_GET
def judge_config_diff_view(request: HttpRequest, project_id: int, config_id: int) -> HttpResponse:
    """The line diff of two versions' prompts (`?a=` older, `?b=` newer) and their changed settings."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    config = judge_config_get_for_project(project, config_id)
    versions = list(config.versions.order_by("number"))
    numbers = [v.number for v in versions]
    a = request.GET.get("a") or (numbers[-2] if len(numbers) > 1 else numbers[0] if numbers else None)
    b = request.GET.get("b") or (numbers[-1] if numbers else None)
    old, new = judge_config_version_get(config, a), judge_config_version_get(config, b)
    return render_page(request, DIFF, "diff", {"project": project, "config": config, "versions": versions,
                                                "diff": judge_config_diff(old=old, new=new)})


# --- Comparing two runs ---------------------------------------------------------------------

@login_required
@require_GET
def judge_runs_compare_view(request: HttpRequest, project_id: int) -> HttpResponse:
    """Two runs on the same units (`?a=`, `?b=`): agreement each, the paired McNemar test, where they differ."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    runs = list(JudgeRun.objects.filter(project=project).select_related("rubric_version", "config_version__config")
                .order_by("-created_at", "-pk"))
    context: dict[str, Any] = {"project": project, "runs": runs, "comparison": None, "error": "",
                               "a": request.GET.get("a", ""), "b": request.GET.get("b", "")}
    if context["a"] and context["b"]:
        a, b = judge_run_get_for_project(project, context["a"]), judge_run_get_for_project(project, context["b"])
        try:
            comparison = judge_runs_compare(a=a, b=b)
        except DomainError as exc:
            context["error"] = error_message(exc)
        else:
            names = _dimension_names(request_is_english(request))
            context.update(comparison=comparison, dimension_names=names, english=request_is_english(request))
    elif len(runs) >= 2:
        context.update(a=str(runs[1].pk), b=str(runs[0].pk))
    return render_page(request, COMPARE, "result", context)

