"""Writes on the roster: adding and removing members, invitation links, signing up through one.

Membership is the guardian object permission of the account's role (PMs manage, experts
annotate; admins reach every project and are never members). Every add and removal writes
a `MembershipEvent` with who did it, when and through which door (page, API, CLI, link).

The last PM of a project cannot remove themselves: they would lock themselves out of a
project nobody else manages. An admin may remove them (admins still reach the project).
"""
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from annotation import lock_objects, permissions
from annotation.assignment.services import leases_end_for_expert
from annotation.audit.services import audit_record
from annotation.models import Assignment, AuditAction, Invitation, MembershipEvent, Project
from annotation.projects.rules import project_check_writable
from annotation.roster.selectors import project_pm_count
from annotation.services import project_add_member
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, NotFound
from experts.models import Role, User
from experts.services import user_create

logger = logging.getLogger(__name__)

Via = MembershipEvent.Via

INVITATION_MAX_DAYS = 90
INVITATION_MAX_USES = 500
TOKEN_BYTES = 32


class LineStatus:
    ADDED = "added"
    ALREADY = "already"
    UNKNOWN = "unknown"
    ADMIN = "admin"
    DUPLICATE = "duplicate"


@dataclass(frozen=True)
class LineResult:
    """What happened to one line of a pasted list."""

    line: int
    text: str
    status: str
    user: User | None = None


@dataclass(frozen=True)
class Removal:
    user: User
    leases_ended: int


def user_find(identifier: str) -> User | None:
    """The account with this username (exactly) or email (case-insensitively), else None."""
    identifier = (identifier or "").strip()
    if not identifier:
        return None
    user = User.objects.filter(username=identifier, is_active=True).first()
    if user is None and "@" in identifier:
        matches = list(User.objects.filter(email__iexact=identifier, is_active=True)[:2])
        # Two accounts sharing an address (possible for accounts made before sign-up checked it)
        # are ambiguous: neither is picked.
        user = matches[0] if len(matches) == 1 else None
    return user


def _record(*, project: Project, user: User, action: str, by: User | None, via: str, now: datetime) -> None:
    event = MembershipEvent.objects.create(project=project, user=user, role=user.role, action=action, by=by, via=via,
                                           at=now)
    # A membership is a permission (django-guardian): the audit entry names the account and the role granted.
    audit_record(actor=by, project_id=project.pk, now=now, object_type="experts.user", object_ids=[user.pk],
                 action=AuditAction.MEMBER_ADD if action == MembershipEvent.Action.ADDED else AuditAction.MEMBER_REMOVE,
                 details={"username": user.username, "role": user.role, "via": via, "event_id": event.pk})


def _admin_refused(user: User) -> DomainError:
    return DomainError(f"{user.username} is an administrator and reaches every project already.",
                       code=ErrorCode.MEMBER_ADMIN, params={"name": user.username})


@transaction.atomic
def member_add(*, project: Project, user: User, by: User | None, via: str, now: datetime) -> bool:
    """Make `user` a member in the role of their account; True if added, False if already a member.

    Raises `DomainError` (member_admin) for an administrator, who reaches every project anyway.
    """
    project_check_writable(project)
    if user.is_platform_admin:
        raise _admin_refused(user)
    if permissions.is_member(user, project):
        return False
    project_add_member(project=project, user=user)
    _record(project=project, user=user, action=MembershipEvent.Action.ADDED, by=by, via=via, now=now)
    logger.info("roster member added", extra={"project": project.pk, "user": user.pk, "via": via})
    return True


@transaction.atomic
def members_add_lines(*, project: Project, text: str, by: User | None, via: str, now: datetime) -> list[LineResult]:
    """Add every username or email of `text` (one per line); report each non-blank line.

    An unknown name or an administrator adds nobody for that line; the other lines are still
    added. Blank lines are skipped; a repeat of an earlier line is reported as a duplicate.
    """
    project_check_writable(project)
    results: list[LineResult] = []
    seen: set[int] = set()
    seen_text: set[str] = set()
    for number, raw in enumerate((text or "").splitlines(), start=1):
        name = raw.strip()
        if not name:
            continue
        user = user_find(name)
        if user is None:
            status = LineStatus.DUPLICATE if name.lower() in seen_text else LineStatus.UNKNOWN
        elif user.pk in seen:
            status = LineStatus.DUPLICATE
        elif user.is_platform_admin:
            status = LineStatus.ADMIN
        else:
            added = member_add(project=project, user=user, by=by, via=via, now=now)
            status = LineStatus.ADDED if added else LineStatus.ALREADY
        seen_text.add(name.lower())
        if user is not None:
            seen.add(user.pk)
        results.append(LineResult(line=number, text=name, status=status, user=user))
    if not results:
        raise DomainError("Give at least one username or email.", code=ErrorCode.REQUIRED,
                          errors=[{"field": "users", "message": "required", "code": ErrorCode.REQUIRED}])
    return results


