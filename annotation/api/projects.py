"""Projects over the API."""
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models.project import LEASE_TIMEOUT_S, OVERLAP
from annotation.services import project_create


class ProjectCreateApi(APIView):
    """Create a project with its empty rubric; the PM who creates it manages it."""

    # The ranges and defaults are the model's (`annotation.models.project`), which the
    # service and the database check too; the serializer only names a bad field early.
    @extend_schema_serializer(component_name="ProjectIn")
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        description = serializers.CharField(required=False, allow_blank=True, default="")
        overlap = serializers.IntegerField(required=False, default=OVERLAP.default, min_value=OVERLAP.low,
                                           max_value=OVERLAP.high)
        lease_timeout_s = serializers.IntegerField(required=False, default=LEASE_TIMEOUT_S.default,
                                                   min_value=LEASE_TIMEOUT_S.low, max_value=LEASE_TIMEOUT_S.high)

    @extend_schema_serializer(component_name="ProjectOut")
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        name = serializers.CharField()
        description = serializers.CharField()
        overlap = serializers.IntegerField()
        lease_timeout_s = serializers.IntegerField()

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer})
    def post(self, request: Request) -> Response:
        if not (request.user.is_pm or request.user.is_platform_admin):
            raise PermissionDenied("Only project managers create projects.")
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        project = project_create(created_by=request.user, **body.validated_data)
        return Response(self.OutputSerializer(project).data, status=status.HTTP_201_CREATED)
