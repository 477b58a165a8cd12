"""The benchmark quality report: its stored results and the PM's gate thresholds."""
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class BenchmarkReport(models.Model):
    """One computed benchmark quality report (the page renders these, never raw labels).

    `labels_state` is the agreement report the labels were read with: the dashboard's
    reports are recomputed whenever labels change, so a newer one means this is stale.
    """

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        RUNNING = "running", _("Running")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="benchmark_reports")
    rubric_version = models.ForeignKey("rubrics.RubricVersion", on_delete=models.CASCADE, null=True, blank=True,
                                       related_name="+")
    judge_run = models.ForeignKey("annotation.JudgeRun", on_delete=models.CASCADE, null=True, blank=True,
                                  related_name="benchmark_reports")
    labels_state = models.ForeignKey("annotation.AgreementReport", on_delete=models.SET_NULL, null=True, blank=True,
                                     related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    requested_at = models.DateTimeField()
    computed_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    units = models.PositiveIntegerField(default=0)
    payload = models.JSONField(default=dict)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-requested_at"]
        indexes = [models.Index(fields=["project", "judge_run", "status", "-computed_at"],
                                name="benchmark_report_latest_idx")]

    def __str__(self) -> str:
        return f"benchmark report {self.pk} ({self.status})"


class BenchmarkGates(models.Model):
    """A project's bars for GrowLoop's five benchmark gates (a project without a row uses the defaults)."""

    project = models.OneToOneField("annotation.Project", on_delete=models.CASCADE, related_name="benchmark_gates")
    spread_min = models.FloatField(default=10.0, validators=[MinValueValidator(0), MaxValueValidator(100)])
    separation_min_pct = models.FloatField(default=95.0, validators=[MinValueValidator(0), MaxValueValidator(100)])
    gaps_significant_min_pct = models.FloatField(default=100.0,
                                                 validators=[MinValueValidator(0), MaxValueValidator(100)])
    saturation_max = models.FloatField(default=90.0, validators=[MinValueValidator(0), MaxValueValidator(100)])
    rank_stability_min_pct = models.FloatField(default=95.0,
                                               validators=[MinValueValidator(0), MaxValueValidator(100)])
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(spread_min__gte=0, spread_min__lte=100), name="bench_gate_spread_range"),
            models.CheckConstraint(condition=Q(separation_min_pct__gte=0, separation_min_pct__lte=100),
                                   name="bench_gate_separation_range"),
            models.CheckConstraint(condition=Q(gaps_significant_min_pct__gte=0, gaps_significant_min_pct__lte=100),
                                   name="bench_gate_gaps_range"),
            models.CheckConstraint(condition=Q(saturation_max__gte=0, saturation_max__lte=100),
                                   name="bench_gate_saturation_range"),
            models.CheckConstraint(condition=Q(rank_stability_min_pct__gte=0, rank_stability_min_pct__lte=100),
                                   name="bench_gate_stability_range"),
        ]

    def __str__(self) -> str:
        return f"benchmark gates of project {self.project_id}"
