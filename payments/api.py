"""The appeals API (v1): contest, list one's own appeals, list those to decide, decide.

Thin: each operation parses its body, calls one service or selector of `payments.appeals`,
and answers with its output serializer; domain errors go through `core.api`'s handler.
"""
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.selectors import project_get_for_user
from core.errors import NotFound
from experts.models import User
from payments import appeals
from payments.models import Appeal

NOT_FOUND = OpenApiResponse(description="No such object, or not yours.")
REFUSED = OpenApiResponse(description="Refused: window closed, contested already, decided already (409), "
                                      "or a bad field (400, one entry per field); nothing was written.")
LIST_LIMIT = 200


def _user(request: Request) -> User:
    """The authenticated caller (the API's default permission lets no anonymous request in)."""
    user = request.user
    if not isinstance(user, User):
        raise NotAuthenticated()
    return user


@extend_schema_serializer(component_name="Appeal")
class AppealOut(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField(help_text="rejection or statement_line")
    status = serializers.CharField(help_text="open, accepted or denied")
    project_id = serializers.IntegerField()
    assignment_id = serializers.IntegerField()
    task_id = serializers.IntegerField(source="assignment.task_id")
    question_id = serializers.CharField(source="assignment.task.response.question.external_id")
    entry_id = serializers.IntegerField(allow_null=True, help_text="the contested statement line")
    expert = serializers.CharField(source="expert.expert_profile.pseudonym", default="")
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    rejected_at = serializers.DateTimeField(allow_null=True, help_text="the contested rejection, kept on record")
    rejected_reason = serializers.CharField()
    rejected_text = serializers.CharField()
    decided_at = serializers.DateTimeField(allow_null=True)
    decision_reason = serializers.CharField()
    correction_entry_id = serializers.IntegerField(source="correction_id", allow_null=True,
                                                   help_text="the ledger entry an acceptance posted")
    credited = serializers.DecimalField(source="correction.amount", max_digits=12, decimal_places=2,
                                        allow_null=True, default=None)


class AppealCreateApi(APIView):
    """Contest a rejection of your submission (`target_id`: the assignment) or an earning line of
    your statement (`target_id`: the ledger entry) within the project's appeal window."""

    @extend_schema_serializer(component_name="AppealIn")
    class InputSerializer(serializers.Serializer):
        kind = serializers.ChoiceField(choices=Appeal.Kind.choices)
        target_id = serializers.IntegerField()
        reason = serializers.CharField(max_length=appeals.REASON_MAX, allow_blank=True)

    @extend_schema(request=InputSerializer, responses={201: AppealOut, 400: REFUSED, 404: NOT_FOUND,
                                                       409: REFUSED})
    def post(self, request: Request) -> Response:
        user = _user(request)
        if not user.is_expert:
            raise PermissionDenied("Only experts contest rejections and statement lines.")
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        appeal = appeals.appeal_create(expert=user, now=timezone.now(), **body.validated_data)
        return Response(AppealOut(appeal).data, status=status.HTTP_201_CREATED)


class MyAppealsApi(APIView):
    """Your appeals, newest first, with their outcome and the decider's reason."""

    @extend_schema(responses={200: AppealOut(many=True)})
    def get(self, request: Request) -> Response:
        rows = appeals.appeal_list_for_expert(_user(request)).select_related("expert__expert_profile")[:LIST_LIMIT]
        return Response(AppealOut(rows, many=True).data)


class AppealsToDecideApi(APIView):
    """Appeals in the projects where you decide (a PM of it, or a gold or platinum expert in it),
    open ones first; `?project=` narrows to one project, `?status=open` to the undecided."""

    @extend_schema(parameters=[OpenApiParameter("project", int, required=False),
                               OpenApiParameter("status", str, required=False, enum=Appeal.Status.values)],
                   responses={200: AppealOut(many=True), 404: NOT_FOUND})
    def get(self, request: Request) -> Response:
        user = _user(request)
        project = None
        if request.query_params.get("project"):
            project = project_get_for_user(user, request.query_params["project"])
            if appeals.decider_role(user, project) is None:
                raise NotFound("No such project.")
        rows = appeals.appeals_to_decide(user, project=project)
        wanted = request.query_params.get("status")
        if wanted in Appeal.Status.values:
            rows = rows.filter(status=wanted)
        return Response(AppealOut(rows[:LIST_LIMIT], many=True).data)


class AppealDecideApi(APIView):
    """Accept or deny an open appeal with a reason the expert reads. Accepting a line appeal credits
    `amount` (default and most: the line's amount). Never the rejection's own author (403)."""

    @extend_schema_serializer(component_name="AppealDecisionIn")
    class InputSerializer(serializers.Serializer):
        outcome = serializers.ChoiceField(choices=[appeals.Outcome.ACCEPT, appeals.Outcome.DENY])
        reason = serializers.CharField(max_length=appeals.REASON_MAX, allow_blank=True)
        amount = serializers.DecimalField(max_digits=12, decimal_places=2, required=False, allow_null=True)

    @extend_schema(request=InputSerializer, responses={200: AppealOut, 400: REFUSED, 403: REFUSED,
                                                       404: NOT_FOUND, 409: REFUSED})
    def post(self, request: Request, appeal_id: int) -> Response:
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        appeal = appeals.appeal_decide(actor=_user(request), appeal_id=appeal_id, outcome=data["outcome"],
                                       reason=data["reason"], amount=data.get("amount"), now=timezone.now())
        return Response(AppealOut(appeal).data)
