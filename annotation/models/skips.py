"""An expert's "skip": a task they gave back with a reason the PM reads, and calibration drafts."""
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

MAX_SKIP_TEXT = 1000


class TaskSkip(models.Model):
    """Why an expert gave a task back without judging it. One per assignment: a repeated skip
    request finds this row and changes nothing. The assignment itself is "released"."""

    class Reason(models.TextChoices):
        CANNOT_JUDGE = "cannot_judge", _("I cannot judge this one")
        CONTENT_PROBLEM = "content_problem", _("Problem with the content")
        NOT_MY_FIELD = "not_my_field", _("Not my field")
        OTHER = "other", _("Other")

    assignment = models.OneToOneField("annotation.Assignment", on_delete=models.CASCADE, related_name="skip")
    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="skips")
    task = models.ForeignKey("annotation.Task", on_delete=models.CASCADE, related_name="skips")
    expert = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="task_skips")
    reason = models.CharField(max_length=20, choices=Reason.choices)
    text = models.TextField(blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=~Q(reason="other") | ~Q(text=""), name="task_skip_other_has_text"),
        ]
        indexes = [models.Index(fields=["project", "created_at"], name="task_skip_project_idx")]

    def __str__(self) -> str:
        return f"skip of assignment {self.assignment_id} ({self.reason})"


class CalibrationDraft(models.Model):
    """Autosaved marks and notes of one calibration task before the expert answers it."""

    attempt = models.ForeignKey("annotation.CalibrationAttempt", on_delete=models.CASCADE, related_name="drafts")
    task = models.ForeignKey("annotation.Task", on_delete=models.CASCADE, related_name="+")
    labels = models.JSONField(default=dict)
    notes = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["attempt", "task"], name="calibration_draft_once")]

    def __str__(self) -> str:
        return f"calibration draft of attempt {self.attempt_id}, task {self.task_id}"
