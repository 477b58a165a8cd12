"""Projects over the API."""
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.serializers import ProjectIn, ProjectOut
from annotation.services import project_create


class ProjectCreateApi(APIView):
    @extend_schema(request=ProjectIn, responses={201: ProjectOut})
    def post(self, request):
        if not (request.user.is_pm or request.user.is_platform_admin):
            raise PermissionDenied("Only project managers create projects.")
        body = ProjectIn(data=request.data)
        body.is_valid(raise_exception=True)
        project = project_create(created_by=request.user, **body.validated_data)
        return Response(ProjectOut(project).data, status=status.HTTP_201_CREATED)
