"""Pages of the experts app: a user's notifications and the expert's own profile."""
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import DomainError, error_message, field_error_message
from experts.models import ExpertProfile
from experts.notifications import notification_list_for_user, notification_text, notifications_mark_read
from experts.services import PROFILE_LANGUAGES, WEEKLY_CAPACITY_HIGH, WEEKLY_CAPACITY_LOW, expert_profile_update
from rubrics.models import Dimension


@login_required
@require_GET
def notifications(request: HttpRequest) -> HttpResponse:
    """The user's notifications, newest first, in their language."""
    rows = [{"n": n, "text": notification_text(n)} for n in notification_list_for_user(request.user)[:100]]
    return render(request, "experts/notifications.html", {"rows": rows})


@login_required
@require_POST
def notifications_read(request: HttpRequest) -> HttpResponse:
    notifications_mark_read(user=request.user, now=timezone.now())
    return redirect("notifications")


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
    )
    return render(request, "experts/profile.html", context, status=status)
