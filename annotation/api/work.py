"""The expert's loop over the API: lease the next task, autosave a draft, submit."""
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.common import require_expert as _require_expert
from annotation.api.serializers import AssignmentOut, SubmitIn, SubmitOut
from annotation.assignment.services import assignment_claim_next
from annotation.idempotency import idempotent_call
from annotation.selectors import assignment_get_for_expert, project_access_for_user
from annotation.submission.services import draft_save, labels_submit


class NextTaskApi(APIView):
    @extend_schema(request=None, responses={200: AssignmentOut, 204: OpenApiResponse(description="No task left")})
    def post(self, request, project_id: int):
        _require_expert(request)
        access = project_access_for_user(request.user, project_id)
        now = timezone.now()
        assignment = assignment_claim_next(project=access.project, expert=request.user, now=now, access=access)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(AssignmentOut(assignment, context={"now": now}).data)


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
        responses={200: SubmitOut, 201: SubmitOut},
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
