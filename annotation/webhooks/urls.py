"""Webhook pages of a project."""
from django.urls import path

from annotation.webhooks import views

urlpatterns = [
    path("projects/<int:project_id>/webhooks/", views.webhooks, name="webhooks"),
    path("projects/<int:project_id>/webhooks/<int:endpoint_id>/disable/", views.webhook_disable,
         name="webhook_disable"),
    path("projects/<int:project_id>/webhooks/messages/<int:message_id>/resend/", views.webhook_resend_view,
         name="webhook_resend"),
]
