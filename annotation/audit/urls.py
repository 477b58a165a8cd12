"""Audit log pages."""
from django.urls import path

from annotation.audit import views

urlpatterns = [
    path("audit/", views.audit_log, name="audit_log"),
    path("projects/<int:project_id>/audit/", views.project_audit, name="project_audit"),
]
