"""The expert's loop over the API: lease the next task, autosave a draft, submit; keep working, give back or
skip a task; the expert's own history; the PM's list of skips."""
from django.core.paginator import Paginator
from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.common import NOT_FOUND
from annotation.api.common import require_expert as _require_expert
from annotation.api.serializers import AssignmentOut, SubmitIn, SubmitOut
from annotation.assignment.controls import assignment_extend, assignment_release, assignment_skip
from annotation.assignment.selectors import (
    SKIPS_LIMIT,
    assignment_state,
    expert_history,
    history_status,
    lease_seconds_left,
    project_skip_counts,
    project_skips,
)
from annotation.assignment.services import assignment_claim_next_in
from annotation.idempotency import idempotent_call
from annotation.models import TaskSkip
from annotation.selectors import assignment_get_for_expert, project_get_for_user
from annotation.submission.services import draft_save, labels_submit
from core.error_codes import ErrorCode
from core.errors import DomainError


class NextTaskApi(APIView):
    @extend_schema(request=None, responses={200: AssignmentOut, 204: OpenApiResponse(description="No task left")})
    def post(self, request, project_id: int):
        _require_expert(request)
        now = timezone.now()
        _project, assignment = assignment_claim_next_in(project_id=project_id, expert=request.user, now=now)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        # A lease taken by this request starts at `now` (a lease held before started earlier).
        new_lease = assignment.leased_at == now
        return Response(AssignmentOut(assignment, context={"now": now, "new_lease": new_lease}).data)


class AssignmentDetailApi(APIView):
    @extend_schema(responses={200: AssignmentOut})
    def get(self, request, assignment_id: int):
        assignment = assignment_get_for_expert(request.user, assignment_id)
        return Response(AssignmentOut(assignment, context={"now": timezone.now()}).data)


class DraftApi(APIView):
    @extend_schema_serializer(component_name="DraftOut")
    class OutputSerializer(serializers.Serializer):
        labels = serializers.JSONField(help_text='{"<rubric_item_id>": 0 or 1} for the items marked so far')
        notes = serializers.JSONField(help_text='{"<rubric_item_id>": "text"}')

    @extend_schema(request=SubmitIn, responses={200: OutputSerializer})
    def put(self, request, assignment_id: int):
        body = SubmitIn(data=request.data)
        body.is_valid(raise_exception=True)
        draft = draft_save(expert=request.user, assignment_id=assignment_id, labels=body.validated_data["labels"],
                           notes=body.validated_data.get("notes"), now=timezone.now())
        return Response(self.OutputSerializer(draft).data)


class SubmitApi(APIView):
    @extend_schema(
        request=SubmitIn,
        responses={200: SubmitOut, 201: SubmitOut,
                   422: OpenApiResponse(description="The Idempotency-Key was used before with another body.")},
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False)],
    )
    def post(self, request, assignment_id: int):
        body = SubmitIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data

        def run() -> tuple[int, dict]:
            result = labels_submit(expert=request.user, assignment_id=assignment_id, labels=data["labels"],
                                   notes=data.get("notes"), now=timezone.now())
            out = SubmitOut({"assignment": result.assignment.pk, "status": result.assignment.status,
                             "submitted_at": result.assignment.submitted_at,
                             "task_complete": result.task_complete}).data
            return (201 if result.created else 200), dict(out)

        code, out = idempotent_call(user=request.user, key=request.headers.get("Idempotency-Key"),
                                    scope=f"submit:{assignment_id}", payload=data, run=run)
        return Response(out, status=code)


@extend_schema_serializer(component_name="LeaseOut")
class LeaseOut(serializers.Serializer):
    """A lease after one of the expert's controls: its state and the time left on it."""

    id = serializers.IntegerField(source="assignment.pk")
    status = serializers.CharField(source="assignment.status")
    state = serializers.CharField()
    expires_at = serializers.DateTimeField(source="assignment.expires_at")
    seconds_left = serializers.IntegerField()


def _lease_body(assignment, now) -> dict:
    return dict(LeaseOut({"assignment": assignment, "state": assignment_state(assignment, now=now),
                          "seconds_left": lease_seconds_left(assignment, now=now)}).data)


class ExtendApi(APIView):
    """Keep working: the lease runs a full timeout from now (409 `lease_expired` once it ran out)."""

    @extend_schema(request=None, responses={200: LeaseOut, 404: NOT_FOUND})
    def post(self, request, assignment_id: int):
        now = timezone.now()
        assignment = assignment_extend(expert=request.user, assignment_id=assignment_id, now=now)
        return Response(_lease_body(assignment, now))


