"""Pages of expert quality: calibration, portraits, notifications, and the PM's quality pages."""
from django.urls import path

from annotation.calibration import views

urlpatterns = [
    path("projects/<int:project_id>/calibration/", views.calibration, name="calibration"),
    path("projects/<int:project_id>/calibration/start/", views.calibration_start_view, name="calibration_start"),
    path("calibration/<int:attempt_id>/tasks/<int:position>/", views.calibration_task, name="calibration_task"),
    path("calibration/<int:attempt_id>/result/", views.calibration_result, name="calibration_result"),
    path("me/portrait/", views.my_portrait, name="my_portrait"),
    path("notifications/", views.notifications, name="notifications"),
    path("notifications/read/", views.notifications_read, name="notifications_read"),
    path("projects/<int:project_id>/quality/", views.quality, name="quality"),
    path("projects/<int:project_id>/golden/import/", views.golden_import_view, name="golden_import"),
    path("projects/<int:project_id>/experts/", views.quality_experts, name="quality_experts"),
    path("projects/<int:project_id>/experts/<int:user_id>/", views.quality_expert, name="quality_expert"),
    path("projects/<int:project_id>/experts/<int:user_id>/resume/", views.quality_expert_resume,
         name="quality_expert_resume"),
    path("projects/<int:project_id>/experts/<int:user_id>/evaluate/", views.quality_expert_evaluate,
         name="quality_expert_evaluate"),
]
