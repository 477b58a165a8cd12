"""Expert quality pages: the expert's portrait, and the PM's quality settings, golden import and experts."""
from django.urls import path

from annotation.quality import views

urlpatterns = [
    path("me/portrait/", views.my_portrait, name="my_portrait"),
    path("projects/<int:project_id>/quality/", views.quality, name="quality"),
    path("projects/<int:project_id>/golden/import/", views.golden_import_view, name="golden_import"),
    path("projects/<int:project_id>/experts/", views.quality_experts, name="quality_experts"),
    path("projects/<int:project_id>/experts/<int:user_id>/", views.quality_expert, name="quality_expert"),
    path("projects/<int:project_id>/experts/<int:user_id>/resume/", views.quality_expert_resume,
         name="quality_expert_resume"),
    path("projects/<int:project_id>/experts/<int:user_id>/evaluate/", views.quality_expert_evaluate,
         name="quality_expert_evaluate"),
]
