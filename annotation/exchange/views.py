"""The export page: pick filters and a format, download now or have a worker build the file.

Only the project's PM or an admin reaches it; an export job's page and file only its
owner, while they manage the project (anyone else gets the 404 of a page that does not
exist). The job page's progress fragment polls itself every second while the job is
waiting or building, and renders without the trigger once it has finished.
"""
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from annotation.exchange.export import COMPLETION, FILTER_NAMES, ZONES, ExportFilters, export_filters_parse
from annotation.exchange.export_formats import FORMATS, export_format_check
from annotation.exchange.export_jobs import (
    ACTIVE,
    export_job_create,
    export_job_file,
    export_job_get_for_user,
    export_job_list_for_user,
    export_stream_start,
)
from annotation.models import ExportJob, Project, Response
from annotation.selectors import project_get_for_user
from core.errors import DomainError, error_message
from core.pages import render_page
from experts.models import User
from rubrics.models import Dimension, RubricVersion

EXPORTS = "annotation/exports/exports.html"
JOB = "annotation/exports/job.html"
UNPROCESSABLE = 422


def _user(request: HttpRequest) -> User:
    return cast(User, request.user)  # login_required: never anonymous


def _choices(project: Project) -> dict[str, Any]:
    return {
        "formats": list(FORMATS),
        "versions": list(RubricVersion.objects.filter(rubric_id=project.rubric_id).order_by("number")
                         .values_list("number", flat=True)),
        "zones": ZONES,
        "dimensions": list(Dimension.objects.order_by("sort_order", "code").values("code", "name_zh", "name_en")),
        "models": list(Response.objects.filter(project=project).order_by("model_name")
                       .values_list("model_name", flat=True).distinct()),
        "completions": COMPLETION,
    }


def _page(request: HttpRequest, project: Project, *, form: dict[str, str], error: str = "",
          status: int = 200) -> HttpResponse:
    context = {"project": project, "form": form, "error": error, **_choices(project),
               "jobs": export_job_list_for_user(project, _user(request))}
    return render_page(request, EXPORTS, "form", context, status=status)


def _form(request: HttpRequest) -> dict[str, str]:
    data = request.POST if request.method == "POST" else request.GET
    return {name: data.get(name, "") for name in ("format", *FILTER_NAMES)}


def _parse(project: Project, form: dict[str, str]) -> tuple[str, ExportFilters]:
    fmt = form["format"] or "jsonl"
    export_format_check(fmt=fmt)
    return fmt, export_filters_parse(project=project, raw=form)


@login_required
@require_GET
def exports(request: HttpRequest, project_id: int) -> HttpResponse:
    """The export form and the user's recent export jobs."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    return _page(request, project, form=_form(request))


@login_required
@require_GET
def export_download(request: HttpRequest, project_id: int) -> HttpResponse | StreamingHttpResponse:
    """Stream the filtered dataset now; a bad filter re-renders the form with the error."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    form = _form(request)
    try:
        fmt, filters = _parse(project, form)
    except DomainError as exc:
        return _page(request, project, form=form, error=error_message(exc), status=UNPROCESSABLE)
    job, chunks = export_stream_start(project=project, owner=_user(request), fmt=fmt, filters=filters,
                                      now=timezone.now())
    content_type, extension = FORMATS[fmt]
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="project-{project.pk}-consensus.{extension}"'
    response["X-Rubrica-Snapshot"] = str(job.snapshot_id)
    return response


@login_required
@require_POST
def export_job_start(request: HttpRequest, project_id: int) -> HttpResponse:
    """Queue a file export for a worker and go to its progress page."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    form = _form(request)
    try:
        fmt, filters = _parse(project, form)
    except DomainError as exc:
        return _page(request, project, form=form, error=error_message(exc), status=UNPROCESSABLE)
    job = export_job_create(project=project, owner=_user(request), fmt=fmt, filters=filters, now=timezone.now())
    return redirect("export_job", job.pk)


def _job_context(job: ExportJob) -> dict[str, Any]:
    now = timezone.now()
    return {"job": job, "project": job.project, "active": job.status in ACTIVE,
            "expired": job.expires_at <= now, "ready": job.status == ExportJob.Status.DONE and job.expires_at > now}


@login_required
@require_GET
def export_job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    """One export job: progress (polled fragment), then the download link or why there is none."""
    job = export_job_get_for_user(_user(request), job_id)
    return render_page(request, JOB, "progress", _job_context(job))


@login_required
@require_GET
def export_job_download(request: HttpRequest, job_id: int) -> FileResponse:
    """The job's file, for its owner only and until it expires."""
    job = export_job_get_for_user(_user(request), job_id)
    path = export_job_file(job=job, now=timezone.now())
    content_type, extension = FORMATS[job.fmt]
    return FileResponse(path.open("rb"), as_attachment=True, content_type=content_type,
                        filename=f"project-{job.project_id}-{job.snapshot_id}.{extension}")
