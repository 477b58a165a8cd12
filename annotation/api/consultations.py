"""API for consultations: list, read, vote, post and resolve; thin views over `annotation.consultations`.

A consultation answers 404 to anyone who is neither one of its participants nor the project's
PM or an admin, as for one that does not exist. Votes, reasons and posts appear only once the
blind vote is revealed; a participant who may still judge the question sees none of it.
"""
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.serializers import ErrorOut
from annotation.consultations.selectors import (
    consultation_access_for_user,
    consultation_list_for_expert,
    consultation_list_for_project,
    consultation_view,
)
from annotation.consultations.services import consultation_post, consultation_resolve, consultation_vote
from annotation.models import Consultation, Outcome
from annotation.selectors import project_access_for_user
from core.errors import NotFound

_NOT_FOUND = OpenApiResponse(description="No such consultation, or not one you take part in or manage.")
_REFUSED = OpenApiResponse(ErrorOut, description="The request was refused; nothing changed.")


@extend_schema_serializer(component_name="ConsultationSummary")
class ConsultationSummaryOut(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    project_id = serializers.IntegerField()
    task_id = serializers.IntegerField()
    item_key = serializers.CharField(source="rubric_item.item_key")
    question_id = serializers.CharField(source="task.response.question.external_id")
    status = serializers.ChoiceField(choices=Consultation.Status.choices)
    trigger = serializers.ChoiceField(choices=Consultation.Trigger.choices)
    opened_at = serializers.DateTimeField()
    deadline_at = serializers.DateTimeField()
    outcome = serializers.CharField(allow_blank=True)


class ConsultationsApi(APIView):
    """The project's consultations: all of them for its PM, those you are asked to vote on for an expert."""

    @extend_schema(
        operation_id="consultations_list",
        parameters=[OpenApiParameter("status", str, enum=Consultation.Status.values, required=False)],
        responses={200: ConsultationSummaryOut(many=True), 404: OpenApiResponse(description="No such project.")},
    )
    def get(self, request: Request, project_id: int) -> Response:
        access = project_access_for_user(request.user, project_id)  # type: ignore[arg-type]
        state = request.query_params.get("status", "")
        if access.manages:
            rows = consultation_list_for_project(access.project, status=state)
        else:
            rows = consultation_list_for_expert(access.user).filter(project=access.project)
            rows = rows.filter(status=state) if state in Consultation.Status.values else rows
        return Response(ConsultationSummaryOut(rows[:500], many=True).data)


class VoteOut(serializers.Serializer):
    name = serializers.CharField(help_text="pseudonym (an expert) or username (a PM)")
    choice = serializers.ChoiceField(choices=Outcome.choices)
    reason = serializers.CharField()


class PostOut(serializers.Serializer):
    id = serializers.IntegerField()
    author = serializers.CharField()
    text = serializers.CharField()
    reply_to = serializers.IntegerField(allow_null=True)
    quote = serializers.CharField(allow_blank=True)
    at = serializers.DateTimeField()


class ParticipantOut(serializers.Serializer):
    name = serializers.CharField()
    role = serializers.CharField()
    voted = serializers.BooleanField()


class NoteOut(serializers.Serializer):
    author = serializers.CharField()
    text = serializers.CharField()


@extend_schema_serializer(component_name="ConsultationDetail")
class ConsultationDetailOut(ConsultationSummaryOut):
    item_text = serializers.CharField(source="rubric_item.content")
    opening_reason = serializers.CharField(allow_blank=True)
    reason_category = serializers.CharField(allow_blank=True)
    resolution_text = serializers.CharField(allow_blank=True)
    shown = serializers.BooleanField(help_text="false while you may still judge this question: nothing is shown")
    notes = NoteOut(many=True)
    participants = ParticipantOut(many=True)
    votes = VoteOut(many=True, help_text="the blind votes, empty until revealed")
    final_votes = VoteOut(many=True)
    posts = PostOut(many=True)
    judge = serializers.DictField(allow_null=True, help_text="the judge's label and reason, when the project "
                                                             "shows it after the reveal")


def _detail(request: Request, consultation_id: int) -> dict[str, Any]:
    access = consultation_access_for_user(request.user, consultation_id, now=timezone.now())  # type: ignore[arg-type]
    view = consultation_view(access)
    c = access.consultation
    body: dict[str, Any] = {f: getattr(c, f) for f in ("pk", "project_id", "task_id", "rubric_item", "task",
                                                       "status", "trigger", "opened_at", "deadline_at", "outcome",
                                                       "opening_reason", "reason_category", "resolution_text")}
    body.update(shown=view.shown, notes=view.notes, participants=view.participants, votes=view.votes,
                final_votes=view.final_votes, posts=view.posts, judge=view.judge)
    return body


class ConsultationDetailApi(APIView):
    """One consultation as you may see it."""

    @extend_schema(operation_id="consultation_detail", responses={200: ConsultationDetailOut, 404: _NOT_FOUND})
    def get(self, request: Request, consultation_id: int) -> Response:
        return Response(ConsultationDetailOut(_detail(request, consultation_id)).data)


class ConsultationVoteApi(APIView):
    """Vote: the blind vote while the vote is blind (final once cast), else the final vote (changeable)."""

    @extend_schema_serializer(component_name="ConsultationVoteInput")
    class InputSerializer(serializers.Serializer):
        choice = serializers.ChoiceField(choices=Outcome.choices)
        reason = serializers.CharField(max_length=1000)

    @extend_schema_serializer(component_name="ConsultationVoteOutput")
    class OutputSerializer(serializers.Serializer):
        round = serializers.IntegerField(help_text="1 blind, 2 final")
        changed = serializers.BooleanField(help_text="false when the same vote was already recorded")
        revealed = serializers.BooleanField(help_text="this vote was the last blind one: the votes are revealed")
        status = serializers.ChoiceField(choices=Consultation.Status.choices)

    @extend_schema(operation_id="consultation_vote", request=InputSerializer,
                   responses={200: OutputSerializer, 400: _REFUSED, 403: _REFUSED, 404: _NOT_FOUND, 409: _REFUSED})
    def post(self, request: Request, consultation_id: int) -> Response:
        access = consultation_access_for_user(request.user, consultation_id, now=timezone.now())  # type: ignore[arg-type]
        result = consultation_vote(user=access.user, consultation=access.consultation,
                                   choice=request.data.get("choice"), reason=request.data.get("reason"),
                                   now=timezone.now())
        return Response(self.OutputSerializer({"round": result.vote.round, "changed": result.changed,
                                               "revealed": result.revealed,
                                               "status": access.consultation.status}).data)


class ConsultationPostApi(APIView):
    """Post to the discussion (after the reveal); @pseudonym or @username mentions are notified."""

    @extend_schema_serializer(component_name="ConsultationPostInput")
    class InputSerializer(serializers.Serializer):
        text = serializers.CharField(max_length=5000)
        reply_to = serializers.IntegerField(required=False, allow_null=True)
        quote = serializers.CharField(required=False, allow_blank=True, max_length=300)

    @extend_schema_serializer(component_name="ConsultationPostOutput")
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        mentioned = serializers.IntegerField(help_text="how many people the post notified")

    @extend_schema(operation_id="consultation_post", request=InputSerializer,
                   responses={201: OutputSerializer, 400: _REFUSED, 403: _REFUSED, 404: _NOT_FOUND, 409: _REFUSED})
    def post(self, request: Request, consultation_id: int) -> Response:
        access = consultation_access_for_user(request.user, consultation_id, now=timezone.now())  # type: ignore[arg-type]
        post = consultation_post(user=access.user, consultation=access.consultation, text=request.data.get("text"),
                                 reply_to=request.data.get("reply_to"), quote=request.data.get("quote", ""),
                                 now=timezone.now())
        return Response(self.OutputSerializer({"id": post.pk, "mentioned": post.mentioned.count()}).data,
                        status=status.HTTP_201_CREATED)


class ConsultationResolveApi(APIView):
    """Resolve (the project's PM): the outcome sets the item's final label with provenance `adjudicated`."""

    @extend_schema_serializer(component_name="ConsultationResolveInput")
    class InputSerializer(serializers.Serializer):
        outcome = serializers.ChoiceField(choices=Outcome.choices)
        category = serializers.ChoiceField(choices=Consultation.ReasonCategory.choices)
        text = serializers.CharField(max_length=5000)
        suggested_text = serializers.CharField(required=False, allow_blank=True, max_length=4000,
                                               help_text="the rubric item's new wording; required for a "
                                                         "guideline gap")

    @extend_schema_serializer(component_name="ConsultationResolveOutput")
    class OutputSerializer(serializers.Serializer):
        changed = serializers.BooleanField(help_text="false when it was already resolved this way")
        suggestion_id = serializers.IntegerField(allow_null=True)

    @extend_schema(operation_id="consultation_resolve", request=InputSerializer,
                   responses={200: OutputSerializer, 400: _REFUSED, 404: _NOT_FOUND, 409: _REFUSED})
    def post(self, request: Request, consultation_id: int) -> Response:
        access = consultation_access_for_user(request.user, consultation_id, now=timezone.now())  # type: ignore[arg-type]
        if not access.manages:
            raise NotFound("No such consultation.")
        result = consultation_resolve(pm=access.user, consultation=access.consultation,
                                      outcome=request.data.get("outcome"), category=request.data.get("category"),
                                      text=request.data.get("text"),
                                      suggested_text=request.data.get("suggested_text", ""), now=timezone.now())
        return Response(self.OutputSerializer({"changed": result.changed,
                                               "suggestion_id": result.suggestion.pk if result.suggestion
                                               else None}).data)
