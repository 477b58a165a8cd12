"""REST API v1 routes."""
from django.urls import path

from annotation.api import calibration, consultations, library, notifications, projects, quality, rubrics
from annotation.api.agreement import AgreementRecomputeApi, AgreementReportApi
from annotation.api.assign import AssignByHandApi, HandOverApi, TaskPriorityApi
from annotation.api.exchange import (
    ConsensusExportApi,
    ExportJobApi,
    ExportJobCreateApi,
    ExportJobDownloadApi,
    GoldenImportApi,
    JudgeLabelsImportApi,
    QuestionsImportApi,
    ResponsesImportApi,
)
from annotation.api.judging import JudgeRunProgressApi, JudgeRunStartApi
from annotation.api.members import InvitationRevokeApi, InvitationsApi, MemberApi, MembersApi
from annotation.api.work import (
    AssignmentDetailApi,
    DraftApi,
    ExtendApi,
    MyHistoryApi,
    NextTaskApi,
    ProjectSkipsApi,
    ReleaseApi,
    SkipApi,
    SubmitApi,
)
from annotation.reveal.api import RevealApi

urlpatterns = [
    # The expert's loop, first: every request is matched against the patterns in order, and these are the
    # requests an expert sends all day (next task, autosave, submit).
    path("projects/<int:project_id>/next-task/", NextTaskApi.as_view(), name="api-next-task"),
    path("assignments/<int:assignment_id>/", AssignmentDetailApi.as_view(), name="api-assignment"),
    path("assignments/<int:assignment_id>/draft/", DraftApi.as_view(), name="api-draft"),
    path("assignments/<int:assignment_id>/submit/", SubmitApi.as_view(), name="api-submit"),
    path("assignments/<int:assignment_id>/extend/", ExtendApi.as_view(), name="api-extend"),
    path("assignments/<int:assignment_id>/release/", ReleaseApi.as_view(), name="api-release"),
    path("assignments/<int:assignment_id>/skip/", SkipApi.as_view(), name="api-skip"),
    path("assignments/<int:assignment_id>/reveal/", RevealApi.as_view(), name="api-reveal"),
    path("me/history/", MyHistoryApi.as_view(), name="api-my-history"),
    path("projects/<int:project_id>/skips/", ProjectSkipsApi.as_view(), name="api-project-skips"),
    path("projects/", projects.ProjectCreateApi.as_view(), name="api-project-create"),
    # Project setup and lifecycle.
    path("projects/<int:project_id>/", projects.ProjectDetailApi.as_view(), name="api-project"),
    path("projects/<int:project_id>/pause/", projects.ProjectPauseApi.as_view(), name="api-project-pause"),
    path("projects/<int:project_id>/resume/", projects.ProjectResumeApi.as_view(), name="api-project-resume"),
    path("projects/<int:project_id>/close/", projects.ProjectCloseApi.as_view(), name="api-project-close"),
    path("projects/<int:project_id>/archive/", projects.ProjectArchiveApi.as_view(), name="api-project-archive"),
    path("projects/<int:project_id>/clone/", projects.ProjectCloneApi.as_view(), name="api-project-clone"),
    path("projects/<int:project_id>/settings-history/", projects.ProjectSettingsHistoryApi.as_view(),
         name="api-project-settings-history"),
    # The roster.
    path("projects/<int:project_id>/members/", MembersApi.as_view(), name="api-members"),
    path("projects/<int:project_id>/members/<str:member>/", MemberApi.as_view(), name="api-member"),
    path("projects/<int:project_id>/invitations/", InvitationsApi.as_view(), name="api-invitations"),
    path("projects/<int:project_id>/invitations/<int:invitation_id>/revoke/", InvitationRevokeApi.as_view(),
         name="api-invitation-revoke"),
    # The PM's assignment modes.
    path("projects/<int:project_id>/assign/", AssignByHandApi.as_view(), name="api-assign-by-hand"),
    path("projects/<int:project_id>/priority/", TaskPriorityApi.as_view(), name="api-task-priority"),
    path("projects/<int:project_id>/hand-over/", HandOverApi.as_view(), name="api-hand-over"),
    # Imports and the export.
    path("projects/<int:project_id>/questions/import/", QuestionsImportApi.as_view(), name="api-questions-import"),
    path("projects/<int:project_id>/responses/import/", ResponsesImportApi.as_view(), name="api-responses-import"),
    path("projects/<int:project_id>/golden/import/", GoldenImportApi.as_view(), name="api-golden-import"),
    path("projects/<int:project_id>/judge-labels/import/", JudgeLabelsImportApi.as_view(),
         name="api-judge-labels-import"),
    path("projects/<int:project_id>/export/", ConsensusExportApi.as_view(), name="api-consensus-export"),
    path("projects/<int:project_id>/export-jobs/", ExportJobCreateApi.as_view(), name="api-export-job-create"),
    path("export-jobs/<int:job_id>/", ExportJobApi.as_view(), name="api-export-job"),
    path("export-jobs/<int:job_id>/download/", ExportJobDownloadApi.as_view(), name="api-export-job-download"),
    # Consultations.
    path("projects/<int:project_id>/consultations/", consultations.ConsultationsApi.as_view(),
         name="api-consultations"),
    path("consultations/<int:consultation_id>/", consultations.ConsultationDetailApi.as_view(),
         name="api-consultation"),
    path("consultations/<int:consultation_id>/vote/", consultations.ConsultationVoteApi.as_view(),
         name="api-consultation-vote"),
    path("consultations/<int:consultation_id>/posts/", consultations.ConsultationPostApi.as_view(),
         name="api-consultation-post"),
    path("consultations/<int:consultation_id>/resolve/", consultations.ConsultationResolveApi.as_view(),
         name="api-consultation-resolve"),
    # Rubric editing.
    path("projects/<int:project_id>/rubric-versions/draft/", rubrics.RubricDraftApi.as_view(),
         name="api-rubric-draft"),
    path("projects/<int:project_id>/rubric-versions/draft/impact/", rubrics.RubricDraftImpactApi.as_view(),
         name="api-rubric-draft-impact"),
    path("projects/<int:project_id>/rubric-versions/", rubrics.RubricVersionsApi.as_view(),
         name="api-rubric-versions"),
    path("projects/<int:project_id>/rubric-versions/draft/items/", rubrics.RubricDraftItemsApi.as_view(),
         name="api-rubric-draft-items"),
    path("projects/<int:project_id>/rubric-items/<int:item_id>/", rubrics.RubricItemApi.as_view(),
         name="api-rubric-item"),
    path("projects/<int:project_id>/rubric-versions/<int:number>/publish/",
         rubrics.RubricVersionPublishApi.as_view(), name="api-rubric-version-publish"),
    # Calibration and expert quality.
    path("projects/<int:project_id>/calibration/", calibration.CalibrationApi.as_view(), name="api-calibration"),
    path("calibration/<int:attempt_id>/", calibration.CalibrationAttemptApi.as_view(),
         name="api-calibration-attempt"),
    path("calibration/<int:attempt_id>/tasks/<int:position>/", calibration.CalibrationTaskApi.as_view(),
         name="api-calibration-task"),
    path("calibration/<int:attempt_id>/tasks/<int:position>/draft/", calibration.CalibrationDraftApi.as_view(),
         name="api-calibration-draft"),
    path("projects/<int:project_id>/quality-settings/", quality.QualitySettingsApi.as_view(),
         name="api-quality-settings"),
    path("me/portrait/", quality.MyPortraitApi.as_view(), name="api-my-portrait"),
    path("projects/<int:project_id>/experts/<int:user_id>/portrait/", quality.ExpertPortraitApi.as_view(),
         name="api-expert-portrait"),
    path("notifications/", notifications.NotificationsApi.as_view(), name="api-notifications"),
    # The case library and the FAQ.
    path("projects/<int:project_id>/cases/", library.CasesApi.as_view(), name="api-cases"),
    path("projects/<int:project_id>/cases/<int:case_id>/", library.CaseApi.as_view(), name="api-case"),
    path("projects/<int:project_id>/faq/", library.FaqListApi.as_view(), name="api-faq"),
    path("projects/<int:project_id>/faq/<int:entry_id>/", library.FaqEntryApi.as_view(), name="api-faq-entry"),
    # Judging and agreement.
    path("judge-runs/<int:run_id>/", JudgeRunProgressApi.as_view(), name="api-judge-run"),
    path("projects/<int:project_id>/judge-runs/", JudgeRunStartApi.as_view(), name="api-judge-run-start"),
    path("projects/<int:project_id>/agreement/", AgreementReportApi.as_view(), name="api-agreement"),
    path("projects/<int:project_id>/agreement/recompute/", AgreementRecomputeApi.as_view(),
         name="api-agreement-recompute"),
]
