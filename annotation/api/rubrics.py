"""Rubric editing API (PM): the draft version, its items, and publishing.

Thin views: parse, call one service or selector, serialise. Missing and not-yours give
the same 404 (project lookups go through `project_get_for_user`). A URL that takes two
methods keeps one class, with one serializer per direction of each method.
"""
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.common import NOT_FOUND as _NOT_FOUND
from annotation.api.serializers import ErrorOut
from annotation.models import Project
from annotation.rubric_editing.services import (
    DraftView,
    rubric_draft_guidelines_update,
    rubric_draft_item_add,
    rubric_draft_item_delete,
    rubric_draft_item_update,
    rubric_draft_start,
    rubric_draft_view,
    rubric_version_publish_by_number,
)
from annotation.selectors import project_get_for_user
from rubrics.models import RubricItem

_REFUSED = OpenApiResponse(ErrorOut, description="The item needs attention (one entry per field); nothing was saved.")
_GUIDELINES_REFUSED = OpenApiResponse(ErrorOut, description="The guidelines are too long; nothing was saved.")
_PUBLISHED = OpenApiResponse(ErrorOut, description="The item belongs to a published version, which never changes.")


class DraftItemOut(serializers.Serializer):
    """A rubric item of the draft; the draft listing, adding and changing an item all answer it."""

    id = serializers.IntegerField()
    item_key = serializers.CharField()
    question_id = serializers.CharField(source="question_ref")
    position = serializers.IntegerField()
    dimension = serializers.CharField(source="dimension.code")
    score = serializers.IntegerField(allow_null=True)
    content = serializers.CharField()


class _DraftItemFields(serializers.Serializer):
    """What a PM writes on a draft item; adding one also names its question."""

    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    score = serializers.IntegerField(allow_null=True, required=False, default=None)
    dimension = serializers.CharField(help_text="dimension code, e.g. warmth, morality, other (gate)")


class DraftItemChangeOut(serializers.Serializer):
    item_key = serializers.CharField()
    fields = serializers.ListField(child=serializers.CharField(), help_text="the compared fields that differ")


class DraftDiffOut(serializers.Serializer):
    added = serializers.ListField(child=serializers.CharField(), help_text="item keys")
    removed = serializers.ListField(child=serializers.CharField(), help_text="item keys")
    changed = DraftItemChangeOut(many=True)
    changes_standard = serializers.BooleanField(help_text="publishing sends the project's experts back to calibration")
    guidelines_changed = serializers.BooleanField(help_text="the draft's guidelines differ from the published ones")
    guidelines_diff = serializers.ListField(
        child=serializers.CharField(trim_whitespace=False),
        help_text='the guidelines line diff, each line starting with "+ ", "- ", "  " (context) or "…" (lines skipped)')


def _draft_body(view: DraftView) -> dict:
    """The draft view as plain values: the diff names items by key, the listing holds the draft's rows."""
    diff = None
    if view.diff is not None:
        diff = {
            "added": [i.item_key for i in view.diff.added],
            "removed": [i.item_key for i in view.diff.removed],
            "changed": [{"item_key": c.after.item_key, "fields": list(c.fields)} for c in view.diff.changed],
            "changes_standard": view.diff.changes_standard,
            "guidelines_changed": view.diff.guidelines_changed,
            "guidelines_diff": [mark if mark == "…" else f"{mark} {line}" for mark, line in view.diff.guidelines],
        }
    items = []
    if view.draft is not None:
        items = RubricItem.objects.filter(version=view.draft).select_related("dimension")
    return {"draft": view.draft.number if view.draft else None,
            "published": view.published.number if view.published else None,
            "guidelines": view.draft.guidelines if view.draft else None,
            "items": items, "diff": diff}


