"""The roster over the API: a project's members and its invitation links (PMs of the project, admins).

`DELETE /projects/{id}/members/{member}/` names the member in the path (a user id, or a
username), not in a body: many clients and proxies drop DELETE bodies.
"""
from typing import cast

from django.urls import reverse
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.common import NOT_FOUND
from annotation.api.serializers import ErrorOut
from annotation.models import Invitation, MembershipEvent
from annotation.roster import services
from annotation.roster.selectors import (
    invitation_get_for_project,
    invitation_list_for_project,
    invitation_state,
    member_get_for_project,
    member_rows_for_project,
)
from annotation.selectors import project_get_for_user
from experts.models import User


def _user(request) -> User:
    """The signed-in account (the API authenticates every caller)."""
    return cast(User, request.user)



@extend_schema_serializer(component_name="MemberOut")
class MemberOut(serializers.Serializer):
    id = serializers.IntegerField(source="user.pk")
    username = serializers.CharField(source="user.username")
    email = serializers.CharField(source="user.email")
    role = serializers.CharField(source="user.role", help_text="expert or pm")
    pseudonym = serializers.CharField(source="profile.pseudonym", allow_null=True, default=None)
    credentials = serializers.CharField(source="profile.credentials", allow_null=True, default=None)
    specialties = serializers.SerializerMethodField(help_text="dimension codes")
    languages = serializers.SerializerMethodField()
    weekly_capacity = serializers.IntegerField(source="profile.weekly_capacity", allow_null=True, default=None)
    tier = serializers.CharField(source="profile.tier", allow_null=True, default=None)
    open_leases = serializers.IntegerField()
    submitted = serializers.IntegerField()
    added_at = serializers.DateTimeField(allow_null=True)
    added_by = serializers.CharField(source="added_by.username", allow_null=True, default=None)

    def get_specialties(self, row) -> list[str]:
        return [d.code for d in row.specialties]

    def get_languages(self, row) -> list[str]:
        return [c for c in (row.profile.languages.split(",") if row.profile else []) if c]  # codes, not names


@extend_schema_serializer(component_name="MemberLineOut")
class LineOut(serializers.Serializer):
    line = serializers.IntegerField()
    text = serializers.CharField()
    status = serializers.ChoiceField(choices=["added", "already", "unknown", "admin", "duplicate"],
                                     help_text="added; already a member; unknown account (nothing written for "
                                               "this line); an administrator (never a member); a repeated line")
    user_id = serializers.IntegerField(source="user.pk", allow_null=True, default=None)


class MembersApi(APIView):
    """List the project's members, or add accounts by username or email (a per-line report)."""

    @extend_schema_serializer(component_name="MembersIn")
    class InputSerializer(serializers.Serializer):
        users = serializers.ListField(child=serializers.CharField(allow_blank=True), allow_empty=False,
                                      help_text="usernames or emails; each account joins in its own role")

    @extend_schema(operation_id="members_list", responses={200: MemberOut(many=True), 404: NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(_user(request), project_id, manage=True)
        return Response(MemberOut(member_rows_for_project(project), many=True).data)

    @extend_schema(
        operation_id="members_add", request=InputSerializer,
        responses={200: OpenApiResponse(LineOut(many=True), description="One entry per non-blank line; unknown "
                                        "accounts add nobody, the others are added."),
                   400: OpenApiResponse(ErrorOut, description="No names given."), 404: NOT_FOUND},
    )
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(_user(request), project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        report = services.members_add_lines(project=project, text="\n".join(body.validated_data["users"]),
                                            by=_user(request), via=MembershipEvent.Via.API, now=timezone.now())
        return Response(LineOut(report, many=True).data)


class MemberApi(APIView):
    """Remove one member (by user id or username): their open leases end, their submitted work and pay stay."""

    @extend_schema_serializer(component_name="MemberRemovedOut")
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField(source="user.pk")
        username = serializers.CharField(source="user.username")
        leases_ended = serializers.IntegerField()

    @extend_schema(operation_id="members_remove", responses={
        200: OutputSerializer, 404: NOT_FOUND,
        409: OpenApiResponse(ErrorOut, description="The last PM cannot remove themselves.")})
    def delete(self, request: Request, project_id: int, member: str) -> Response:
        project = project_get_for_user(_user(request), project_id, manage=True)
        user = member_get_for_project(project, member)
        removal = services.member_remove(project=project, user=user, by=_user(request), via=MembershipEvent.Via.API,
                                         now=timezone.now())
        return Response(self.OutputSerializer(removal).data)


@extend_schema_serializer(component_name="InvitationOut")
class InvitationOut(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.SerializerMethodField(help_text="the link to send; null once it no longer works")
    role = serializers.CharField()
    expires_at = serializers.DateTimeField()
    max_uses = serializers.IntegerField()
    use_count = serializers.IntegerField()
    state = serializers.SerializerMethodField(help_text="live, revoked, expired or used_up")
    revoked_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()

    def get_state(self, invitation) -> str:
        return invitation_state(invitation, now=self.context["now"])

    def get_url(self, invitation) -> str | None:
        if invitation_state(invitation, now=self.context["now"]) != "live":
            return None
        return self.context["request"].build_absolute_uri(reverse("invite", args=[invitation.token]))


class InvitationsApi(APIView):
    """List the project's invitation links, or create one."""

    @extend_schema_serializer(component_name="InvitationIn")
    class InputSerializer(serializers.Serializer):
        role = serializers.ChoiceField(choices=Invitation.InvitedRole.choices, default="expert")
        expires_in_days = serializers.IntegerField(default=7, min_value=1, max_value=services.INVITATION_MAX_DAYS)
        max_uses = serializers.IntegerField(default=1, min_value=1, max_value=services.INVITATION_MAX_USES)

    @extend_schema(operation_id="invitations_list", responses={200: InvitationOut(many=True), 404: NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(_user(request), project_id, manage=True)
        context = {"request": request, "now": timezone.now()}
        return Response(InvitationOut(invitation_list_for_project(project), many=True, context=context).data)

    @extend_schema(operation_id="invitations_create", request=InputSerializer,
                   responses={201: InvitationOut, 400: ErrorOut, 404: NOT_FOUND})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(_user(request), project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        now = timezone.now()
        invitation = services.invitation_create(project=project, by=_user(request), now=now, **body.validated_data)
        return Response(InvitationOut(invitation, context={"request": request, "now": now}).data,
                        status=status.HTTP_201_CREATED)


class InvitationRevokeApi(APIView):
    """Withdraw an invitation link; withdrawing it again changes nothing. People who joined stay."""

    @extend_schema(operation_id="invitations_revoke", request=None, responses={200: InvitationOut, 404: NOT_FOUND})
    def post(self, request: Request, project_id: int, invitation_id: int) -> Response:
        project = project_get_for_user(_user(request), project_id, manage=True)
        invitation = invitation_get_for_project(project, invitation_id)
        now = timezone.now()
        services.invitation_revoke(invitation=invitation, by=_user(request), now=now)
        return Response(InvitationOut(invitation, context={"request": request, "now": now}).data)
