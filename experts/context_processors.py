"""Template context shared by every page."""
from collections.abc import Callable
from functools import cache

from django.conf import settings
from django.http import HttpRequest

from experts.notifications import notification_unread_count


def role(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"role": None}
    return {"role": "admin" if user.is_platform_admin else user.role}


def notifications(request: HttpRequest) -> dict[str, Callable[[], int] | int]:
    """`notifications_unread` for the top bar's badge, and how often its poller asks.

    A callable, so the count is read only when a template shows it (the top bar of a
    full page), not for htmx fragments; cached, so it is read at most once per render.
    """
    user = getattr(request, "user", None)
    poll_s = settings.RUBRICA_NOTIFICATION_POLL_S
    if user is None or not user.is_authenticated:
        return {"notifications_unread": 0, "notifications_poll_s": poll_s}
    return {"notifications_unread": cache(lambda: notification_unread_count(user)), "notifications_poll_s": poll_s}
