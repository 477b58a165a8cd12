"""Calibration over the token API (experts): standing, attempts, answering golden tasks.
"""
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.common import NOT_FOUND as _NOT_FOUND
from annotation.api.common import require_expert as _require_expert
from annotation.api.serializers import RubricItemOut, TurnOut
from annotation.calibration.selectors import attempt_get_for_expert
from annotation.calibration.services import (
    CalibrationState,
    calibration_answer,
    calibration_answered_positions,
    calibration_feedback,
    calibration_start,
    calibration_state,
    calibration_task_get,
)
from annotation.models import CalibrationAttempt
from annotation.selectors import project_get_for_user, rubric_items_for_task


def _state_out(state: CalibrationState) -> dict:
    return {
        "status": state.status, "required": state.required, "ready": state.ready,
        "version": state.version.number if state.version else None,
        "golden_available": state.available, "size": state.size,
        "retry_at": state.retry_at, "attempt": state.open.pk if state.open else None,
    }


def _attempt_out(attempt: CalibrationAttempt) -> dict:
    answered = calibration_answered_positions(attempt)
    body = {
        "id": attempt.pk, "project": attempt.project_id, "status": attempt.status,
        "version": attempt.rubric_version.number, "threshold_pct": attempt.threshold_pct,
        "score_pct": float(attempt.score_pct) if attempt.score_pct is not None else None,
        "items_total": attempt.items_total, "items_correct": attempt.items_correct,
        "started_at": attempt.started_at, "finished_at": attempt.finished_at,
        "tasks": [{"position": p, "answered": p in answered}
                  for p in attempt.tasks.order_by("position").values_list("position", flat=True)],
    }
    if attempt.finished_at is not None:
        body["wrong"] = [
            {"position": t.position, "question_id": t.question_id,
             "items": [{"position": w.position, "content": w.content, "answer": w.answer,
                        "reference": w.reference, "rationale": w.rationale} for w in t.wrong]}
            for t in calibration_feedback(attempt)
        ]
    return body


class CalibrationApi(APIView):
    """GET: the expert's calibration standing in the project. POST: start (or resume) an attempt."""

    @extend_schema(responses={200: OpenApiResponse(description="calibration state"), 404: _NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        _require_expert(request)
        project = project_get_for_user(request.user, project_id)
        return Response(_state_out(calibration_state(project=project, expert=request.user, now=timezone.now())))

    @extend_schema(request=None, responses={201: OpenApiResponse(description="the attempt"), 409: _NOT_FOUND})
    def post(self, request: Request, project_id: int) -> Response:
        _require_expert(request)
        project = project_get_for_user(request.user, project_id)
        attempt = calibration_start(project=project, expert=request.user, now=timezone.now())
        return Response(_attempt_out(attempt), status=status.HTTP_201_CREATED)


class CalibrationAttemptApi(APIView):
    """The attempt: status, which tasks are answered and, once scored, every wrong item with the reference."""

    @extend_schema(responses={200: OpenApiResponse(description="the attempt"), 404: _NOT_FOUND})
    def get(self, request: Request, attempt_id: int) -> Response:
        return Response(_attempt_out(attempt_get_for_expert(request.user, attempt_id)))


class CalibrationAnswerIn(serializers.Serializer):
    labels = serializers.JSONField(help_text='{"<rubric_item_id>": 0 or 1, ...} for every item of the task')


class CalibrationTaskApi(APIView):
    """GET: one calibration task (dialogue, response, rubric items, the expert's answers so far).
    PUT: answer every item; answering the last task scores the attempt."""

    @extend_schema(responses={200: OpenApiResponse(description="the task"), 404: _NOT_FOUND})
    def get(self, request: Request, attempt_id: int, position: int) -> Response:
        attempt = attempt_get_for_expert(request.user, attempt_id)
        ct = calibration_task_get(attempt=attempt, position=position)
        question = ct.task.response.question
        answers = dict(attempt.answers.filter(task=ct.task).values_list("rubric_item__item_key", "value"))
        return Response({
            "attempt": attempt.pk, "position": ct.position, "dialogue": TurnOut(question.dialogue, many=True).data,
            "final_user_turn": question.final_user_turn, "response": ct.task.response.text,
            "rubric_items": RubricItemOut(rubric_items_for_task(ct.task), many=True).data, "answers": answers,
        })

    @extend_schema(request=CalibrationAnswerIn, responses={200: OpenApiResponse(description="progress"),
                                                           404: _NOT_FOUND})
    def put(self, request: Request, attempt_id: int, position: int) -> Response:
        body = CalibrationAnswerIn(data=request.data)
        body.is_valid(raise_exception=True)
        result = calibration_answer(expert=request.user, attempt_id=attempt_id, position=position,
                                    labels=body.validated_data["labels"], now=timezone.now())
        attempt = result.attempt
        return Response({"next_position": result.next_position, "status": attempt.status,
                         "score_pct": float(attempt.score_pct) if attempt.score_pct is not None else None})