@transaction.atomic
def member_remove(*, project: Project, user: User, by: User | None, via: str, now: datetime) -> Removal:
    """Take `user` out of the project: the permission goes, their open leases end at once.

    Ended leases return their slots to the pool; drafts stay but can no longer be submitted
    (`leases_end_for_expert`). Submitted work, its consensus and its pay are untouched.
    Raises NotFound (member_unknown) for someone who is not a member and Conflict (last_pm)
    when the last PM would remove themselves.
    """
    if not permissions.is_member(user, project):
        raise NotFound(f"{user.username} is not a member of this project.", code=ErrorCode.MEMBER_UNKNOWN,
                       params={"name": user.username})
    if user.is_pm and by is not None and by.pk == user.pk and project_pm_count(project) <= 1:
        raise Conflict("You are the last project manager of this project.", code=ErrorCode.LAST_PM)
    if user.is_pm:
        permissions.revoke_manage(user, project)
        ended = 0
    else:
        permissions.revoke_annotate(user, project)
        ended = leases_end_for_expert(project=project, expert=user)
    _record(project=project, user=user, action=MembershipEvent.Action.REMOVED, by=by, via=via, now=now)
    logger.info("roster member removed", extra={"project": project.pk, "user": user.pk, "via": via,
                                                "leases_ended": ended})
    return Removal(user=user, leases_ended=ended)


def member_removal_counts(*, project: Project, user: User) -> tuple[int, int]:
    """(open leases, submitted tasks) of `user` in the project: what a removal touches and keeps."""
    rows = Assignment.objects.filter(expert=user, task__project=project)
    return (rows.filter(status=Assignment.Status.LEASED).count(),
            rows.filter(status=Assignment.Status.SUBMITTED, kind=Assignment.Kind.WORK).count())


# --- Invitations -------------------------------------------------------------------------

def _whole_number(value, *, field: str, low: int, high: int, code: str) -> int:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        number = low - 1
    if not low <= number <= high:
        raise DomainError(f"{field} must be between {low} and {high}.", code=code, params={"max": high},
                          errors=[{"field": field, "message": f"expected {low}..{high}", "code": code,
                                   "params": {"max": high}}])
    return number


@transaction.atomic
def invitation_create(*, project: Project, role: str, expires_in_days, max_uses, by: User | None,
                      now: datetime) -> Invitation:
    """A new invitation link to `project` for `role` (expert or pm), valid for a number of days and uses.

    A closed project takes no new members (by link or by name); its roster can still shrink."""
    project_check_writable(project)
    if role not in Invitation.InvitedRole.values:
        params = {"role": repr(role), "roles": ", ".join(Invitation.InvitedRole.values)}
        raise DomainError(f"Unknown role {params['role']}.", code=ErrorCode.INVALID_ROLE, params=params,
                          errors=[{"field": "role", "message": "expert or pm", "code": ErrorCode.INVALID_ROLE,
                                   "params": params}])
    days = _whole_number(expires_in_days, field="expires_in_days", low=1, high=INVITATION_MAX_DAYS,
                         code=ErrorCode.INVITATION_EXPIRY)
    uses = _whole_number(max_uses, field="max_uses", low=1, high=INVITATION_MAX_USES,
                         code=ErrorCode.INVITATION_MAX_USES)
    invitation = Invitation.objects.create(
        project=project, token=secrets.token_urlsafe(TOKEN_BYTES), role=role, expires_at=now + timedelta(days=days),
        max_uses=uses, created_by=by, created_at=now)
    audit_record(actor=by, action=AuditAction.INVITATION_CREATE, project_id=project.pk, objects=[invitation], now=now,
                 details={"role": role, "expires_at": invitation.expires_at.isoformat(), "max_uses": uses})
    logger.info("roster invitation created", extra={"project": project.pk, "invitation": invitation.pk})
    return invitation


