"""The workload page and batch operations of a project."""
from django.urls import path

from annotation.workload import views

urlpatterns = [
    path("projects/<int:project_id>/workload/", views.workload, name="workload"),
    path("projects/<int:project_id>/batch/", views.batch, name="batch"),
    path("projects/<int:project_id>/batch/tasks/", views.batch_tasks, name="batch_tasks"),
    path("projects/<int:project_id>/batch/jobs/<int:job_id>/", views.batch_job, name="batch_job"),
    path("projects/<int:project_id>/batch/experts/", views.batch_experts, name="batch_experts"),
]
