"""Reads of the roster: the members of a project with what a PM needs to know about each, the
history of adds and removals, and invitation links. Each is a fixed number of queries,
whatever the number of members."""
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q, QuerySet
from guardian.shortcuts import get_users_with_perms

from annotation.models import Assignment, Invitation, MembershipEvent, Project
from core.error_codes import ErrorCode
from core.errors import NotFound
from experts.models import ExpertProfile, Role, User
from experts.services import PROFILE_LANGUAGES


def project_member_users(project: Project) -> QuerySet[User]:
    """PMs who manage and experts who annotate in `project` (admins are never members)."""
    # Without attach_perms guardian returns a queryset (its stubs allow a dict too).
    holders: QuerySet[User] = get_users_with_perms(  # type: ignore[assignment]
        project, only_with_perms_in=["manage_project", "annotate_project"], with_group_users=False,
        with_superusers=False)
    return User.objects.filter(pk__in=holders.values("pk"), role__in=[Role.PM, Role.EXPERT], is_superuser=False)


def project_pm_count(project: Project) -> int:
    return project_member_users(project).filter(role=Role.PM).count()


def member_get_for_project(project: Project, member) -> User:
    """The member with this user id or username, or NotFound (also for someone of another project)."""
    text = str(member).strip()
    users = project_member_users(project)
    user = (users.filter(pk=int(text)) if text.isdigit() else users.filter(username=text)).first()
    if user is None:
        raise NotFound("No such member of this project.", code=ErrorCode.MEMBER_UNKNOWN, params={"name": text})
    return user


@dataclass(frozen=True)
class MemberRow:
    user: User
    profile: ExpertProfile | None
    specialties: list
    languages: list[str]
    open_leases: int
    submitted: int
    added_at: datetime | None
    added_by: User | None


def member_rows_for_project(project: Project) -> list[MemberRow]:
    """Every member with role, profile, open leases, submitted work and when and by whom they were added."""
    in_project = Q(assignments__task__project=project)
    users = list(
        project_member_users(project)
        .select_related("expert_profile")
        .prefetch_related("expert_profile__specialties")
        .annotate(
            open_leases=Count("assignments", filter=in_project & Q(assignments__status=Assignment.Status.LEASED)),
            submitted=Count("assignments", filter=in_project & Q(assignments__status=Assignment.Status.SUBMITTED,
                                                                 assignments__kind=Assignment.Kind.WORK)),
        )
        .order_by("role", "username")
    )
    added: dict[int, MembershipEvent] = {}
    event: MembershipEvent | None
    for event in (MembershipEvent.objects.filter(project=project, action=MembershipEvent.Action.ADDED)
                  .select_related("by")):
        added.setdefault(event.user_id, event)  # newest first: the add that made them a member now
    names = dict(PROFILE_LANGUAGES)
    rows = []
    for user in users:
        profile = getattr(user, "expert_profile", None) if user.is_expert else None
        event = added.get(user.pk)
        rows.append(MemberRow(
            user=user, profile=profile, specialties=list(profile.specialties.all()) if profile else [],
            languages=[names.get(code, code) for code in profile.languages.split(",") if code] if profile else [],
            open_leases=user.open_leases, submitted=user.submitted,
            added_at=event.at if event else None, added_by=event.by if event else None))
    return rows


def membership_history(project: Project, *, limit: int = 100) -> list[MembershipEvent]:
    return list(MembershipEvent.objects.filter(project=project).select_related("user", "by")[:limit])


def invitation_list_for_project(project: Project) -> list[Invitation]:
    return list(Invitation.objects.filter(project=project).select_related("created_by", "revoked_by")[:100])


def invitation_get_for_project(project: Project, invitation_id) -> Invitation:
    try:
        return Invitation.objects.get(pk=int(invitation_id), project=project)
    except (Invitation.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such invitation.") from None


def invitation_get_by_token(token: str) -> Invitation:
    """The invitation of a link, or NotFound (invitation_invalid) for a token that matches none."""
    token = (token or "").strip()
    invitation = (Invitation.objects.select_related("project").filter(token=token).first()
                  if 20 <= len(token) <= 64 else None)
    if invitation is None:
        raise NotFound("This invitation link is not valid.", code=ErrorCode.INVITATION_INVALID)
    return invitation


def invitation_state(invitation: Invitation, *, now: datetime) -> str:
    """live, revoked, expired or used_up: for the PM's list."""
    if invitation.revoked_at is not None:
        return "revoked"
    if invitation.expires_at <= now:
        return "expired"
    if invitation.use_count >= invitation.max_uses:
        return "used_up"
    return "live"
