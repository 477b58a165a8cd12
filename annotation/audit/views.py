"""Audit log pages: the admin's (every project, filters, CSV) and a project's for its PM.

The admin page answers 404 to anyone but a platform admin; the project page goes
through `project_get_for_user(manage=True)`, so another project's PM gets 404 too, and
it lists only entries of that project.
"""
import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone
from django.views.decorators.http import require_GET

from annotation.audit.selectors import PAGE_LIMIT, audit_csv, audit_entries, audit_filters_parse
from annotation.models import AuditAction, AuditEntry, Project
from annotation.selectors import project_get_for_user
from core.pages import render_page
from experts.models import User

PAGE = "annotation/audit/audit.html"


def _shown(value: Any) -> str:
    """A detail as a reader expects it: text as is, numbers and lists and objects as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _answer(request: HttpRequest, *, project: Project | None, filename: str) -> HttpResponseBase:
    filters = audit_filters_parse(request.GET)
    entries = audit_entries(filters, project=project)
    if request.GET.get("format") == "csv":
        response = StreamingHttpResponse(audit_csv(entries), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{filename}-{timezone.now():%Y%m%d-%H%M}.csv"'
        return response
    rows: list[AuditEntry] = list(entries[:PAGE_LIMIT])
    for row in rows:
        row.details_shown = [(key, _shown(value)) for key, value in row.details.items()]  # type: ignore[attr-defined]
    context: dict[str, Any] = {
        "project": project, "entries": rows, "limit": PAGE_LIMIT, "actions": AuditAction.choices,
        "filters": filters, "query": request.GET.urlencode(),
        "projects": None if project else list(Project.objects.order_by("name").only("pk", "name")),
        "base_template": "project_page.html" if project else "base.html",
    }
    return render_page(request, PAGE, "audit", context)


@login_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponseBase:
    """Every project's entries, for platform admins: filter by project, user, action and dates; CSV."""
    if not (isinstance(request.user, User) and request.user.is_platform_admin):
        raise Http404
    return _answer(request, project=None, filename="audit")


@login_required
@require_GET
def project_audit(request: HttpRequest, project_id: int) -> HttpResponseBase:
    """One project's entries, for its PM (and admins)."""
    assert isinstance(request.user, User)
    project = project_get_for_user(request.user, project_id, manage=True)
    return _answer(request, project=project, filename=f"audit-project-{project.pk}")
