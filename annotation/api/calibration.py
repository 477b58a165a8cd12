"""Calibration over the token API (experts): standing, attempts, answering golden tasks.

The facts the calibration pages show come from the same calls here: whether the
expert may start (`CalibrationState.can_start`), which task is next
(`CalibrationProgress.next_position`) and whether an attempt passed
(`calibration_attempt_passed`), so a client and the browser never disagree.
"""
from datetime import UTC

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.common import NOT_FOUND as _NOT_FOUND
from annotation.api.common import require_expert as _require_expert
from annotation.api.serializers import RubricItemOut, TurnOut
from annotation.calibration.selectors import (
    attempt_get_for_expert,
    calibration_answers_for_task,
    calibration_draft_for_task,
)
from annotation.calibration.services import (
    calibration_answer,
    calibration_attempt_passed,
    calibration_draft_save,
    calibration_feedback,
    calibration_progress,
    calibration_start,
    calibration_state,
    calibration_task_get,
)
from annotation.models import CalibrationAttempt
from annotation.selectors import project_get_for_user, rubric_items_for_task

_CONFLICT = OpenApiResponse(description="Already calibrated, retry later, or calibration not ready (see `code`).")


def _utc_datetime(**kwargs) -> serializers.DateTimeField:
    # In UTC ("...Z"), as these endpoints have always written their times.
    return serializers.DateTimeField(default_timezone=UTC, **kwargs)


@extend_schema_serializer(component_name="CalibrationAttemptTask")
class _TaskEntry(serializers.Serializer):
    position = serializers.IntegerField()
    answered = serializers.BooleanField()


@extend_schema_serializer(component_name="CalibrationWrongItem")
class _WrongItem(serializers.Serializer):
    position = serializers.IntegerField()
    content = serializers.CharField()
    answer = serializers.IntegerField()
    reference = serializers.IntegerField()
    rationale = serializers.CharField()


@extend_schema_serializer(component_name="CalibrationWrongTask")
class _WrongTask(serializers.Serializer):
    position = serializers.IntegerField()
    question_id = serializers.CharField()
    items = _WrongItem(source="wrong", many=True)


@extend_schema_serializer(component_name="CalibrationAttemptOutput")
class AttemptOutputSerializer(serializers.Serializer):
    """One attempt as both attempt operations return it; `wrong` appears once the attempt is scored."""

    id = serializers.IntegerField(source="attempt.pk")
    project = serializers.IntegerField(source="attempt.project_id")
    status = serializers.CharField(source="attempt.status")
    version = serializers.IntegerField(source="attempt.rubric_version.number")
    threshold_pct = serializers.IntegerField(source="attempt.threshold_pct")
    score_pct = serializers.FloatField(source="attempt.score_pct", allow_null=True)
    items_total = serializers.IntegerField(source="attempt.items_total")
    items_correct = serializers.IntegerField(source="attempt.items_correct")
    started_at = _utc_datetime(source="attempt.started_at")
    finished_at = _utc_datetime(source="attempt.finished_at", allow_null=True)
    passed = serializers.BooleanField(source="progress.passed",
                                      help_text="reached the threshold (also for a pass a rubric change made stale)")
    next_position = serializers.IntegerField(source="progress.next_position", allow_null=True,
                                             help_text="the first task without answers; null unless in progress")
    tasks = _TaskEntry(many=True)
    wrong = _WrongTask(many=True, required=False,
                       help_text="every item answered against the reference, task by task; only once scored")


def _attempt_body(attempt: CalibrationAttempt) -> dict:
    progress = calibration_progress(attempt)
    body = {"attempt": attempt, "progress": progress,
            "tasks": [{"position": p, "answered": p in progress.answered} for p in progress.positions]}
    if attempt.finished_at is not None:
        body["wrong"] = calibration_feedback(attempt)
    return body


