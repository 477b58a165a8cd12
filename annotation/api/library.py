"""Case library and FAQ API (read-only): list with search, and detail, for project members.

The same selectors as the pages: experts read published cases and answered questions
(plus their own), PMs and admins drafts and open questions too; anyone else gets 404.
A case read through the API counts a reader, as on the page.
"""
from typing import cast

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.common import NOT_FOUND
from annotation.library.selectors import case_get, case_list, faq_get, faq_list, library_access
from annotation.library.services import case_read_record
from experts.models import User

LIST_MAX = 50
_SEARCH = [
    OpenApiParameter("q", OpenApiTypes.STR, description="search text; Chinese phrases match inside words "
                                                         "(e.g. 边界感, 建议给得太早), best match first"),
    OpenApiParameter("dimension", OpenApiTypes.STR, description="a dimension code, e.g. warmth"),
    OpenApiParameter("scene", OpenApiTypes.STR, description="a scene, e.g. 职场压力"),
]


class _Dimensions(serializers.ListField):
    child = serializers.CharField()

    def to_representation(self, data):
        return [d.code for d in data.all()]


class CaseSummaryOut(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    reading = serializers.CharField(help_text="the agreed reading")
    outcome = serializers.CharField(help_text="hit, miss, ambiguous, or empty")
    status = serializers.CharField(help_text="draft (PMs only) or published")
    scenes = serializers.ListField(child=serializers.CharField())
    dimensions = _Dimensions(help_text="dimension codes")
    item_keys = serializers.SerializerMethodField()
    read_count = serializers.IntegerField(help_text="distinct readers")
    published_at = serializers.DateTimeField(allow_null=True)

    def get_item_keys(self, case) -> list[str]:
        return [link.item_key for link in case.items.all()]


@extend_schema_serializer(component_name="CaseDetail")
class CaseDetailOut(CaseSummaryOut):
    problem = serializers.CharField()
    disagreement = serializers.CharField()
    discussion = serializers.CharField()
    question_id = serializers.CharField(source="question.external_id", allow_null=True, default=None)


class FaqOut(serializers.Serializer):
    id = serializers.IntegerField()
    question = serializers.CharField()
    answer = serializers.CharField(help_text="empty while unanswered")
    asked_at = serializers.DateTimeField()
    answered_at = serializers.DateTimeField(allow_null=True)
    item_key = serializers.CharField(help_text="the rubric item it was asked about, or empty")
    scenes = serializers.ListField(child=serializers.CharField())
    dimensions = _Dimensions(help_text="dimension codes")


class CasesApi(APIView):
    """The project's cases matching the search (at most 50), best match first."""

    @extend_schema_serializer(component_name="CaseSummary")
    class OutputSerializer(CaseSummaryOut):
        pass

    @extend_schema(operation_id="case_list", parameters=_SEARCH, responses={200: OutputSerializer(many=True),
                                                                             404: NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        access = library_access(cast(User, request.user), project_id)
        cases = case_list(access, query=request.query_params.get("q", ""),
                          dimension=request.query_params.get("dimension", ""),
                          scene=request.query_params.get("scene", ""))[:LIST_MAX]
        return Response(self.OutputSerializer(cases, many=True).data)


class CaseApi(APIView):
    """One case; reading it counts the caller as a reader."""

    OutputSerializer = CaseDetailOut

    @extend_schema(operation_id="case_detail", responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, project_id: int, case_id: int) -> Response:
        access = library_access(cast(User, request.user), project_id)
        case = case_get(access, case_id)
        # Experts' reads only: "most read" is what experts found worth reading, not PM previews.
        if access.annotates and case_read_record(case=case, user=access.user, now=timezone.now()):
            case.read_count += 1
        return Response(self.OutputSerializer(case).data)


class FaqListApi(APIView):
    """The project's answered questions matching the search (at most 50), best match first;
    `?open=1`: the questions waiting for an answer (all of them for those who answer, else the caller's)."""

    @extend_schema_serializer(component_name="FaqEntry")
    class OutputSerializer(FaqOut):
        pass

    @extend_schema(operation_id="faq_list",
                   parameters=[*_SEARCH, OpenApiParameter("open", OpenApiTypes.BOOL, description="open questions")],
                   responses={200: OutputSerializer(many=True), 404: NOT_FOUND})
    def get(self, request: Request, project_id: int) -> Response:
        access = library_access(cast(User, request.user), project_id)
        entries = faq_list(access, query=request.query_params.get("q", ""),
                           dimension=request.query_params.get("dimension", ""),
                           scene=request.query_params.get("scene", ""),
                           unanswered=request.query_params.get("open") in ("1", "true"))[:LIST_MAX]
        return Response(self.OutputSerializer(entries, many=True).data)


class FaqEntryApi(APIView):
    """One question with its answer."""

    OutputSerializer = FaqListApi.OutputSerializer

    @extend_schema(operation_id="faq_detail", responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, project_id: int, entry_id: int) -> Response:
        access = library_access(cast(User, request.user), project_id)
        return Response(self.OutputSerializer(faq_get(access, entry_id)).data)
