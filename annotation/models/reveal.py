"""Reveal after submission: the one revision round of a submitted assignment and its revised labels.

`Label.value` is the expert's first label and never changes. A revision round is written once per
submitted work assignment (`RevealRound`, one-to-one with the assignment: the database refuses a
second round); it holds the `LabelRevision` of every item the expert chose to change, each with
the judge label that was shown and the expert's reason. A round with no revisions says "I saw the
judge and kept every label". Which labels consensus and reports read is the project's choice
(`Project.consensus_labels`).
"""
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Length
from django.db.models.lookups import LessThanOrEqual
from django.utils.translation import gettext_lazy as _

REASON_MAX = 1000


class RevealRound(models.Model):
    """The expert's one look at the judge's labels of a submitted assignment, closed by one submission."""

    assignment = models.OneToOneField("annotation.Assignment", on_delete=models.CASCADE, related_name="reveal_round")
    # The run whose labels were shown; kept when the run is deleted later (the values are copied per revision).
    judge_run = models.ForeignKey("annotation.JudgeRun", on_delete=models.SET_NULL, null=True, blank=True,
                                  related_name="+")
    items_differing = models.PositiveSmallIntegerField(
        help_text=_("Items where the first label and the judge differed."))
    revised_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"reveal round of assignment {self.assignment_id}"


class LabelRevision(models.Model):
    """An expert's revised label on one item after seeing the judge's: the other value, with a reason."""

    label = models.OneToOneField("annotation.Label", on_delete=models.CASCADE, related_name="revision")
    round = models.ForeignKey(RevealRound, on_delete=models.CASCADE, related_name="revisions")
    value = models.PositiveSmallIntegerField()
    reason = models.TextField(max_length=REASON_MAX)
    judge_run = models.ForeignKey("annotation.JudgeRun", on_delete=models.SET_NULL, null=True, blank=True,
                                  related_name="+")
    judge_value = models.PositiveSmallIntegerField()
    revised_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=Q(value__in=[0, 1]), name="label_revision_value_binary"),
            # Only items where the expert differed from the judge are offered, so a revision moves to
            # the judge's label; the first label (Label.value) is the other value.
            models.CheckConstraint(condition=Q(value=F("judge_value")), name="label_revision_toward_judge"),
            models.CheckConstraint(condition=Q(reason__regex=r"\S"), name="label_revision_reason_given"),
            models.CheckConstraint(condition=LessThanOrEqual(Length("reason"), REASON_MAX),
                                   name="label_revision_reason_length"),
        ]

    def __str__(self) -> str:
        return f"revision to {self.value} of label {self.label_id}"

