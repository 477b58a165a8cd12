"""The guidelines page."""
from django.urls import path

from annotation.guidelines import views

urlpatterns = [
    path("projects/<int:project_id>/guidelines/", views.project_guidelines, name="project_guidelines"),
]
