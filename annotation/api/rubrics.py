"""Rubric editing API (PM): the draft version, its items, and publishing.

Thin views: parse, call one service or selector, serialise. Missing and not-yours give
the same 404 (project lookups go through `project_get_for_user`).
"""
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.common import NOT_FOUND as _NOT_FOUND
from annotation.models import Project
from annotation.rubric_editing.services import (
    rubric_draft_item_add,
    rubric_draft_item_delete,
    rubric_draft_item_update,
    rubric_draft_start,
    rubric_draft_view,
    rubric_version_publish_by_number,
)
from annotation.selectors import project_get_for_user
from rubrics.models import RubricItem


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
