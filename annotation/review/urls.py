"""Pages of the PM's review queue."""
from django.urls import path

from annotation.review import views

urlpatterns = [
    path("projects/<int:project_id>/review/", views.queue, name="review_queue"),
    path("projects/<int:project_id>/review/<int:assignment_id>/accept/", views.accept, name="review_accept"),
    path("projects/<int:project_id>/review/<int:assignment_id>/return/", views.return_to_expert,
         name="review_return"),
    path("projects/<int:project_id>/review/<int:assignment_id>/reject/", views.reject, name="review_reject"),
]
