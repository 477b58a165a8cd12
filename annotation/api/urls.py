"""REST API v1 routes."""
from django.urls import path

from annotation.api.projects import ProjectCreateApi
from annotation.api.work import AssignmentDetailApi, DraftApi, NextTaskApi, SubmitApi

urlpatterns = [
    path("projects/", ProjectCreateApi.as_view(), name="api-project-create"),
    path("projects/<int:project_id>/next-task/", NextTaskApi.as_view(), name="api-next-task"),
    path("assignments/<int:assignment_id>/", AssignmentDetailApi.as_view(), name="api-assignment"),
    path("assignments/<int:assignment_id>/draft/", DraftApi.as_view(), name="api-draft"),
    path("assignments/<int:assignment_id>/submit/", SubmitApi.as_view(), name="api-submit"),
]
