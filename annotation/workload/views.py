"""The PM's workload page. Thin: fetch the project for its PM, call the selectors, render."""
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from annotation.selectors import project_get_for_user
from annotation.workload.selectors import expert_loads_for_project, project_deadline
from core.pages import render_page

WORKLOAD = "annotation/workload.html"


@login_required
@require_GET
def workload(request: HttpRequest, project_id: int) -> HttpResponse:
    """Each expert's leases, submissions against weekly capacity, pace, quality trend and pause state;
    the project's due date, last week's throughput and the finish date it forecasts."""
    project = project_get_for_user(request.user, project_id, manage=True)  # type: ignore[arg-type]
    now = timezone.now()
    context = {"project": project, "deadline": project_deadline(project, now=now),
               "loads": expert_loads_for_project(project, now=now)}
    return render_page(request, WORKLOAD, "workload", context)
