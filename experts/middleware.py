"""Tells an htmx page to refresh its notification badge when its request notified the user."""
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django_htmx.http import trigger_client_event

from experts.notifications import notified_users

# The event the top bar's badge listens for (`hx-trigger="… notifications-changed from:body"`).
NOTIFICATIONS_CHANGED = "notifications-changed"


class NotificationsChangedMiddleware:
    """Collects the users `notification_send` wrote to during the request (no query); when the
    requester is one of them and the request came from htmx, adds an HX-Trigger to the response."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        notified: set[int] = set()
        token = notified_users.set(notified)
        try:
            response = self.get_response(request)
        finally:
            notified_users.reset(token)
        user = getattr(request, "user", None)
        if notified and getattr(request, "htmx", False) and user is not None and user.pk in notified:
            notifications_changed(response)
        return response


def notifications_changed(response: HttpResponse) -> HttpResponse:
    """Add the badge's refresh event to `response`'s HX-Trigger, keeping any event already there."""
    current = response.get("HX-Trigger", "")
    if current and not current.lstrip().startswith("{"):
        # A plain list of event names (htmx reads it comma-separated).
        if NOTIFICATIONS_CHANGED not in current.split(", "):
            response["HX-Trigger"] = f"{current}, {NOTIFICATIONS_CHANGED}"
        return response
    return trigger_client_event(response, NOTIFICATIONS_CHANGED)
