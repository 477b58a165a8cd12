"""Judge run pages; included at the site root by annotation/urls.py."""
from django.urls import path

from annotation.judging import views

urlpatterns = [
    path("projects/<int:project_id>/judge-runs/", views.judge_runs, name="judge_runs"),
    path("projects/<int:project_id>/judge-runs/import/", views.judge_labels_import_view, name="judge_labels_import"),
    path("judge-runs/<int:run_id>/", views.judge_run_detail, name="judge_run"),
    path("judge-runs/<int:run_id>/cancel/", views.judge_run_cancel_view, name="judge_run_cancel"),
    path("judge-runs/<int:run_id>/resume/", views.judge_run_resume_view, name="judge_run_resume"),
]
