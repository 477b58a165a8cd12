"""Blind-test pages; included at the site root by annotation/urls.py."""
from django.urls import path

from annotation.blind_test import views

urlpatterns = [
    path("projects/<int:project_id>/judge/blind-test/", views.blind_test_page, name="blind_test"),
    path("projects/<int:project_id>/judge/blind-test/create/", views.blind_test_create_view,
         name="blind_test_create"),
]