class CalibrationApi(APIView):
    """GET: the expert's calibration standing in the project. POST: start (or resume) an attempt."""

    @extend_schema_serializer(component_name="CalibrationStateOutput")
    class OutputSerializer(serializers.Serializer):
        status = serializers.CharField(
            help_text="not_required, calibrated, in_progress, failed, stale, not_ready or needed")
        required = serializers.BooleanField()
        ready = serializers.BooleanField(help_text="the current version has enough usable golden tasks")
        can_start = serializers.BooleanField(help_text="POST would start a new attempt now")
        version = serializers.IntegerField(source="version.number", allow_null=True)
        golden_available = serializers.IntegerField(source="available")
        size = serializers.IntegerField()
        retry_at = _utc_datetime(allow_null=True)
        attempt = serializers.IntegerField(source="open.pk", allow_null=True, help_text="the attempt in progress")

    @extend_schema(responses={200: OutputSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        _require_expert(request)
        project = project_get_for_user(request.user, project_id)
        state = calibration_state(project=project, expert=request.user, now=timezone.now())
        return Response(self.OutputSerializer(state).data)

    @extend_schema(request=None, responses={201: AttemptOutputSerializer, 404: _NOT_FOUND, 409: _CONFLICT})
    def post(self, request: Request, project_id: int) -> Response:
        _require_expert(request)
        project = project_get_for_user(request.user, project_id)
        attempt = calibration_start(project=project, expert=request.user, now=timezone.now())
        return Response(AttemptOutputSerializer(_attempt_body(attempt)).data, status=status.HTTP_201_CREATED)


class CalibrationAttemptApi(APIView):
    """The attempt: status, which tasks are answered and, once scored, every wrong item with the reference."""

    @extend_schema(responses={200: AttemptOutputSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, attempt_id: int) -> Response:
        attempt = attempt_get_for_expert(request.user, attempt_id)
        return Response(AttemptOutputSerializer(_attempt_body(attempt)).data)


@extend_schema_serializer(component_name="CalibrationDraftOut")
class CalibrationDraftOut(serializers.Serializer):
    labels = serializers.JSONField(help_text='{"<rubric_item_id>": 0 or 1} for the items marked so far')
    notes = serializers.JSONField(help_text='{"<rubric_item_id>": "text"}')


def _draft_body(draft) -> dict:
    return {"labels": draft.labels, "notes": draft.notes} if draft else {"labels": {}, "notes": {}}


class CalibrationDraftApi(APIView):
    """PUT: autosave the marks and notes of one calibration task so far (any subset of its items)."""

    @extend_schema_serializer(component_name="CalibrationDraftIn")
    class InputSerializer(serializers.Serializer):
        labels = serializers.JSONField(help_text='{"<rubric_item_id>": 0 or 1} for the items marked so far')
        notes = serializers.JSONField(required=False, help_text='{"<rubric_item_id>": "text"}')

    @extend_schema(request=InputSerializer, responses={200: CalibrationDraftOut, 404: _NOT_FOUND})
    def put(self, request: Request, attempt_id: int, position: int) -> Response:
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        draft = calibration_draft_save(expert=request.user, attempt_id=attempt_id, position=position,
                                       labels=body.validated_data["labels"], notes=body.validated_data.get("notes"))
        return Response(CalibrationDraftOut(_draft_body(draft)).data)


class CalibrationTaskApi(APIView):
    """GET: one calibration task (dialogue, response, rubric items, the expert's answers so far).
    PUT: answer every item; answering the last task scores the attempt."""

    @extend_schema_serializer(component_name="CalibrationTaskOutput")
    class OutputSerializer(serializers.Serializer):
        attempt = serializers.IntegerField()
        position = serializers.IntegerField()
        dialogue = TurnOut(many=True)
        final_user_turn = serializers.CharField()
        response = serializers.CharField()
        rubric_items = RubricItemOut(many=True)
        answers = serializers.DictField(child=serializers.IntegerField(),
                                        help_text='{"<rubric_item_id>": 0 or 1} for the items answered so far')
        draft = CalibrationDraftOut(help_text="the autosaved marks and notes (not scored)")

    @extend_schema_serializer(component_name="CalibrationAnswerIn")
    class InputSerializer(serializers.Serializer):
        labels = serializers.JSONField(help_text='{"<rubric_item_id>": 0 or 1, ...} for every item of the task')
        notes = serializers.JSONField(required=False, help_text='{"<rubric_item_id>": "text"}, kept, not scored')

    @extend_schema_serializer(component_name="CalibrationAnswerOutput")
    class AnswerOutputSerializer(serializers.Serializer):
        next_position = serializers.IntegerField(allow_null=True,
                                                 help_text="the next task without answers; null once scored")
        status = serializers.CharField(source="attempt.status")
        score_pct = serializers.FloatField(source="attempt.score_pct", allow_null=True)
        passed = serializers.BooleanField()

    @extend_schema(responses={200: OutputSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, attempt_id: int, position: int) -> Response:
        attempt = attempt_get_for_expert(request.user, attempt_id)
        ct = calibration_task_get(attempt=attempt, position=position)
        question = ct.task.response.question
        body = {
            "attempt": attempt.pk, "position": ct.position, "dialogue": question.dialogue,
            "final_user_turn": question.final_user_turn, "response": ct.task.response.text,
            "rubric_items": rubric_items_for_task(ct.task),
            "answers": calibration_answers_for_task(attempt=attempt, task=ct.task),
            "draft": _draft_body(calibration_draft_for_task(attempt=attempt, task=ct.task)),
        }
        return Response(self.OutputSerializer(body).data)

    @extend_schema(request=InputSerializer, responses={200: AnswerOutputSerializer, 404: _NOT_FOUND})
    def put(self, request: Request, attempt_id: int, position: int) -> Response:
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = calibration_answer(expert=request.user, attempt_id=attempt_id, position=position,
                                    labels=body.validated_data["labels"], notes=body.validated_data.get("notes"),
                                    now=timezone.now())
        out = {"next_position": result.next_position, "attempt": result.attempt,
               "passed": calibration_attempt_passed(result.attempt)}
        return Response(self.AnswerOutputSerializer(out).data)
