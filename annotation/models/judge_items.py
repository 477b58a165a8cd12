"""Judge configurations as immutable versions, and per-rubric-item agreement rows of a stored report."""
from django.conf import settings
from django.db import models
from django.db.models import Q


class JudgeConfig(models.Model):
    """A named judge configuration of a project; what it says lives in its versions."""

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="judge_configs")
    name = models.CharField(max_length=100)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="judge_config_name_unique")]

    def __str__(self) -> str:
        return f"judge config {self.name}"


class JudgeConfigVersion(models.Model):
    """One immutable version of a judge configuration: editing writes version n + 1.

    Nothing updates a row once written (the services only insert); a run points to the
    version it used, so what a run was asked with stays readable after later edits.
    """

    config = models.ForeignKey(JudgeConfig, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    prompt_template = models.TextField()
    judge_model = models.CharField(max_length=200, blank=True)
    base_url = models.CharField(max_length=500, blank=True)
    temperature = models.FloatField(default=0.0)
    # Other request parameters (max_tokens, top_p, ...) and, for migrated runs, the prompt
    # version the run recorded.
    params = models.JSONField(default=dict, blank=True)
    note = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["config_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["config", "number"], name="judge_config_version_unique"),
            models.CheckConstraint(condition=Q(number__gte=1), name="judge_config_version_positive"),
            models.CheckConstraint(condition=Q(temperature__gte=0) & Q(temperature__lte=2),
                                   name="judge_config_temperature_range"),
        ]

    def __str__(self) -> str:
        return f"{self.config.name} v{self.number}"


class AgreementItemStat(models.Model):
    """One rubric item's judge-vs-human agreement in one stored report (set-based, written with the report)."""

    report = models.ForeignKey("annotation.AgreementReport", on_delete=models.CASCADE, related_name="item_stats")
    rubric_item = models.ForeignKey("rubrics.RubricItem", on_delete=models.CASCADE, related_name="+")
    question_ref = models.CharField(max_length=100)
    position = models.PositiveSmallIntegerField()
    dimension_code = models.CharField(max_length=50)
    scene = models.CharField(max_length=100, blank=True)
    units = models.PositiveIntegerField()
    agree = models.PositiveIntegerField()
    acceptable = models.PositiveIntegerField()
    strict = models.FloatField()
    strict_low = models.FloatField(null=True)
    strict_high = models.FloatField(null=True)
    zone_aware = models.FloatField()
    zone_aware_low = models.FloatField(null=True)
    zone_aware_high = models.FloatField(null=True)
    judge_hits = models.PositiveIntegerField()
    human_hits = models.PositiveIntegerField()
    unanimous = models.PositiveIntegerField()
    split = models.PositiveIntegerField()
    tied = models.PositiveIntegerField()
    single = models.PositiveIntegerField()
    ambiguous = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["report", "rubric_item"], name="agreement_item_one_per_report"),
            models.CheckConstraint(condition=Q(agree__lte=models.F("units")) & Q(acceptable__lte=models.F("units"))
                                   & Q(agree__lte=models.F("acceptable")), name="agreement_item_counts"),
        ]
        indexes = [models.Index(fields=["report", "strict", "-units"], name="agreement_item_worst_idx")]

    def __str__(self) -> str:
        return f"item {self.question_ref}:{self.position} agreement {self.agree}/{self.units}"
