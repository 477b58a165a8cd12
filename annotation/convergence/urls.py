"""Judge convergence pages; included at the site root by annotation/urls.py."""
from django.urls import path

from annotation.convergence import views

urlpatterns = [
    path("projects/<int:project_id>/judge/convergence/", views.judge_convergence, name="judge_convergence"),
    path("projects/<int:project_id>/judge/convergence/targets/", views.judge_convergence_targets,
         name="judge_convergence_targets"),
]
