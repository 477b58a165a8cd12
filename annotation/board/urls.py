"""The PM's board; included at the site root by annotation/urls.py."""
from django.urls import path

from annotation.board import views

urlpatterns = [
    path("projects/<int:project_id>/board/", views.board, name="board"),
    path("projects/<int:project_id>/board/tasks/<int:task_id>/", views.task_history_view, name="task_history"),
]