class RubricDraftApi(APIView):
    """GET: the draft version's items, guidelines and diff against the published version (draft null
    when none exists). POST: start the draft as a copy of the published version (idempotent).
    PATCH: replace the draft's guidelines (Markdown), starting the draft when there is none."""

    @extend_schema_serializer(component_name="RubricDraft")
    class OutputSerializer(serializers.Serializer):
        draft = serializers.IntegerField(allow_null=True, help_text="the draft's version number, null without one")
        published = serializers.IntegerField(allow_null=True, help_text="the newest published version number")
        guidelines = serializers.CharField(allow_null=True, help_text="the draft's guidelines (Markdown), "
                                                                      "null without a draft")
        items = DraftItemOut(many=True, help_text="the draft's items, empty without a draft")
        diff = DraftDiffOut(allow_null=True, help_text="the draft against the published version, null without a draft")

    def _answer(self, project: Project, code: int = status.HTTP_200_OK) -> Response:
        return Response(self.OutputSerializer(_draft_body(rubric_draft_view(project))).data, status=code)

    @extend_schema(operation_id="rubric_draft", responses={200: OutputSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        return self._answer(project)

    @extend_schema(operation_id="rubric_draft_start", request=None,
                   responses={201: OutputSerializer, 404: _NOT_FOUND})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        rubric_draft_start(project=project)
        return self._answer(project, status.HTTP_201_CREATED)

    @extend_schema_serializer(component_name="RubricGuidelinesIn")
    class PatchInputSerializer(serializers.Serializer):
        guidelines = serializers.CharField(allow_blank=True, trim_whitespace=False,
                                           help_text="Markdown; raw HTML and images are not rendered")

    @extend_schema(operation_id="rubric_draft_guidelines_update", request=PatchInputSerializer,
                   responses={200: OutputSerializer, 400: _GUIDELINES_REFUSED, 404: _NOT_FOUND})
    def patch(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        body = self.PatchInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        rubric_draft_guidelines_update(project=project, guidelines=body.validated_data["guidelines"])
        return self._answer(project)


class RubricDraftItemsApi(APIView):
    """Add an item to a question in the draft (its position is the question's next free one)."""

    @extend_schema_serializer(component_name="DraftItemAddIn")
    class InputSerializer(_DraftItemFields):
        question_id = serializers.CharField()

    OutputSerializer = DraftItemOut

    @extend_schema(operation_id="rubric_draft_item_add", request=InputSerializer,
                   responses={201: OutputSerializer, 400: _REFUSED, 404: _NOT_FOUND})
    def post(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        item = rubric_draft_item_add(project=project, question_ref=data["question_id"], content=data["content"],
                                     score=data["score"], dimension=data["dimension"])
        return Response(self.OutputSerializer(item).data, status=status.HTTP_201_CREATED)


class RubricItemApi(APIView):
    """Change or remove an item of the draft. An item of a published version answers 409 and never changes."""

    @extend_schema_serializer(component_name="DraftItemIn")
    class InputSerializer(_DraftItemFields):
        pass

    OutputSerializer = DraftItemOut

    @extend_schema(operation_id="rubric_item_update", request=InputSerializer,
                   responses={200: OutputSerializer, 400: _REFUSED, 404: _NOT_FOUND, 409: _PUBLISHED})
    def patch(self, request: Request, project_id: int, item_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        item = rubric_draft_item_update(project=project, item_id=item_id, content=data["content"],
                                        score=data["score"], dimension=data["dimension"])
        return Response(self.OutputSerializer(item).data)

    @extend_schema(operation_id="rubric_item_delete", responses={204: None, 404: _NOT_FOUND, 409: _PUBLISHED})
    def delete(self, request: Request, project_id: int, item_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        rubric_draft_item_delete(project=project, item_id=item_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RubricVersionPublishApi(APIView):
    """Publish draft version `n` with a reason. When the standard changed, every calibration of the
    project goes stale and its experts are notified."""

    @extend_schema_serializer(component_name="PublishIn")
    class InputSerializer(serializers.Serializer):
        reason = serializers.CharField(allow_blank=True, help_text="the changelog entry")

    @extend_schema_serializer(component_name="VersionOut")
    class OutputSerializer(serializers.Serializer):
        number = serializers.IntegerField()
        status = serializers.CharField()
        changelog = serializers.CharField()
        published_at = serializers.DateTimeField()

    @extend_schema(
        operation_id="rubric_version_publish", request=InputSerializer,
        responses={200: OutputSerializer, 404: _NOT_FOUND,
                   400: OpenApiResponse(ErrorOut, description="No reason, already published, nothing changed, "
                                                              "or no items; nothing was published.")},
    )
    def post(self, request: Request, project_id: int, number: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        version = rubric_version_publish_by_number(project=project, number=number,
                                                   reason=body.validated_data["reason"], now=timezone.now())
        return Response(self.OutputSerializer(version).data)
