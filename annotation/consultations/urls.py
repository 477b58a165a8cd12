"""Consultation pages."""
from django.urls import path

from annotation.consultations import views

urlpatterns = [
    path("projects/<int:project_id>/consultations/", views.consultation_list, name="consultation_list"),
    path("projects/<int:project_id>/consultations/open/", views.consultation_open_pm_view,
         name="consultation_open_pm"),
    path("consultations/<int:consultation_id>/", views.consultation_detail, name="consultation_detail"),
    path("consultations/<int:consultation_id>/vote/", views.consultation_vote_view, name="consultation_vote"),
    path("consultations/<int:consultation_id>/posts/", views.consultation_post_view, name="consultation_post"),
    path("consultations/<int:consultation_id>/invite/", views.consultation_invite_view,
         name="consultation_invite"),
    path("consultations/<int:consultation_id>/reveal/", views.consultation_reveal_view,
         name="consultation_reveal"),
    path("consultations/<int:consultation_id>/resolve/", views.consultation_resolve_view,
         name="consultation_resolve"),
    path("me/consultations/", views.my_consultations, name="my_consultations"),
    path("assignments/<int:assignment_id>/consult/", views.consultation_ask_view, name="consultation_ask"),
    path("projects/<int:project_id>/rubric/suggestions/<int:suggestion_id>/take/",
         views.rubric_suggestion_take_view, name="rubric_suggestion_take"),
    path("projects/<int:project_id>/rubric/suggestions/<int:suggestion_id>/dismiss/",
         views.rubric_suggestion_dismiss_view, name="rubric_suggestion_dismiss"),
]
