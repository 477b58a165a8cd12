"""Benchmark quality report pages; included at the site root by annotation/urls.py."""
from django.urls import path

from annotation.benchmark_report import views

urlpatterns = [
    path("projects/<int:project_id>/dashboard/benchmark/", views.benchmark_report_page, name="benchmark_report"),
    path("projects/<int:project_id>/dashboard/benchmark/recompute/", views.benchmark_report_recompute,
         name="benchmark_report_recompute"),
    path("projects/<int:project_id>/dashboard/benchmark/gates/", views.benchmark_gates_edit,
         name="benchmark_gates_edit"),
]
