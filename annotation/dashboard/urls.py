"""Quality dashboard pages; included at the site root by annotation/urls.py."""
from django.urls import path

from annotation.dashboard import views

urlpatterns = [
    # `projects/<id>/quality/` is the quality settings page (annotation.calibration).
    path("projects/<int:project_id>/dashboard/", views.quality_dashboard, name="quality_dashboard"),
    path("projects/<int:project_id>/dashboard/status/", views.quality_status, name="quality_status"),
    path("projects/<int:project_id>/dashboard/recompute/", views.quality_recompute, name="quality_recompute"),
    path("projects/<int:project_id>/quality/items/", views.quality_items, name="quality_items"),
]
