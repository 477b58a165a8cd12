"""Pages of the payments app, mounted at /payments/ (URL names are flat, like the other apps')."""
from django.urls import path

from payments import appeal_views, views

urlpatterns = [
    path("", views.earnings, name="earnings"),
    path("statements/<int:statement_id>/", views.statement_detail, name="statement_detail"),
    path("costs/", views.costs, name="costs"),
    path("costs/<int:project_id>/", views.project_costs, name="project_costs"),
    path("costs/<int:project_id>/close/", views.period_close, name="period_close"),
    path("costs/<int:project_id>/assignments/<int:assignment_id>/reject/", views.submission_reject,
         name="submission_reject"),
    path("costs/<int:project_id>/batch-reject/", views.submissions_reject_batch, name="submissions_reject_batch"),
    path("appeals/", appeal_views.appeal_list, name="appeal_list"),
    path("appeals/rejections/<int:assignment_id>/", appeal_views.appeal_rejection_new, name="appeal_rejection_new"),
    path("appeals/lines/<int:entry_id>/", appeal_views.appeal_line_new, name="appeal_line_new"),
    path("appeals/<int:appeal_id>/decide/", appeal_views.appeal_decide, name="appeal_decide"),
    path("projects/<int:project_id>/appeals/", appeal_views.project_appeals, name="project_appeals"),
    path("batches/<int:batch_id>/approve/", views.batch_approve, name="batch_approve"),
    path("batches/<int:batch_id>/paid/", views.batch_mark_paid, name="batch_mark_paid"),
    path("batches/<int:batch_id>/payouts.csv", views.batch_csv, name="batch_csv"),
]
