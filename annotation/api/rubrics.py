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
from annotation.rubric_editing.impact import rubric_impact
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
from annotation.rubric_editing.versions import rubric_changelog
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
    changes_standard = serializers.BooleanField(
        help_text="a criterion experts already judge changed (re-calibration follows only when it is on a golden "
                  "question: see the impact's `recalibration`)")
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
        rubric_draft_guidelines_update(project=project, guidelines=body.validated_data["guidelines"],
                                       by=request.user)
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
                                     score=data["score"], dimension=data["dimension"], by=request.user)
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
                                        score=data["score"], dimension=data["dimension"], by=request.user)
        return Response(self.OutputSerializer(item).data)

    @extend_schema(operation_id="rubric_item_delete", responses={204: None, 404: _NOT_FOUND, 409: _PUBLISHED})
    def delete(self, request: Request, project_id: int, item_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        rubric_draft_item_delete(project=project, item_id=item_id, by=request.user)
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
                                                   reason=body.validated_data["reason"], now=timezone.now(),
                                                   by=request.user)
        return Response(self.OutputSerializer(version).data)


class RubricDraftImpactApi(APIView):
    """What publishing the draft would do: changed questions and items, the work they touch, and the cost
    of re-annotating at current prices (null when no price source is installed). All zeros without a draft."""

    @extend_schema_serializer(component_name="RubricQuestionChange")
    class QuestionSerializer(serializers.Serializer):
        question_id = serializers.CharField()
        items = serializers.DictField(
            child=serializers.ListField(child=serializers.CharField()),
            help_text="{kind: item keys}, kind one of added, removed, reworded, rescored, dimension_changed, retagged")

    @extend_schema_serializer(component_name="RubricImpact")
    class OutputSerializer(serializers.Serializer):
        draft = serializers.IntegerField(allow_null=True)
        published = serializers.IntegerField(allow_null=True)
        questions = serializers.ListField(child=serializers.DictField(), help_text="RubricQuestionChange rows")
        tasks = serializers.IntegerField(help_text="regular tasks of changed questions on the published version")
        submitted_labels = serializers.IntegerField()
        golden_tasks = serializers.IntegerField()
        experts = serializers.IntegerField(help_text="experts with a submission or open lease on those tasks")
        open_leases = serializers.IntegerField(help_text="leases that end on publishing")
        carried_tasks = serializers.IntegerField(help_text="tasks that carry over unchanged")
        new_tasks = serializers.IntegerField()
        work = serializers.DictField(child=serializers.IntegerField(), help_text="{difficulty: pieces of work}")
        cost = serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True)
        currency = serializers.CharField(allow_null=True)
        recalibration = serializers.BooleanField(help_text="publishing sends the experts back to calibration")

    @extend_schema(operation_id="rubric_draft_impact", responses={200: OutputSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id, manage=True)
        view = rubric_draft_view(project)
        impact = rubric_impact(project=project, published=view.published, diff=view.diff, at=timezone.now())
        body = {
            "draft": view.draft.number if view.draft else None,
            "published": view.published.number if view.published else None,
            "questions": [{"question_id": q.question_id, "items": q.items} for q in impact.questions],
            "tasks": impact.tasks, "submitted_labels": impact.submitted_labels, "golden_tasks": impact.golden_tasks,
            "experts": impact.experts, "open_leases": impact.open_leases, "carried_tasks": impact.carried_tasks,
            "new_tasks": impact.new_tasks, "work": impact.work,
            "cost": impact.cost.amount if impact.cost else None,
            "currency": impact.cost.currency if impact.cost else None,
            "recalibration": impact.recalibration,
        }
        return Response(self.OutputSerializer(body).data)


class RubricVersionsApi(APIView):
    """The changelog: every published version, newest first, with author, time, reason and diff.
    The project's PM and its experts may read it."""

    @extend_schema_serializer(component_name="RubricVersionEntry")
    class OutputSerializer(serializers.Serializer):
        number = serializers.IntegerField()
        published_at = serializers.DateTimeField()
        published_by = serializers.CharField(allow_null=True, help_text="username, null when not recorded")
        reason = serializers.CharField()
        diff = DraftDiffOut(allow_null=True, help_text="against the version before; null for the first")

    @extend_schema(operation_id="rubric_versions", responses={200: OutputSerializer(many=True), 404: _NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(request.user, project_id)
        rows = []
        for entry in rubric_changelog(project):
            diff = None
            if entry.diff is not None:
                diff = {"added": [i.item_key for i in entry.diff.added],
                        "removed": [i.item_key for i in entry.diff.removed],
                        "changed": [{"item_key": c.after.item_key, "fields": list(c.fields)}
                                    for c in entry.diff.changed],
                        "changes_standard": entry.diff.changes_standard,
                        "guidelines_changed": entry.diff.guidelines_changed,
                        "guidelines_diff": [m if m == "…" else f"{m} {line}" for m, line in entry.diff.guidelines]}
            version = entry.version
            rows.append({"number": version.number, "published_at": version.published_at,
                         "published_by": version.published_by.get_username() if version.published_by else None,
                         "reason": version.changelog, "diff": diff})
        return Response(self.OutputSerializer(rows, many=True).data)
