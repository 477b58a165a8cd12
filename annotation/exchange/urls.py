"""Export pages; included at the site root by annotation/urls.py."""
from django.urls import path

from annotation.exchange import views

urlpatterns = [
    path("projects/<int:project_id>/exports/", views.exports, name="exports"),
    path("projects/<int:project_id>/exports/download/", views.export_download, name="export_download"),
    path("projects/<int:project_id>/exports/jobs/", views.export_job_start, name="export_job_start"),
    path("exports/<int:job_id>/", views.export_job_detail, name="export_job"),
    path("exports/<int:job_id>/download/", views.export_job_download, name="export_job_download"),
]
