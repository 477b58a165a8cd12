"""REST API v1 routes of the payments app (mounted beside annotation's under /api/v1/)."""
from django.urls import path

from payments import api

urlpatterns = [
    path("appeals/", api.AppealCreateApi.as_view(), name="api-appeal-create"),
    path("appeals/mine/", api.MyAppealsApi.as_view(), name="api-appeals-mine"),
    path("appeals/to-decide/", api.AppealsToDecideApi.as_view(), name="api-appeals-to-decide"),
    path("appeals/<int:appeal_id>/decide/", api.AppealDecideApi.as_view(), name="api-appeal-decide"),
]