@transaction.atomic
def invitation_revoke(*, invitation: Invitation, by: User | None, now: datetime) -> bool:
    """Withdraw the link; True if it was live until now, False if already revoked (nothing changes)."""
    locked = lock_objects.invitation_lock(invitation.pk)
    if locked.revoked_at is not None:
        return False
    locked.revoked_at, locked.revoked_by = now, by
    locked.save(update_fields=["revoked_at", "revoked_by"])
    audit_record(actor=by, action=AuditAction.INVITATION_REVOKE, project_id=locked.project_id, objects=[locked],
                 now=now, details={"role": locked.role, "use_count": locked.use_count})
    invitation.revoked_at, invitation.revoked_by = now, by
    return True


def invitation_check(invitation: Invitation, *, now: datetime) -> None:
    """Raise NotFound saying why a link no longer works: revoked, expired or used up."""
    if invitation.revoked_at is not None:
        raise NotFound("This invitation was withdrawn.", code=ErrorCode.INVITATION_REVOKED)
    if invitation.expires_at <= now:
        raise NotFound("This invitation expired.", code=ErrorCode.INVITATION_EXPIRED)
    if invitation.use_count >= invitation.max_uses:
        raise NotFound("This invitation has been used up.", code=ErrorCode.INVITATION_USED_UP)


def invitation_role_check(invitation: Invitation, user: User) -> None:
    """Raise DomainError (403) when the account's role is not the one the invitation is for."""
    if user.role == invitation.role and not user.is_platform_admin:
        return
    code = ErrorCode.INVITATION_FOR_PMS if invitation.role == Role.PM else ErrorCode.INVITATION_FOR_EXPERTS
    raise DomainError(f"This invitation is for {invitation.role} accounts.", code=code, status=403)


@transaction.atomic
def invitation_accept(*, invitation: Invitation, user: User, now: datetime) -> bool:
    """Join the invitation's project with `user`; True if they joined, False if already a member.

    One use is counted, under the invitation's row lock, only when someone joins: opening the
    link again as a member changes nothing.
    """
    locked = lock_objects.invitation_lock(invitation.pk)
    invitation_check(locked, now=now)
    project_check_writable(locked.project)
    invitation_role_check(locked, user)
    if permissions.is_member(user, locked.project):
        return False
    locked.use_count += 1
    locked.save(update_fields=["use_count"])
    member_add(project=locked.project, user=user, by=locked.created_by, via=Via.INVITATION, now=now)
    return True


def _signup_error(field: str, code: str, message: str, status: int = 400, params: dict | None = None) -> DomainError:
    return DomainError(message, code=code, status=status, params=params or {},
                       errors=[{"field": field, "message": message, "code": code, "params": params or {}}])


@transaction.atomic
def invitation_sign_up(*, invitation: Invitation, username: str, email: str, password: str, password2: str,
                       now: datetime) -> User:
    """Create an expert account (with its profile) through an expert invitation and join the project.

    The password runs through Django's validators; the email must be valid and not in use
    (case-insensitively). Any refusal writes nothing, the invitation's use included.
    """
    locked = lock_objects.invitation_lock(invitation.pk)
    invitation_check(locked, now=now)
    if locked.role != Role.EXPERT:
        raise DomainError("A PM invitation needs an existing PM account.", code=ErrorCode.INVITATION_FOR_PMS,
                          status=403)
    username = (username or "").strip()
    if username:
        try:
            User.username_validator(username)
            if len(username) > 150:
                raise ValidationError("too long")
        except ValidationError:
            raise _signup_error("username", ErrorCode.INVALID_USERNAME, "Not a valid username.") from None
    email = (email or "").strip()
    try:
        validate_email(email)
    except ValidationError:
        raise _signup_error("email", ErrorCode.INVALID_EMAIL, "Enter a valid email address.") from None
    if User.objects.filter(email__iexact=email).exists():
        raise _signup_error("email", ErrorCode.DUPLICATE_EMAIL, "An account with this email already exists.",
                            status=409)
    if password != password2:
        raise _signup_error("password2", ErrorCode.PASSWORD_MISMATCH, "The two passwords differ.")
    user, _token = user_create(username=username, role=Role.EXPERT, password=password, email=email)
    locked.use_count += 1
    locked.save(update_fields=["use_count"])
    member_add(project=locked.project, user=user, by=locked.created_by, via=Via.INVITATION, now=now)
    logger.info("roster signed up through invitation", extra={"project": locked.project_id, "user": user.pk})
    return user
