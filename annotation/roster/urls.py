"""The roster pages and invitation links."""
from django.urls import path

from annotation.roster import views

urlpatterns = [
    path("projects/<int:project_id>/members/", views.members, name="members"),
    path("projects/<int:project_id>/members/<int:user_id>/remove/", views.member_remove, name="member_remove"),
    path("projects/<int:project_id>/invitations/", views.invitation_create, name="invitation_create"),
    path("projects/<int:project_id>/invitations/<int:invitation_id>/revoke/", views.invitation_revoke,
         name="invitation_revoke"),
    path("invite/", views.invite_start, name="invite_start"),
    path("invite/<str:token>/", views.invite, name="invite"),
]
