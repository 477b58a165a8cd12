"""Expert-quality API: golden import, quality settings, rubric drafts and publishing (PM);
calibration over the token API (expert); portraits and notifications.

Thin views: parse, call one service or selector, serialise. Missing and not-yours give
the same 404 (project lookups go through `project_get_for_user`).
"""
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.serializers import RubricItemOut, TurnOut
from annotation.calibration.golden import golden_import
from annotation.calibration.portrait import own_view_cutoff, portrait_for
from annotation.calibration.project_settings import project_quality_update
from annotation.calibration.selectors import attempt_get_for_expert, project_expert_get
from annotation.calibration.services import (
    CalibrationState,
    calibration_answer,
    calibration_answered_positions,
    calibration_feedback,
    calibration_start,
    calibration_state,
    calibration_task_get,
)
from annotation.exchange.jsonl import upload_read
from annotation.models import CalibrationAttempt, Project
from annotation.rubric_editing.services import (
    rubric_draft_item_add,
    rubric_draft_item_delete,
    rubric_draft_item_update,
    rubric_draft_start,
    rubric_draft_view,
    rubric_version_publish_by_number,
)
from annotation.selectors import project_get_for_user, rubric_items_for_task
from experts.notifications import notification_list_for_user, notification_text
from rubrics.models import RubricItem

_NOT_FOUND = OpenApiResponse(description="No such object, or not yours.")


def _require_expert(request: Request) -> None:
    if not request.user.is_expert:
        raise PermissionDenied("Only experts calibrate.")


# --- Golden set and settings (PM) -----------------------------------------------------

class GoldenImportApi(APIView):
    """Import golden reference labels (JSONL: question_id, model, labels [0/1 per rubric position],
    optional rationale [text per position]) for tasks of the current rubric version, all or nothing."""

    parser_classes = [MultiPartParser]

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField()

    class OutputSerializer(serializers.Serializer):
        tasks = serializers.IntegerField(help_text="golden tasks written")
        references = serializers.IntegerField(help_text="reference labels written")
        version = serializers.IntegerField(help_text="the rubric version they belong to")

    @extend_schema(operation_id="golden_import", request={"multipart/form-data": InputSerializer},
                   responses={201: OutputSerializer, 404: _NOT_FOUND})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        upload = body.validated_data["file"]
        result = golden_import(project=project, data=upload_read(upload), now=timezone.now(), source=upload.name)
        out = {"tasks": result.tasks, "references": result.references, "version": result.version}
        return Response(self.OutputSerializer(out).data, status=status.HTTP_201_CREATED)


class QualitySettingsOut(serializers.Serializer):
    calibration_threshold_pct = serializers.IntegerField()
    calibration_size = serializers.IntegerField()
    calibration_retry_delay_s = serializers.IntegerField()
    control_rate_pct = serializers.IntegerField()
    control_pause_below_pct = serializers.IntegerField()
    control_window = serializers.IntegerField()
    hard_min_tier = serializers.CharField()


