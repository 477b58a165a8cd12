"""The blind-test page (Quality group): draw a sample, and read the report against its pass bar.

Only the project's PM or an admin reaches it; anyone else gets the 404 of a page that
does not exist. Bad input re-renders the form with its message (422) and writes nothing.
"""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotation.agreement.selectors import judge_run_get_for_project, judge_run_list_for_project
from annotation.agreement.services import judge_run_default
from annotation.blind_test.forms import BlindTestForm
from annotation.blind_test.services import (
    blind_test_active,
    blind_test_create,
    blind_test_report,
    blind_test_task_counts,
)
from annotation.models import BlindTest, BlindTestQuestion, JudgeRun, Project, Question
from annotation.selectors import project_get_for_user
from core.errors import DomainError, error_message
from core.pages import render_page, request_is_english
from experts.requests import SignedInRequest

PAGE = "annotation/blind_test/page.html"


def _run(project: Project, raw: str | None) -> JudgeRun | None:
    return judge_run_get_for_project(project, raw) if raw else judge_run_default(project=project)


def _context(request: HttpRequest, project: Project, run: JudgeRun | None,
             form: BlindTestForm | None = None) -> dict[str, Any]:
    test = blind_test_active(project=project)
    report = blind_test_report(test=test, run=run, english=request_is_english(request)) if test else None
    strata: list[dict[str, Any]] = []
    if test is not None:
        counts: dict[tuple[str, str], int] = {}
        for scene, difficulty in BlindTestQuestion.objects.filter(blind_test=test).values_list("scene", "difficulty"):
            counts[(scene, difficulty)] = counts.get((scene, difficulty), 0) + 1
        strata = [{"scene": s or "—", "difficulty": d, "n": n} for (s, d), n in sorted(counts.items())]
    return {"project": project, "run": run, "runs": judge_run_list_for_project(project), "test": test,
            "report": report, "strata": strata, "form": form or BlindTestForm(),
            "tasks": blind_test_task_counts(project=project) if test else None,
            "earlier": BlindTest.objects.filter(project=project, is_active=False).order_by("-number")[:5]}


@login_required
@require_GET
def blind_test_page(request: SignedInRequest, project_id: int) -> HttpResponse:
    """The active blind test's report for the judge run picked with `?run=` (default: the project's default run)."""
    project = project_get_for_user(request.user, project_id, manage=True)
    run = _run(project, request.GET.get("run"))
    return render_page(request, PAGE, "report", _context(request, project, run))


@login_required
@require_POST
def blind_test_create_view(request: SignedInRequest, project_id: int) -> HttpResponse:
    """Draw a new sample (it replaces the active one)."""
    project = project_get_for_user(request.user, project_id, manage=True)
    run = judge_run_default(project=project)
    form = BlindTestForm(request.POST, has_questions=Question.objects.filter(project=project).exists())
    if not form.is_valid():
        return render_page(request, PAGE, "create", _context(request, project, run, form), status=422)
    try:
        test = blind_test_create(project=project, by=request.user, now=timezone.now(),
                                 **form.cleaned())
    except DomainError as exc:
        form.add_error(None, error_message(exc))
        return render_page(request, PAGE, "create", _context(request, project, run, form), status=422)
    messages.success(request, _("Blind test %(number)s drawn: %(n)s of %(total)s questions, seed %(seed)s.")
                     % {"number": test.number, "n": test.questions_sampled, "total": test.questions_total,
                        "seed": test.seed})
    url = reverse("blind_test", args=[project.pk])
    return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)
