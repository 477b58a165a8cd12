"""Pages of the case library and the FAQ."""
from django.urls import path

from annotation.library import views

urlpatterns = [
    path("projects/<int:project_id>/cases/", views.cases, name="cases"),
    path("projects/<int:project_id>/cases/new/", views.case_new, name="case_new"),
    path("projects/<int:project_id>/cases/<int:case_id>/", views.case_detail, name="case_detail"),
    path("projects/<int:project_id>/cases/<int:case_id>/edit/", views.case_edit, name="case_edit"),
    path("projects/<int:project_id>/cases/<int:case_id>/publish/", views.case_publish_view, name="case_publish"),
    path("projects/<int:project_id>/cases/<int:case_id>/unpublish/", views.case_unpublish_view,
         name="case_unpublish"),
    path("projects/<int:project_id>/faq/", views.faq, name="faq"),
    path("projects/<int:project_id>/faq/ask/", views.faq_ask_view, name="faq_ask"),
    path("projects/<int:project_id>/faq/similar/", views.faq_similar_view, name="faq_similar"),
    path("projects/<int:project_id>/faq/<int:entry_id>/", views.faq_detail, name="faq_detail"),
    path("projects/<int:project_id>/faq/<int:entry_id>/answer/", views.faq_answer_view, name="faq_answer"),
]