class QualitySettingsApi(APIView):
    """Read or change the project's quality settings; a bad value changes nothing (400 with per-field errors)."""

    @extend_schema(responses={200: QualitySettingsOut, 404: _NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        return Response(QualitySettingsOut(project).data)

    @extend_schema(request=QualitySettingsOut(partial=True), responses={200: QualitySettingsOut, 404: _NOT_FOUND})
    def patch(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        values = request.data if isinstance(request.data, dict) else {}
        project = project_quality_update(project=project, values={k: values[k] for k in values})
        return Response(QualitySettingsOut(project).data)


# --- Rubric drafts and publishing (PM) ------------------------------------------------

class DraftItemOut(serializers.Serializer):
    id = serializers.IntegerField()
    item_key = serializers.CharField()
    question_id = serializers.CharField(source="question_ref")
    position = serializers.IntegerField()
    dimension = serializers.CharField(source="dimension.code")
    score = serializers.IntegerField(allow_null=True)
    content = serializers.CharField()


class DraftItemIn(serializers.Serializer):
    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    score = serializers.IntegerField(allow_null=True, required=False, default=None)
    dimension = serializers.CharField(help_text="dimension code, e.g. warmth, morality, other (gate)")


class DraftItemAddIn(DraftItemIn):
    question_id = serializers.CharField()


def _diff_out(view) -> dict | None:
    if view.diff is None:
        return None
    return {
        "added": [i.item_key for i in view.diff.added],
        "removed": [i.item_key for i in view.diff.removed],
        "changed": [{"item_key": c.after.item_key, "fields": list(c.fields)} for c in view.diff.changed],
        "changes_standard": view.diff.changes_standard,
    }


def _draft_out(project: Project) -> dict:
    view = rubric_draft_view(project)
    items = []
    if view.draft is not None:
        items = DraftItemOut(RubricItem.objects.filter(version=view.draft).select_related("dimension"),
                             many=True).data
    return {"draft": view.draft.number if view.draft else None,
            "published": view.published.number if view.published else None,
            "items": items, "diff": _diff_out(view)}


class RubricDraftApi(APIView):
    """GET: the draft version's items and its diff against the published version (draft null when
    none exists). POST: start the draft as a copy of the published version (idempotent)."""

    @extend_schema(responses={200: OpenApiResponse(description="draft, items, diff"), 404: _NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        return Response(_draft_out(project))

    @extend_schema(request=None, responses={201: OpenApiResponse(description="draft, items, diff")})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        rubric_draft_start(project=project)
        return Response(_draft_out(project), status=status.HTTP_201_CREATED)


class RubricDraftItemsApi(APIView):
    """Add an item to a question in the draft (its position is the question's next free one)."""

    @extend_schema(request=DraftItemAddIn, responses={201: DraftItemOut, 404: _NOT_FOUND})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        body = DraftItemAddIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        item = rubric_draft_item_add(project=project, question_ref=data["question_id"], content=data["content"],
                                     score=data["score"], dimension=data["dimension"])
        return Response(DraftItemOut(item).data, status=status.HTTP_201_CREATED)


class RubricItemApi(APIView):
    """Change or remove an item of the draft. An item of a published version answers 409 and never changes."""

    @extend_schema(request=DraftItemIn, responses={200: DraftItemOut, 404: _NOT_FOUND, 409: _NOT_FOUND})
    def patch(self, request: Request, project_id: int, item_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        body = DraftItemIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        item = rubric_draft_item_update(project=project, item_id=item_id, content=data["content"],
                                        score=data["score"], dimension=data["dimension"])
        return Response(DraftItemOut(item).data)

    @extend_schema(responses={204: None, 404: _NOT_FOUND, 409: _NOT_FOUND})
    def delete(self, request: Request, project_id: int, item_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        rubric_draft_item_delete(project=project, item_id=item_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PublishIn(serializers.Serializer):
    reason = serializers.CharField(allow_blank=True, help_text="the changelog entry")


class VersionOut(serializers.Serializer):
    number = serializers.IntegerField()
    status = serializers.CharField()
    changelog = serializers.CharField()
    published_at = serializers.DateTimeField()


class RubricVersionPublishApi(APIView):
    """Publish draft version `n` with a reason. When the standard changed, every calibration of the
    project goes stale and its experts are notified."""

    @extend_schema(request=PublishIn, responses={200: VersionOut, 400: OpenApiResponse(), 404: _NOT_FOUND})
    def post(self, request: Request, project_id: int, number: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        body = PublishIn(data=request.data)
        body.is_valid(raise_exception=True)
        version = rubric_version_publish_by_number(project=project, number=number,
                                                   reason=body.validated_data["reason"], now=timezone.now())
        return Response(VersionOut(version).data)


# --- Calibration (expert) -------------------------------------------------------------

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


# --- Portraits and notifications ------------------------------------------------------

class PortraitRowOut(serializers.Serializer):
    key = serializers.CharField(help_text="dimension code, category, or 'all'")
    category = serializers.CharField()
    labelled = serializers.IntegerField()
    golden_items = serializers.IntegerField(source="golden_total")
    golden_accuracy_pct = serializers.FloatField(source="golden_pct", allow_null=True)
    peer_items = serializers.IntegerField(source="peer_total")
    peer_agreement_pct = serializers.FloatField(source="peer_pct", allow_null=True,
                                                help_text="agreement with the majority of the other experts")


class PortraitOut(serializers.Serializer):
    dimensions = PortraitRowOut(many=True)
    categories = PortraitRowOut(many=True)
    overall = PortraitRowOut()


class MyPortraitApi(APIView):
    """The expert's own capability portrait across their projects (control tasks show after a day)."""

    @extend_schema(responses={200: PortraitOut})
    def get(self, request: Request) -> Response:
        _require_expert(request)
        portrait = portrait_for(request.user, control_before=own_view_cutoff(timezone.now()))
        return Response(PortraitOut(portrait).data)


class ExpertPortraitApi(APIView):
    """An expert's portrait over the project's work (the project's PM and admins)."""

    @extend_schema(responses={200: PortraitOut, 404: _NOT_FOUND})
    def get(self, request: Request, project_id: int, user_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        expert = project_expert_get(project, user_id)
        return Response(PortraitOut(portrait_for(expert, projects=[project])).data)


class NotificationOut(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    message = serializers.SerializerMethodField()
    link = serializers.CharField()
    created_at = serializers.DateTimeField()
    read_at = serializers.DateTimeField(allow_null=True)

    def get_message(self, obj) -> str:
        return notification_text(obj)


class NotificationsApi(APIView):
    """The caller's latest notifications, newest first, in their language."""

    @extend_schema(responses={200: NotificationOut(many=True)})
    def get(self, request: Request) -> Response:
        return Response(NotificationOut(notification_list_for_user(request.user)[:100], many=True).data)
