"""Judge run pages; included at the site root by annotation/urls.py."""
from django.urls import path

from annotation.judging import pages, views

urlpatterns = [
    path("projects/<int:project_id>/judge-runs/", views.judge_runs, name="judge_runs"),
    path("projects/<int:project_id>/judge-runs/import/", views.judge_labels_import_view, name="judge_labels_import"),
    path("judge-runs/<int:run_id>/", views.judge_run_detail, name="judge_run"),
    path("judge-runs/<int:run_id>/cancel/", views.judge_run_cancel_view, name="judge_run_cancel"),
    path("judge-runs/<int:run_id>/resume/", views.judge_run_resume_view, name="judge_run_resume"),
    path("projects/<int:project_id>/judge/items/", pages.judge_items, name="judge_items"),
    path("projects/<int:project_id>/judge/items/<int:item_id>/", pages.judge_item, name="judge_item"),
    path("projects/<int:project_id>/judge/configs/", pages.judge_configs, name="judge_configs"),
    path("projects/<int:project_id>/judge/configs/<int:config_id>/", pages.judge_config, name="judge_config"),
    path("projects/<int:project_id>/judge/configs/<int:config_id>/diff/", pages.judge_config_diff_view,
         name="judge_config_diff"),
    path("projects/<int:project_id>/judge/compare/", pages.judge_runs_compare_view, name="judge_runs_compare"),
]
