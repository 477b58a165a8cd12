"""Pages of the annotation app, mounted at the site root."""
from django.urls import include, path

from annotation import views

urlpatterns = [
    path("", views.home, name="home"),
    path("projects/<int:project_id>/", views.project_detail, name="project_detail"),
    path("projects/<int:project_id>/next/", views.next_task, name="next_task"),
    path("projects/<int:project_id>/import/<slug:kind>/", views.project_import, name="project_import"),
    path("assignments/<int:assignment_id>/", views.annotate, name="annotate"),
    path("assignments/<int:assignment_id>/draft/", views.draft_save_view, name="draft_save_view"),
    path("assignments/<int:assignment_id>/submit/", views.submit_view, name="submit_view"),
    path("", include("annotation.assignment.urls")),
    path("", include("annotation.projects.urls")),
    path("", include("annotation.judging.urls")),
    path("", include("annotation.exchange.urls")),
    path("", include("annotation.calibration.urls")),
    path("", include("annotation.quality.urls")),
    path("", include("annotation.rubric_editing.urls")),
    path("", include("annotation.guidelines.urls")),
    path("", include("annotation.dashboard.urls")),
    path("", include("annotation.benchmark_report.urls")),
    path("", include("annotation.convergence.urls")),
    path("", include("annotation.blind_test.urls")),
    path("", include("annotation.board.urls")),
    path("", include("annotation.roster.urls")),
    path("", include("annotation.library.urls")),
    path("", include("annotation.consultations.urls")),
    path("", include("annotation.review.urls")),
    path("", include("annotation.reveal.urls")),
    path("", include("annotation.workload.urls")),
    path("", include("annotation.webhooks.urls")),
    path("", include("annotation.audit.urls")),
]
