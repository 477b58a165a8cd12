"""The guidelines page of a project, for its experts, its PMs and admins (404 for anyone else)."""
from typing import cast

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.guidelines.selectors import guidelines_version_for
from annotation.selectors import project_access_for_user
from experts.models import User
from rubrics.guidelines import guidelines_render
from rubrics.models import Dimension


@login_required
@require_GET
def project_guidelines(request: HttpRequest, project_id: int) -> HttpResponse:
    """The guidelines of the current published rubric version (or of `?version=n`)."""
    access = project_access_for_user(cast(User, request.user), project_id)  # login_required: never anonymous
    version = guidelines_version_for(access, request.GET.get("version"))
    rendered = guidelines_render(version.guidelines if version is not None else "")
    dimensions = [d for d in Dimension.objects.order_by("sort_order") if d.code in rendered.sections]
    return render(request, "annotation/guidelines/guidelines.html", {
        "project": access.project, "manages": access.manages, "version": version,
        "rendered": rendered, "dimensions": dimensions,
    })
