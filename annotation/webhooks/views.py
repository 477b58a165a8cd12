"""The project's Webhooks page: register endpoints (the secret shown once), the delivery log, resend.

Only a PM of the project or an admin reaches it (404 for anyone else, through
`project_get_for_user(manage=True)`).
"""
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from annotation.models import Project, WebhookEvent
from annotation.selectors import project_get_for_user
from annotation.webhooks.selectors import (
    LOG_LIMIT,
    webhook_endpoint_get,
    webhook_endpoints_for_project,
    webhook_log_for_project,
)
from annotation.webhooks.services import webhook_endpoint_create, webhook_endpoint_disable, webhook_resend
from core.confirm import Confirmation, confirmation_given, confirmation_page
from core.errors import DomainError, error_message, field_error_message
from core.pages import render_page
from experts.models import User

PAGE = "annotation/webhooks/webhooks.html"
UNPROCESSABLE = 422
SESSION_SECRET = "webhook_secret_once"


def _page(request: HttpRequest, project: Project, *, status: int = 200, **extra: Any) -> HttpResponse:
    context: dict[str, Any] = {
        "project": project, "events": WebhookEvent.choices, "limit": LOG_LIMIT,
        "endpoints": list(webhook_endpoints_for_project(project)),
        "log": webhook_log_for_project(project),
        "posted": {"url": "", "events": []}, "errors": {},
        **extra,
    }
    return render_page(request, PAGE, "webhooks", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def webhooks(request: HttpRequest, project_id: int) -> HttpResponse:
    """GET: the page. POST: register an endpoint; the page after the redirect shows its secret, once."""
    assert isinstance(request.user, User)
    project = project_get_for_user(request.user, project_id, manage=True)
    if request.method == "GET":
        # Shown on the first page after the creation and never again (popped from the session).
        shown = request.session.get(SESSION_SECRET)
        if not (isinstance(shown, dict) and shown.get("project") == project.pk):
            return _page(request, project)
        del request.session[SESSION_SECRET]
        return _page(request, project, created=shown)
    url, events = request.POST.get("url", ""), request.POST.getlist("events")
    try:
        result = webhook_endpoint_create(project=project, url=url, events=events, by=request.user,
                                          now=timezone.now())
    except DomainError as exc:
        errors = {str(e.get("field")): field_error_message(e) for e in exc.errors}
        return _page(request, project, status=UNPROCESSABLE, error=error_message(exc), errors=errors,
                     posted={"url": url, "events": events})
    # Redirect after the post, so that reloading the page does not register the endpoint twice.
    request.session[SESSION_SECRET] = {"project": project.pk, "endpoint": result.endpoint.pk, "secret": result.secret}
    return redirect("webhooks", project.pk)


@login_required
@require_POST
def webhook_disable(request: HttpRequest, project_id: int, endpoint_id: int) -> HttpResponse:
    """Stop sending to an endpoint, after a confirming second step."""
    assert isinstance(request.user, User)
    project = project_get_for_user(request.user, project_id, manage=True)
    endpoint = webhook_endpoint_get(project, endpoint_id)
    if not confirmation_given(request):
        return confirmation_page(request, Confirmation(
            title=_("Stop sending events to %(url)s?") % {"url": endpoint.url},
            consequences=[_("No new events are sent to this endpoint; messages already queued fail."),
                          _("Its delivery log stays. To send again, register the URL anew (with a new secret).")],
            action_url=request.path, cancel_url=reverse("webhooks", args=[project.pk]),
            confirm_label=_("Disable")))
    webhook_endpoint_disable(project=project, endpoint_id=endpoint_id, by=request.user, now=timezone.now())
    messages.success(request, _("The endpoint is disabled."))
    return redirect("webhooks", project.pk)


@login_required
@require_POST
def webhook_resend_view(request: HttpRequest, project_id: int, message_id: int) -> HttpResponse:
    """Queue a message for delivery again; the answer is the page with the log."""
    assert isinstance(request.user, User)
    project = project_get_for_user(request.user, project_id, manage=True)
    webhook_resend(project=project, message_id=message_id, by=request.user, now=timezone.now())
    messages.success(request, _("The message is queued for delivery again."))
    return redirect("webhooks", project.pk)
