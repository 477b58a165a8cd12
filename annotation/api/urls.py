"""REST API v1 routes."""
from django.urls import include, path

from annotation.api.agreement import AgreementRecomputeApi, AgreementReportApi
from annotation.api.exchange import ConsensusExportApi, QuestionsImportApi, ResponsesImportApi
from annotation.api.judging import JudgeLabelsImportApi, JudgeRunProgressApi
from annotation.api.projects import ProjectCreateApi
from annotation.api.work import AssignmentDetailApi, DraftApi, NextTaskApi, SubmitApi

urlpatterns = [
    path("projects/", ProjectCreateApi.as_view(), name="api-project-create"),
    path("projects/<int:project_id>/next-task/", NextTaskApi.as_view(), name="api-next-task"),
    path("assignments/<int:assignment_id>/", AssignmentDetailApi.as_view(), name="api-assignment"),
    path("assignments/<int:assignment_id>/draft/", DraftApi.as_view(), name="api-draft"),
    path("assignments/<int:assignment_id>/submit/", SubmitApi.as_view(), name="api-submit"),
    path("projects/<int:project_id>/questions/import/", QuestionsImportApi.as_view(), name="api-questions-import"),
    path("projects/<int:project_id>/responses/import/", ResponsesImportApi.as_view(), name="api-responses-import"),
    path("projects/<int:project_id>/export/", ConsensusExportApi.as_view(), name="api-consensus-export"),
    path("projects/<int:project_id>/judge-labels/import/", JudgeLabelsImportApi.as_view(),
         name="api-judge-labels-import"),
    path("judge-runs/<int:run_id>/", JudgeRunProgressApi.as_view(), name="api-judge-run"),
    path("", include("annotation.api.quality_urls")),
    path("projects/<int:project_id>/agreement/", AgreementReportApi.as_view(), name="api-agreement"),
    path("projects/<int:project_id>/agreement/recompute/", AgreementRecomputeApi.as_view(),
         name="api-agreement-recompute"),
]
