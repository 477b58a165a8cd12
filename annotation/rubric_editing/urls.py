"""Pages of the PM's rubric editor."""
from django.urls import path

from annotation.rubric_editing import views

urlpatterns = [
    path("projects/<int:project_id>/rubric/", views.rubric_draft, name="rubric_draft"),
    path("projects/<int:project_id>/rubric/draft/", views.rubric_draft_start_view, name="rubric_draft_start"),
    path("projects/<int:project_id>/rubric/items/", views.rubric_item_add, name="rubric_item_add"),
    path("projects/<int:project_id>/rubric/items/<int:item_id>/", views.rubric_item_edit, name="rubric_item_edit"),
    path("projects/<int:project_id>/rubric/items/<int:item_id>/delete/", views.rubric_item_delete,
         name="rubric_item_delete"),
    path("projects/<int:project_id>/rubric/guidelines/", views.rubric_guidelines_save, name="rubric_guidelines_save"),
    path("projects/<int:project_id>/rubric/publish/", views.rubric_publish, name="rubric_publish"),
    path("projects/<int:project_id>/rubric/versions/", views.rubric_versions, name="rubric_versions"),
    path("projects/<int:project_id>/rubric/versions/compare/", views.rubric_versions_compare_view,
         name="rubric_versions_compare"),
]
