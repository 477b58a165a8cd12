"""The roster pages: a project's members (add, remove, history, invitations) and the invitation link
that lets a person join, signing up first when they have no account.

Every view parses input, calls one service or selector and renders. A PM reaches only the
projects they manage (another project's page, member or invitation gives 404); admins reach all.
"""
from typing import Any, cast

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.models import Invitation, MembershipEvent, Project
from annotation.roster import services
from annotation.roster.selectors import (
    invitation_get_by_token,
    invitation_get_for_project,
    invitation_list_for_project,
    invitation_state,
    member_get_for_project,
    member_rows_for_project,
    membership_history,
)
from annotation.selectors import project_get_for_user
from core.confirm import Confirmation, confirmation_given, confirmation_page
from core.error_codes import ErrorCode
from core.errors import DomainError, NotFound, error_message, field_error_message
from core.pages import render_page
from experts.models import User

MEMBERS = "annotation/roster/members.html"
INVITE = "annotation/roster/invite.html"
UNPROCESSABLE = 422

# Sign-ups through invitation links, per client address: at most this many attempts per window.
SIGNUP_LIMIT = 10
SIGNUP_WINDOW_S = 15 * 60


def _user(request) -> User:
    """The signed-in account (behind login_required)."""
    return cast(User, request.user)



def _members_context(request: HttpRequest, project: Project, **extra: Any) -> dict[str, Any]:
    now = timezone.now()
    invitations = invitation_list_for_project(project)
    return {
        "project": project, "rows": member_rows_for_project(project), "history": membership_history(project),
        "invitations": [{"invitation": i, "state": invitation_state(i, now=now),
                         "url": request.build_absolute_uri(reverse("invite", args=[i.token]))} for i in invitations],
        "invited_roles": Invitation.InvitedRole.choices,
        "max_days": services.INVITATION_MAX_DAYS, "max_uses": services.INVITATION_MAX_USES,
        "invite_form": {"role": "expert", "expires_in_days": "7", "max_uses": "1"},
        **extra,
    }


@login_required
@require_http_methods(["GET", "POST"])
def members(request: HttpRequest, project_id: int) -> HttpResponse:
    """The members of the project; a POST adds the usernames or emails given, one per line."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    if request.method == "GET":
        return render_page(request, MEMBERS, "roster", _members_context(request, project))
    text = request.POST.get("users", "")
    try:
        report = services.members_add_lines(project=project, text=text, by=_user(request),
                                            via=MembershipEvent.Via.PAGE, now=timezone.now())
    except DomainError as exc:
        return render_page(request, MEMBERS, "roster", _members_context(
            request, project, add_error=error_message(exc), users_text=text), status=UNPROCESSABLE)
    unknown = [r for r in report if r.status == services.LineStatus.UNKNOWN]
    return render_page(request, MEMBERS, "roster", _members_context(
        request, project, report=report, report_added=sum(r.status == services.LineStatus.ADDED for r in report),
        report_unknown=len(unknown),
        # Unknown lines stay in the box, so they can be corrected and sent again.
        users_text="\n".join(r.text for r in unknown)))


@login_required
@require_POST
def member_remove(request: HttpRequest, project_id: int, user_id: int) -> HttpResponse:
    """Remove a member, after a confirmation that says what happens to their leases and work."""
    project = project_get_for_user(_user(request), project_id, manage=True)
    member = member_get_for_project(project, user_id)
    back = reverse("members", args=[project.pk])
    if not confirmation_given(request):
        leases, submitted = services.member_removal_counts(project=project, user=member)
        consequences = [_("%(name)s can no longer open this project.") % {"name": member.username}]
        if member.is_expert and not leases:
            consequences.append(_("They hold no open lease now."))
        elif member.is_expert:
            consequences.append(ngettext(
                "%(count)d open lease ends now and its slot returns to the pool; the draft is kept but cannot "
                "be submitted.",
                "%(count)d open leases end now and their slots return to the pool; drafts are kept but cannot "
                "be submitted.", leases) % {"count": leases})
        if member.is_expert:
            consequences.append(ngettext(
                "%(count)d submitted task and its pay stay.", "%(count)d submitted tasks and their pay stay.",
                submitted) % {"count": submitted})
        consequences.append(_("The removal is recorded with your name and the time."))
        return confirmation_page(request, Confirmation(
            title=_("Remove %(name)s from “%(project)s”?") % {"name": member.username, "project": project.name},
            consequences=consequences, action_url=request.path, cancel_url=back, confirm_label=_("Remove")))
    try:
        removal = services.member_remove(project=project, user=member, by=_user(request),
                                         via=MembershipEvent.Via.PAGE, now=timezone.now())
    except DomainError as exc:
        if isinstance(exc, NotFound):
            raise
        messages.error(request, error_message(exc))
        return redirect(back)
    messages.success(request, ngettext(
        "%(name)s was removed; %(count)d lease returned to the pool.",
        "%(name)s was removed; %(count)d leases returned to the pool.", removal.leases_ended)
        % {"name": member.username, "count": removal.leases_ended})
    if not project_get_reachable(request, project):
        return redirect("home")
    return redirect(back)


def project_get_reachable(request: HttpRequest, project: Project) -> bool:
    try:
        project_get_for_user(_user(request), project.pk, manage=True)
    except NotFound:
        return False
    return True


@login_required
@require_POST
def invitation_create(request: HttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(_user(request), project_id, manage=True)
    form = {k: request.POST.get(k, "") for k in ("role", "expires_in_days", "max_uses")}
    try:
        invitation = services.invitation_create(project=project, by=_user(request), now=timezone.now(), **form)
    except DomainError as exc:
        return render_page(request, MEMBERS, "roster", _members_context(
            request, project, invite_error=error_message(exc), invite_form=form), status=UNPROCESSABLE)
    return render_page(request, MEMBERS, "roster", _members_context(
        request, project, new_invitation=request.build_absolute_uri(reverse("invite", args=[invitation.token]))))


@login_required
@require_POST
def invitation_revoke(request: HttpRequest, project_id: int, invitation_id: int) -> HttpResponse:
    project = project_get_for_user(_user(request), project_id, manage=True)
    invitation = invitation_get_for_project(project, invitation_id)
    back = reverse("members", args=[project.pk])
    if not confirmation_given(request):
        left = max(invitation.max_uses - invitation.use_count, 0)
        return confirmation_page(request, Confirmation(
            title=_("Withdraw this invitation link?"),
            consequences=[
                ngettext("It could still be used %(count)d time; nobody can join through it after this.",
                         "It could still be used %(count)d times; nobody can join through it after this.",
                         left) % {"count": left},
                ngettext("The %(count)d person who joined through it stays a member.",
                         "The %(count)d people who joined through it stay members.",
                         invitation.use_count) % {"count": invitation.use_count},
            ],
            action_url=request.path, cancel_url=back, confirm_label=_("Withdraw")))
    services.invitation_revoke(invitation=invitation, by=_user(request), now=timezone.now())
    messages.success(request, _("The invitation link was withdrawn."))
    return redirect(back)


# --- Opening an invitation link --------------------------------------------------------

def _client_ip(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR", "") or "unknown"


def _signup_throttled(request: HttpRequest) -> bool:
    """Count this attempt; True once the client address has made too many in the window.

    A counter in Django's cache (Redis when configured), so it holds across web processes;
    django-axes throttles failed sign-ins, not account creation, hence these few lines.
    """
    key = f"rubrica:invite-signup:{_client_ip(request)}"
    cache.add(key, 0, SIGNUP_WINDOW_S)
    try:
        attempts = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, SIGNUP_WINDOW_S)
        attempts = 1
    # None while Redis is down (the cache then counts nothing): the sign-up is let through.
    return attempts is not None and attempts > SIGNUP_LIMIT


def _invalid_page(request: HttpRequest, exc: DomainError) -> HttpResponse:
    return render(request, "annotation/roster/invite_invalid.html", {"reason": error_message(exc)}, status=404)


@require_GET
def invite_start(request: HttpRequest) -> HttpResponse:
    """Where the sign-in page's "have an invitation?" leads: paste the link, or read what to do."""
    link = request.GET.get("link", "").strip()
    if link:
        token = link.rstrip("/").rsplit("/", 1)[-1]
        return redirect("invite", token=token) if token else redirect("invite_start")
    return render(request, "annotation/roster/invite_start.html", {})


