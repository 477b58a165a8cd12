"""Calibration pages (experts)."""
from django.urls import path

from annotation.calibration import views

urlpatterns = [
    path("projects/<int:project_id>/calibration/", views.calibration, name="calibration"),
    path("projects/<int:project_id>/calibration/start/", views.calibration_start_view, name="calibration_start"),
    path("calibration/<int:attempt_id>/tasks/<int:position>/", views.calibration_task, name="calibration_task"),
    path("calibration/<int:attempt_id>/tasks/<int:position>/draft/", views.calibration_draft_view,
         name="calibration_draft"),
    path("calibration/<int:attempt_id>/result/", views.calibration_result, name="calibration_result"),
]
