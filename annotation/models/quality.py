"""Expert quality: golden references, calibration attempts and silent control-task results.

Calibration answers live in their own table rather than in Assignment/Label: the
database allows one assignment per (task, expert) ever, which a retried calibration
would break, and keeping them apart keeps calibration out of consensus and payments
by construction (payments pays submitted Assignment rows of kind "work" only).
"""
from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _


class GoldenReference(models.Model):
    """The reference answer (0/1) to one rubric item of one golden task, with an optional rationale.

    `rubric_item` belongs to the task's rubric version; a task is usable as golden
    material once every rubric item of its question in that version has a reference.
    """

    task = models.ForeignKey("annotation.Task", on_delete=models.CASCADE, related_name="golden_references")
    rubric_item = models.ForeignKey("rubrics.RubricItem", on_delete=models.PROTECT, related_name="+")
    value = models.PositiveSmallIntegerField()
    rationale = models.TextField(blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["task_id", "rubric_item_id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "rubric_item"], name="golden_reference_one_per_item"),
            models.CheckConstraint(condition=Q(value__in=[0, 1]), name="golden_reference_value_binary"),
        ]

    def __str__(self) -> str:
        return f"golden {self.value} on item {self.rubric_item_id} (task {self.task_id})"


class CalibrationAttempt(models.Model):
    """One expert's calibration on one project: a drawn set of golden tasks, answered and scored.

    A passed attempt lets the expert lease real work until it goes stale (a published
    rubric version that changes the standard marks every attempt of the project stale).
    """

    class Status(models.TextChoices):
        IN_PROGRESS = "in_progress", _("In progress")
        PASSED = "passed", _("Passed")
        FAILED = "failed", _("Failed")
        STALE = "stale", _("Stale (rubric changed)")

    expert = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                               related_name="calibration_attempts")
    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="calibration_attempts")
    rubric_version = models.ForeignKey("rubrics.RubricVersion", on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.IN_PROGRESS)
    threshold_pct = models.PositiveSmallIntegerField()
    items_total = models.PositiveIntegerField(default=0)
    items_correct = models.PositiveIntegerField(default=0)
    score_pct = models.DecimalField(max_digits=5, decimal_places=2, null=True, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    stale_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["expert", "project"], condition=Q(status="in_progress"),
                                    name="calibration_one_open_attempt"),
            models.CheckConstraint(
                condition=~Q(status__in=["passed", "failed"])
                | Q(finished_at__isnull=False, score_pct__isnull=False),
                name="calibration_finished_has_score"),
            models.CheckConstraint(
                condition=~Q(status="in_progress") | Q(finished_at__isnull=True, score_pct__isnull=True),
                name="calibration_open_has_no_score"),
            models.CheckConstraint(condition=Q(status="stale") | Q(stale_at__isnull=True),
                                   name="calibration_stale_at_matches_status"),
            models.CheckConstraint(condition=Q(items_correct__lte=F("items_total")),
                                   name="calibration_correct_within_total"),
            models.CheckConstraint(condition=Q(threshold_pct__lte=100), name="calibration_threshold_range"),
        ]
        indexes = [models.Index(fields=["expert", "project", "status"], name="calibration_expert_idx")]

    def __str__(self) -> str:
        return f"calibration {self.pk} ({self.status}) of {self.expert_id} in project {self.project_id}"


class CalibrationTask(models.Model):
    """A golden task drawn into an attempt, at a fixed position (the order the expert sees)."""

    attempt = models.ForeignKey(CalibrationAttempt, on_delete=models.CASCADE, related_name="tasks")
    task = models.ForeignKey("annotation.Task", on_delete=models.PROTECT, related_name="+")
    position = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["attempt_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "task"], name="calibration_task_once"),
            models.UniqueConstraint(fields=["attempt", "position"], name="calibration_task_position_unique"),
            models.CheckConstraint(condition=Q(position__gte=1), name="calibration_task_position_positive"),
        ]

    def __str__(self) -> str:
        return f"calibration {self.attempt_id} #{self.position}: task {self.task_id}"


