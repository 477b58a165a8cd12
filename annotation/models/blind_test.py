"""The judge's convergence targets, judge drift alerts, and blind-test samples of a project's questions."""
from django.conf import settings
from django.db import models
from django.db.models import Q

SAFETY_TARGET_PCT = 90.0
OTHER_TARGET_PCT = 85.0
DRIFT_THRESHOLD_PCT = 10.0
BLIND_SHARE = 0.4
PASS_BAR_PCT = 75.0


class ConvergenceSettings(models.Model):
    """A project's agreement targets (GrowLoop: 90% on safety dimensions, 85% elsewhere) and its drift threshold.

    A project without a row uses the defaults and marks no dimension as safety.
    """

    project = models.OneToOneField("annotation.Project", on_delete=models.CASCADE,
                                   related_name="convergence_settings")
    safety_target_pct = models.FloatField(default=SAFETY_TARGET_PCT)
    other_target_pct = models.FloatField(default=OTHER_TARGET_PCT)
    # A finished judge run whose labels differ from an earlier run's on more than this share of
    # the units both judged tells the PM (annotation.judging.drift).
    drift_threshold_pct = models.FloatField(default=DRIFT_THRESHOLD_PCT)
    safety_dimensions = models.ManyToManyField("rubrics.Dimension", blank=True, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(safety_target_pct__gte=0, safety_target_pct__lte=100),
                                   name="convergence_safety_target_range"),
            models.CheckConstraint(condition=Q(other_target_pct__gte=0, other_target_pct__lte=100),
                                   name="convergence_other_target_range"),
            models.CheckConstraint(condition=Q(drift_threshold_pct__gt=0, drift_threshold_pct__lte=100),
                                   name="convergence_drift_threshold_range"),
        ]

    def __str__(self) -> str:
        return f"convergence targets of project {self.project_id}"


class JudgeDriftAlert(models.Model):
    """A finished run's labels differed from an earlier run's on the same units: the PM was told, once per run."""

    run = models.OneToOneField("annotation.JudgeRun", on_delete=models.CASCADE, related_name="drift_alert")
    earlier_run = models.ForeignKey("annotation.JudgeRun", on_delete=models.CASCADE, related_name="+")
    shared_units = models.PositiveIntegerField()
    differing = models.PositiveIntegerField()
    threshold_pct = models.FloatField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(differing__lte=models.F("shared_units")),
                                              name="judge_drift_counts")]

    def __str__(self) -> str:
        return f"judge drift of run {self.run_id}: {self.differing}/{self.shared_units}"


class BlindTest(models.Model):
    """A stratified sample of a project's questions that experts label; the rest stay judge-only.

    The draw is reproducible: the same questions, share and seed give the same sample
    (annotation.blind_test.sampling). Only the newest blind test of a project is active.
    """

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="blind_tests")
    number = models.PositiveIntegerField()
    share = models.FloatField(default=BLIND_SHARE)
    seed = models.BigIntegerField()
    pass_bar_pct = models.FloatField(default=PASS_BAR_PCT)
    questions_total = models.PositiveIntegerField()
    questions_sampled = models.PositiveIntegerField()
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(fields=["project", "number"], name="blind_test_number_unique"),
            models.UniqueConstraint(fields=["project"], condition=Q(is_active=True), name="blind_test_one_active"),
            models.CheckConstraint(condition=Q(share__gt=0, share__lte=1), name="blind_test_share_range"),
            models.CheckConstraint(condition=Q(pass_bar_pct__gte=0, pass_bar_pct__lte=100),
                                   name="blind_test_pass_bar_range"),
            models.CheckConstraint(condition=Q(seed__gte=0), name="blind_test_seed_non_negative"),
            models.CheckConstraint(condition=Q(questions_sampled__lte=models.F("questions_total")),
                                   name="blind_test_sample_within_total"),
        ]

    def __str__(self) -> str:
        return f"blind test {self.number} of project {self.project_id} ({self.questions_sampled} questions)"


class BlindTestQuestion(models.Model):
    """One question drawn into a blind test, with the stratum (scene, difficulty) it was drawn from."""

    blind_test = models.ForeignKey(BlindTest, on_delete=models.CASCADE, related_name="questions")
    question = models.ForeignKey("annotation.Question", on_delete=models.CASCADE, related_name="+")
    scene = models.CharField(max_length=100, blank=True)
    difficulty = models.CharField(max_length=10)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["blind_test", "question"], name="blind_test_question_unique")]

    def __str__(self) -> str:
        return f"question {self.question_id} in blind test {self.blind_test_id}"
