"""Pages for the expert's controls on a lease, their history, and the PM's skip list."""
from django.urls import path

from annotation.assignment import views

urlpatterns = [
    path("assignments/<int:assignment_id>/extend/", views.extend_view, name="lease_extend_view"),
    path("assignments/<int:assignment_id>/release/", views.release_view, name="lease_release_view"),
    path("assignments/<int:assignment_id>/skip/", views.skip_view, name="task_skip_view"),
    path("me/history/", views.history, name="my_history"),
    path("projects/<int:project_id>/skips/", views.skips, name="project_skips"),
]
