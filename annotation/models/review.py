"""Review flags on submissions, submissions returned to their expert, and reminders already sent."""
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from .project import Project
from .work import Assignment


class ReviewFlag(models.Model):
    """One rule that one submission tripped, waiting for the PM's decision.

    A submission is flagged at most once per rule (the unique constraint), however often
    the check runs. The PM decides per submission: all its open flags close together.
    """

    class Rule(models.TextChoices):
        TOO_FAST = "too_fast", _("Faster than the minimum per item")
        IDENTICAL_RUN = "identical_run", _("The same label on every item, several tasks in a row")
        REPEATED_NOTE = "repeated_note", _("A note repeated word for word on another task")

    class Status(models.TextChoices):
        OPEN = "open", _("Open")
        ACCEPTED = "accepted", _("Accepted")
        RETURNED = "returned", _("Returned to the expert")
        REJECTED = "rejected", _("Rejected")

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="review_flags")
    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="review_flags")
    rule = models.CharField(max_length=20, choices=Rule.choices)
    # What the rule measured, for the PM: seconds and items, the run's value and length, the note.
    detail = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+")

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["assignment", "rule"], name="review_flag_once_per_rule"),
            models.CheckConstraint(condition=Q(status="open", resolved_at__isnull=True)
                                   | (~Q(status="open") & Q(resolved_at__isnull=False)),
                                   name="review_flag_resolved_matches_status"),
        ]
        indexes = [models.Index(fields=["project", "status"], name="review_flag_project_status_idx")]

    def __str__(self) -> str:
        return f"review flag {self.pk} ({self.rule}, assignment {self.assignment_id}, {self.status})"


class SubmissionReturn(models.Model):
    """A PM sent a submission back to its expert with a comment; the expert may fix it once.

    One per assignment, ever: the second return of the same submission is refused by the
    schema. The submitted labels and notes are kept here as they were; if the new lease
    lapses unsubmitted, the submission is put back as it was (`resubmitted_at` stays empty
    and `lapsed_at` is set).
    """

    assignment = models.OneToOneField(Assignment, on_delete=models.CASCADE, related_name="submission_return")
    comment = models.TextField()
    returned_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    returned_at = models.DateTimeField()
    original_submitted_at = models.DateTimeField()
    original_labels = models.JSONField(default=dict)
    original_notes = models.JSONField(default=dict)
    resubmitted_at = models.DateTimeField(null=True, blank=True)
    lapsed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=Q(resubmitted_at__isnull=True) | Q(lapsed_at__isnull=True),
                                   name="submission_return_one_ending"),
        ]

    def __str__(self) -> str:
        return f"return of assignment {self.assignment_id}"


class SentReminder(models.Model):
    """A reminder or alert that went out: its key names the event, so it never goes twice."""

    key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=30)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    sent_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"reminder {self.key}"
