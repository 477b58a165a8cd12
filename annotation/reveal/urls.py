from django.urls import path

from annotation.reveal import views

urlpatterns = [
    path("assignments/<int:assignment_id>/reveal/", views.reveal_page, name="reveal"),
]