@require_http_methods(["GET", "POST"])
def invite(request: HttpRequest, token: str) -> HttpResponse:
    """An invitation link: join as the signed-in user, or sign up as an expert and join."""
    now = timezone.now()
    try:
        invitation = invitation_get_by_token(token)
        services.invitation_check(invitation, now=now)
    except DomainError as exc:
        return _invalid_page(request, exc)
    context: dict[str, Any] = {"invitation": invitation, "project": invitation.project, "form": {}, "errors": {}}
    if request.method == "GET":
        if request.user.is_authenticated:
            try:
                services.invitation_role_check(invitation, _user(request))
            except DomainError as exc:
                context.update(error=error_message(exc), wrong_role=True)
        return render(request, INVITE, context)
    if request.user.is_authenticated:
        try:
            joined = services.invitation_accept(invitation=invitation, user=_user(request), now=now)
        except NotFound as exc:
            return _invalid_page(request, exc)
        except DomainError as exc:
            return render(request, INVITE, {**context, "error": error_message(exc)}, status=exc.status)
        if joined:
            messages.success(request, _("You joined “%(project)s”.") % {"project": invitation.project.name})
        else:
            messages.info(request, _("You are already a member of “%(project)s”.")
                          % {"project": invitation.project.name})
        return redirect("home")
    form = {k: request.POST.get(k, "") for k in ("username", "email")}
    context["form"] = form
    if _signup_throttled(request):
        throttled = DomainError("Too many sign-up attempts.", code=ErrorCode.TOO_MANY_SIGNUPS, status=429)
        return render(request, INVITE, {**context, "error": error_message(throttled)}, status=429)
    try:
        user = services.invitation_sign_up(invitation=invitation, password=request.POST.get("password", ""),
                                           password2=request.POST.get("password2", ""), now=now, **form)
    except NotFound as exc:
        return _invalid_page(request, exc)
    except DomainError as exc:
        errors = {e.get("field"): field_error_message(e) for e in exc.errors}
        return render(request, INVITE, {**context, "error": error_message(exc), "errors": errors},
                      status=UNPROCESSABLE if exc.status == 400 else exc.status)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    messages.success(request, _("Welcome! You joined “%(project)s”. Tell the project manager about yourself "
                                "below.") % {"project": invitation.project.name})
    return redirect("my_profile")