class ReleaseApi(APIView):
    """Give the task back: the slot returns and the task is not offered to you again. Repeating it is harmless."""

    @extend_schema(request=None, responses={200: LeaseOut, 404: NOT_FOUND})
    def post(self, request, assignment_id: int):
        assignment = assignment_release(expert=request.user, assignment_id=assignment_id)
        return Response(_lease_body(assignment, timezone.now()))


@extend_schema_serializer(component_name="SkipIn")
class SkipIn(serializers.Serializer):
    reason = serializers.CharField(help_text="cannot_judge, content_problem, not_my_field or other")
    text = serializers.CharField(required=False, allow_blank=True, default="",
                                 help_text="required for the reason other")


@extend_schema_serializer(component_name="SkipOut")
class SkipOut(serializers.Serializer):
    assignment = serializers.IntegerField(source="assignment_id")
    reason = serializers.CharField()
    text = serializers.CharField()
    created_at = serializers.DateTimeField()


class SkipApi(APIView):
    """Skip the task with a reason the PM reads; the lease ends. 201 the first time, 200 for a repeat."""

    @extend_schema(request=SkipIn, responses={200: SkipOut, 201: SkipOut, 404: NOT_FOUND})
    def post(self, request, assignment_id: int):
        body = SkipIn(data=request.data)
        body.is_valid(raise_exception=True)
        result = assignment_skip(expert=request.user, assignment_id=assignment_id,
                                 reason=body.validated_data["reason"], text=body.validated_data["text"],
                                 now=timezone.now())
        return Response(SkipOut(result.skip).data, status=201 if result.created else 200)


HISTORY_PAGE_SIZE = 25


@extend_schema_serializer(component_name="HistoryEntry")
class HistoryEntryOut(serializers.Serializer):
    """One task of the expert's own history: the question, never the model."""

    assignment = serializers.IntegerField(source="pk")
    project = serializers.IntegerField(source="task.project_id")
    project_name = serializers.CharField(source="task.project.name")
    question_id = serializers.CharField(source="task.response.question.external_id")
    final_user_turn = serializers.CharField(source="task.response.question.final_user_turn")
    status = serializers.SerializerMethodField(help_text="submitted, skipped or released")
    skip_reason = serializers.SerializerMethodField()
    at = serializers.DateTimeField(source="finished_at")

    @extend_schema_field(serializers.CharField())
    def get_status(self, obj) -> str:
        return history_status(obj)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_skip_reason(self, obj) -> str | None:
        return obj.skip.reason if history_status(obj) == "skipped" else None


class MyHistoryApi(APIView):
    """Your own finished tasks, newest first, `HISTORY_PAGE_SIZE` a page (`?page=2`)."""

    @extend_schema_serializer(component_name="HistoryPage")
    class OutputSerializer(serializers.Serializer):
        count = serializers.IntegerField()
        page = serializers.IntegerField()
        pages = serializers.IntegerField()
        results = HistoryEntryOut(many=True)

    @extend_schema(parameters=[OpenApiParameter("page", int, required=False)], responses={200: OutputSerializer})
    def get(self, request):
        _require_expert(request)
        page = Paginator(expert_history(request.user), HISTORY_PAGE_SIZE).get_page(request.query_params.get("page"))
        return Response(self.OutputSerializer({"count": page.paginator.count, "page": page.number,
                                               "pages": page.paginator.num_pages,
                                               "results": list(page.object_list)}).data)


@extend_schema_serializer(component_name="ProjectSkip")
class ProjectSkipOut(serializers.Serializer):
    question_id = serializers.CharField(source="task.response.question.external_id")
    reason = serializers.CharField()
    text = serializers.CharField()
    expert = serializers.CharField(source="expert.expert_profile.pseudonym", default="")
    created_at = serializers.DateTimeField()


class ProjectSkipsApi(APIView):
    """The project's skips for its PM, newest first (`?reason=` filters), with counts per reason."""

    @extend_schema_serializer(component_name="ProjectSkips")
    class OutputSerializer(serializers.Serializer):
        counts = serializers.DictField(child=serializers.IntegerField())
        results = ProjectSkipOut(many=True)

    @extend_schema(parameters=[OpenApiParameter("reason", str, required=False)],
                   responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request, project_id: int):
        project = project_get_for_user(request.user, project_id, manage=True)
        reason = request.query_params.get("reason") or None
        if reason is not None and reason not in TaskSkip.Reason.values:
            raise DomainError(f"Unknown skip reason {reason!r}.", code=ErrorCode.SKIP_REASON_INVALID,
                              errors=[{"field": "reason", "code": ErrorCode.SKIP_REASON_INVALID,
                                       "message": "unknown reason"}])
        skips = list(project_skips(project, reason=reason)[:SKIPS_LIMIT])
        return Response(self.OutputSerializer({"counts": project_skip_counts(project), "results": skips}).data)
