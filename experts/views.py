"""Pages of the experts app: a user's notifications and the expert's own profile."""
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import DomainError, error_message, field_error_message
from experts.middleware import notifications_changed
from experts.models import ExpertProfile, User
from experts.notification_email import (
    email_kinds_for,
    notification_email_kinds_for_user,
    notification_email_preferences_update,
)
from experts.notifications import (
    kind_label,
    notification_list_for_user,
    notification_mark_read,
    notification_text,
    notification_unread_count,
    notifications_mark_read,
)
from experts.services import PROFILE_LANGUAGES, WEEKLY_CAPACITY_HIGH, WEEKLY_CAPACITY_LOW, expert_profile_update
from rubrics.models import Dimension

# htmx stops polling on this status (the session ended: nothing to count any more).
HTMX_STOP_POLLING = 286


def _email_kinds(user: User) -> list[tuple[str, str, bool]]:
    on = notification_email_kinds_for_user(user)
    return [(kind, kind_label(kind), kind in on) for kind in email_kinds_for(user)]


@login_required
@require_GET
def notifications(request: HttpRequest) -> HttpResponse:
    """The user's notifications, newest first, in their language; email choices for users without a profile."""
    listed = list(notification_list_for_user(request.user)[:100])
    rows = [{"n": n, "text": notification_text(n)} for n in listed]
    context: dict[str, Any] = {"rows": rows, "has_unread": any(n.read_at is None for n in listed)}
    if not request.user.is_expert:
        context["email_kinds"] = _email_kinds(request.user)
    return render(request, "experts/notifications.html", context)


@require_GET
def notifications_badge(request: HttpRequest) -> HttpResponse:
    """The top bar's unread count for its poller: 204 while `shown` is still right (one query)."""
    if not request.user.is_authenticated:
        return HttpResponse(status=HTMX_STOP_POLLING)
    unread = notification_unread_count(request.user)
    if request.GET.get("shown") == str(unread):
        response = HttpResponse(status=204)
    else:
        response = render(request, "experts/_notification_badge.html#update", {"unread": unread})
    add_never_cache_headers(response)
    patch_vary_headers(response, ("Cookie",))
    return response


@login_required
@require_POST
def notifications_read(request: HttpRequest) -> HttpResponse:
    notifications_mark_read(user=request.user, now=timezone.now())
    return redirect("notifications")


@login_required
@require_POST
def notification_read(request: HttpRequest, notification_id: int) -> HttpResponse:
    """Mark one notification read: its row again for htmx (and the badge told to refresh), else the list."""
    notification = notification_mark_read(user=request.user, notification_id=notification_id, now=timezone.now())
    if not getattr(request, "htmx", False):
        return redirect("notifications")
    row = {"n": notification, "text": notification_text(notification)}
    response = render(request, "experts/notifications.html#row", {"row": row})
    patch_vary_headers(response, ("HX-Request",))
    return notifications_changed(response)


@login_required
@require_GET
def notification_open(request: HttpRequest, notification_id: int) -> HttpResponse:
    """Follow a notification's link, marking it read; a link off this site goes to the list instead."""
    notification = notification_mark_read(user=request.user, notification_id=notification_id, now=timezone.now())
    if notification.link and url_has_allowed_host_and_scheme(notification.link, allowed_hosts={request.get_host()},
                                                              require_https=request.is_secure()):
        return redirect(notification.link)
    return redirect("notifications")


@login_required
@require_POST
def notification_email_preferences(request: HttpRequest) -> HttpResponse:
    """Save which notification kinds the user also gets by email, in the page's language."""
    try:
        notification_email_preferences_update(user=request.user, kinds=request.POST.getlist("email_kinds"),
                                              language=translation.get_language() or "", now=timezone.now())
    except DomainError as exc:
        messages.error(request, error_message(exc))
    else:
        messages.success(request, _("Your email choices are saved."))
    target = "my_profile" if request.POST.get("next") == "my_profile" and request.user.is_expert else "notifications"
    return redirect(reverse(target) + "#email")


@login_required
@require_http_methods(["GET", "POST"])
def my_profile(request: HttpRequest) -> HttpResponse:
    """The expert's profile: credentials, specialties, languages and weekly capacity, which PMs see."""
    profile = ExpertProfile.objects.filter(user=request.user).first()
    if profile is None:
        raise Http404
    status = 200
    context: dict[str, Any] = {"profile": profile, "error": None, "errors": {}}
    if request.method == "POST":
        values = {
            "credentials": request.POST.get("credentials", ""),
            "specialty_ids": request.POST.getlist("specialties"),
            "languages": request.POST.getlist("languages"),
            "weekly_capacity": request.POST.get("weekly_capacity", ""),
        }
        try:
            expert_profile_update(profile=profile, **values)
        except DomainError as exc:
            profile.refresh_from_db()
            context.update(error=error_message(exc),
                           errors={e.get("field"): field_error_message(e) for e in exc.errors}, posted=values)
            status = 422
        else:
            messages.success(request, _("Your profile is saved."))
            return redirect("my_profile")
    posted = context.get("posted")
    chosen_dims = ({str(i) for i in posted["specialty_ids"]} if posted
                   else {str(d.pk) for d in profile.specialties.all()})
    chosen_langs = set(posted["languages"]) if posted else set(filter(None, profile.languages.split(",")))
    context.update(
        credentials=posted["credentials"] if posted else profile.credentials,
        weekly_capacity=posted["weekly_capacity"] if posted else profile.weekly_capacity,
        dimensions=[(d, str(d.pk) in chosen_dims) for d in Dimension.objects.filter(is_gate=False)],
        languages=[(code, name, code in chosen_langs) for code, name in PROFILE_LANGUAGES],
        capacity_low=WEEKLY_CAPACITY_LOW, capacity_high=WEEKLY_CAPACITY_HIGH,
        email_kinds=_email_kinds(request.user),
    )
    return render(request, "experts/profile.html", context, status=status)
