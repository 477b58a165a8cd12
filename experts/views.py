"""Pages of the experts app: a user's notifications."""
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from experts.notifications import notification_list_for_user, notification_text, notifications_mark_read


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
