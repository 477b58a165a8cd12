"""Project setup pages."""
from django.urls import path

from annotation.projects import views

urlpatterns = [
    path("projects/new/", views.project_new, name="project_new"),
    path("projects/<int:project_id>/settings/", views.project_settings, name="project_settings"),
    path("projects/<int:project_id>/settings/overlap-preview/", views.overlap_preview_view,
         name="project_overlap_preview"),
    path("projects/<int:project_id>/pause/", views.project_pause_view, name="project_pause"),
    path("projects/<int:project_id>/resume/", views.project_resume_view, name="project_resume"),
    path("projects/<int:project_id>/close/", views.project_close_view, name="project_close"),
    path("projects/<int:project_id>/archive/", views.project_archive_view, name="project_archive"),
    path("projects/<int:project_id>/clone/", views.project_clone_view, name="project_clone"),
]