class CalibrationAnswer(models.Model):
    """The expert's 0/1 on one rubric item of one calibration task."""

    attempt = models.ForeignKey(CalibrationAttempt, on_delete=models.CASCADE, related_name="answers")
    task = models.ForeignKey("annotation.Task", on_delete=models.PROTECT, related_name="+")
    rubric_item = models.ForeignKey("rubrics.RubricItem", on_delete=models.PROTECT, related_name="+")
    value = models.PositiveSmallIntegerField()
    answered_at = models.DateTimeField()

    class Meta:
        ordering = ["attempt_id", "task_id", "rubric_item_id"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "task", "rubric_item"], name="calibration_answer_once"),
            models.CheckConstraint(condition=Q(value__in=[0, 1]), name="calibration_answer_binary"),
        ]

    def __str__(self) -> str:
        return f"calibration answer {self.value} on item {self.rubric_item_id} (attempt {self.attempt_id})"


class ControlResult(models.Model):
    """The score of one submitted control task (a golden task leased as regular work)."""

    assignment = models.OneToOneField("annotation.Assignment", on_delete=models.CASCADE,
                                      related_name="control_result")
    expert = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="control_results")
    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="control_results")
    items_total = models.PositiveSmallIntegerField()
    items_correct = models.PositiveSmallIntegerField()
    scored_at = models.DateTimeField()

    class Meta:
        ordering = ["-scored_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(items_correct__lte=F("items_total")),
                                   name="control_correct_within_total"),
        ]
        indexes = [models.Index(fields=["expert", "project", "scored_at"], name="control_expert_idx")]

    def __str__(self) -> str:
        return f"control {self.items_correct}/{self.items_total} (assignment {self.assignment_id})"


class GoldenTally(models.Model):
    """An expert's golden evidence in one dimension of one project: items answered and answered right.

    Kept in step with the work, in the transaction that records each golden result
    (`annotation.quality.golden_tally`): a control-task submission, a scored calibration;
    a return or a new set of references recounts the rows it touches. So matching reads
    an expert's strengths in one query instead of re-scoring their whole history. It
    always equals `annotation.quality.portrait.golden_counts_by_dimension` (tests hold it).
    """

    expert = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="+")
    dimension = models.ForeignKey("rubrics.Dimension", on_delete=models.CASCADE, related_name="+")
    total = models.PositiveIntegerField(default=0)
    correct = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["expert_id", "project_id", "dimension_id"]
        constraints = [
            models.UniqueConstraint(fields=["expert", "project", "dimension"], name="golden_tally_one_per_dimension"),
            models.CheckConstraint(condition=Q(correct__lte=F("total")), name="golden_tally_correct_within_total"),
        ]

    def __str__(self) -> str:
        return f"golden {self.correct}/{self.total} of {self.expert_id} in dimension {self.dimension_id}"


class PeerTally(models.Model):
    """How far one work submission agrees with the rest of its panel, kept for the tier rules.

    `total` counts the submission's items on which the other counted labels of the unit
    have a majority (at least one other label, not tied), `agree` those where the
    submission's label is that majority: the per-label terms of
    `annotation.quality.portrait`'s peer agreement. Rewritten for a task whenever its
    labels change (`annotation.quality.peer_tally.peer_tally_refresh`), in that
    transaction, so the tier evaluation reads an expert's peer agreement with one
    aggregate over these rows instead of comparing every label of their history.
    """

    assignment = models.OneToOneField("annotation.Assignment", on_delete=models.CASCADE, primary_key=True,
                                      related_name="+")
    expert = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    task = models.ForeignKey("annotation.Task", on_delete=models.CASCADE, related_name="+")
    total = models.PositiveIntegerField(default=0)
    agree = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(agree__lte=F("total")), name="peer_tally_agree_within_total"),
        ]
        indexes = [models.Index(fields=["expert"], name="peer_tally_expert_idx"),
                   models.Index(fields=["task"], name="peer_tally_task_idx")]

    def __str__(self) -> str:
        return f"peer {self.agree}/{self.total} of assignment {self.assignment_id}"
