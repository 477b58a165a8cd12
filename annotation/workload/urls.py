"""The workload page and batch operations of a project."""
from django.urls import path

from annotation.workload import views

urlpatterns = [
    path("projects/<int:project_id>/workload/", views.workload, name="workload"),
]
