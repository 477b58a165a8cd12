"""REST API v1 routes for expert quality (included from annotation.api.urls)."""
from django.urls import path

from annotation.api import quality

urlpatterns = [
    path("projects/<int:project_id>/golden/import/", quality.GoldenImportApi.as_view(), name="api-golden-import"),
    path("projects/<int:project_id>/quality-settings/", quality.QualitySettingsApi.as_view(),
         name="api-quality-settings"),
    path("projects/<int:project_id>/rubric-versions/draft/", quality.RubricDraftApi.as_view(),
         name="api-rubric-draft"),
    path("projects/<int:project_id>/rubric-versions/draft/items/", quality.RubricDraftItemsApi.as_view(),
         name="api-rubric-draft-items"),
    path("projects/<int:project_id>/rubric-items/<int:item_id>/", quality.RubricItemApi.as_view(),
         name="api-rubric-item"),
    path("projects/<int:project_id>/rubric-versions/<int:number>/publish/", quality.RubricVersionPublishApi.as_view(),
         name="api-rubric-version-publish"),
    path("projects/<int:project_id>/calibration/", quality.CalibrationApi.as_view(), name="api-calibration"),
    path("calibration/<int:attempt_id>/", quality.CalibrationAttemptApi.as_view(), name="api-calibration-attempt"),
    path("calibration/<int:attempt_id>/tasks/<int:position>/", quality.CalibrationTaskApi.as_view(),
         name="api-calibration-task"),
    path("me/portrait/", quality.MyPortraitApi.as_view(), name="api-my-portrait"),
    path("projects/<int:project_id>/experts/<int:user_id>/portrait/", quality.ExpertPortraitApi.as_view(),
         name="api-expert-portrait"),
    path("notifications/", quality.NotificationsApi.as_view(), name="api-notifications"),
]
