"""Consultations on disputed rubric items: a blind vote, an open discussion, a PM's resolution.

A consultation is about one rubric item of one task. Its participants vote blind first
(`round` 1), then see each other's votes, discuss and vote again (`round` 2, changeable
until the PM resolves). The resolution is kept on the consultation and, for the dataset,
as the task item's `Adjudication`, which `consensus_compute` applies every time it writes
the item's consensus, so a later rejection or an extra expert never wipes it.
"""
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy


class Outcome(models.TextChoices):
    HIT = "hit", pgettext_lazy("consultation outcome", "Hit")
    MISS = "miss", pgettext_lazy("consultation outcome", "Miss")
    AMBIGUOUS = "ambiguous", _("Item is ambiguous")


class Consultation(models.Model):
    """The case of one rubric item of one task; at most one is unresolved per task item."""

    class Status(models.TextChoices):
        OPEN = "open", _("Blind vote")
        REVEALED = "revealed", _("Discussion")
        RESOLVED = "resolved", _("Resolved")

    class Trigger(models.TextChoices):
        TIE_UNBROKEN = "tie_unbroken", _("Tie the extra experts could not break")
        SCORE_SPLIT = "score_split", _("Split on a high-score item")
        MANY_SPLITS = "many_splits", _("Many items of the task split")
        PM = "pm", _("Opened by a project manager")
        EXPERT = "expert", _("An expert finds the item ambiguous")

    class ReasonCategory(models.TextChoices):
        ANNOTATOR_ERROR = "annotator_error", _("Annotator error")
        GUIDELINE_GAP = "guideline_gap", _("Guideline gap")
        AMBIGUOUS_TEXT = "ambiguous_text", _("Ambiguous text")
        JUDGE_INSIGHT = "judge_insight", _("Judge-relevant insight")

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="consultations")
    task = models.ForeignKey("annotation.Task", on_delete=models.CASCADE, related_name="consultations")
    rubric_item = models.ForeignKey("rubrics.RubricItem", on_delete=models.PROTECT, related_name="consultations")
    trigger = models.CharField(max_length=14, choices=Trigger.choices)
    opened_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                  related_name="+")
    opening_reason = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    opened_at = models.DateTimeField()
    deadline_at = models.DateTimeField()
    revealed_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+")
    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True)
    reason_category = models.CharField(max_length=16, choices=ReasonCategory.choices, blank=True)
    resolution_text = models.TextField(blank=True)

    class Meta:
        ordering = ["-opened_at", "-id"]
        constraints = [
            # Racing openings (two submissions, two experts flagging at once) never make two.
            models.UniqueConstraint(fields=["task", "rubric_item"], condition=~Q(status="resolved"),
                                    name="consultation_one_unresolved_per_item"),
            models.CheckConstraint(
                condition=Q(status="resolved", resolved_at__isnull=False, outcome__in=Outcome.values,
                            reason_category__in=["annotator_error", "guideline_gap", "ambiguous_text",
                                                 "judge_insight"])
                | (~Q(status="resolved") & Q(resolved_at__isnull=True, outcome="", reason_category="")),
                name="consultation_resolution_matches_status",
            ),
            models.CheckConstraint(condition=Q(revealed_at__isnull=False) | Q(status="open"),
                                   name="consultation_revealed_has_time"),
        ]
        indexes = [models.Index(fields=["project", "status"], name="consult_project_status_idx"),
                   models.Index(fields=["deadline_at"], condition=Q(status="open"),
                                name="consultation_deadline_idx")]

    def __str__(self) -> str:
        return f"consultation {self.pk} (task {self.task_id}, item {self.rubric_item_id}, {self.status})"


class ConsultationParticipant(models.Model):
    """Someone asked to vote: a panel expert of the task, or a (senior) expert a PM invited."""

    class Role(models.TextChoices):
        PANEL = "panel", _("Panel expert")
        INVITED = "invited", _("Invited expert")

    consultation = models.ForeignKey(Consultation, on_delete=models.CASCADE, related_name="participants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    role = models.CharField(max_length=8, choices=Role.choices)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    added_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["consultation", "user"],
                                               name="consultation_participant_once")]

    def __str__(self) -> str:
        return f"{self.role} {self.user_id} of consultation {self.consultation_id}"


class ConsultationVote(models.Model):
    """One participant's vote of one round: 1 is blind and final once cast, 2 changes until resolution."""

    BLIND, FINAL = 1, 2

    consultation = models.ForeignKey(Consultation, on_delete=models.CASCADE, related_name="votes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    round = models.PositiveSmallIntegerField()
    choice = models.CharField(max_length=10, choices=Outcome.choices)
    reason = models.TextField()
    cast_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["round", "cast_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["consultation", "user", "round"], name="consultation_vote_once"),
            models.CheckConstraint(condition=Q(round__in=[1, 2]), name="consultation_vote_round"),
            models.CheckConstraint(condition=Q(choice__in=Outcome.values), name="consultation_vote_choice"),
            models.CheckConstraint(condition=~Q(reason=""), name="consultation_vote_reason_required"),
        ]

    def __str__(self) -> str:
        return f"vote {self.choice} (round {self.round}) on consultation {self.consultation_id}"


class ConsultationPost(models.Model):
    """A message of the discussion; it may quote another post of the same consultation."""

    consultation = models.ForeignKey(Consultation, on_delete=models.CASCADE, related_name="posts")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    text = models.TextField()
    reply_to = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="replies")
    quote = models.TextField(blank=True)
    mentioned = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"post {self.pk} on consultation {self.consultation_id}"


class Adjudication(models.Model):
    """The final label a resolution gives one task item: `value` 0/1, or ambiguous (no value).

    Read by `consensus_compute` every time it writes the item, so the verdict survives
    recomputes; the latest resolution of the item replaces an earlier one.
    """

    task = models.ForeignKey("annotation.Task", on_delete=models.CASCADE, related_name="adjudications")
    rubric_item = models.ForeignKey("rubrics.RubricItem", on_delete=models.PROTECT, related_name="adjudications")
    value = models.PositiveSmallIntegerField(null=True, blank=True)
    ambiguous = models.BooleanField(default=False)
    consultation = models.ForeignKey(Consultation, on_delete=models.PROTECT, related_name="adjudications")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    decided_at = models.DateTimeField()

    class Meta:
        ordering = ["task_id", "rubric_item_id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "rubric_item"], name="adjudication_one_per_item"),
            models.CheckConstraint(condition=Q(ambiguous=True, value__isnull=True)
                                   | Q(ambiguous=False, value__in=[0, 1]), name="adjudication_value_or_ambiguous"),
        ]

    def __str__(self) -> str:
        shown = "ambiguous" if self.ambiguous else self.value
        return f"adjudication {shown} of item {self.rubric_item_id} (task {self.task_id})"


class RubricItemSuggestion(models.Model):
    """New wording for a rubric item: from a consultation resolved as a guideline gap, or sent by a PM
    from the judge's per-item page (then `consultation` is empty and `judge_run` says which run's figures)."""

    class Status(models.TextChoices):
        OPEN = "open", pgettext_lazy("suggestion state", "Open")
        TAKEN = "taken", _("Taken into the draft")
        DISMISSED = "dismissed", _("Dismissed")

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="item_suggestions")
    item_key = models.CharField(max_length=110)
    text = models.TextField()
    consultation = models.ForeignKey(Consultation, on_delete=models.CASCADE, related_name="suggestions", null=True,
                                     blank=True)
    judge_run = models.ForeignKey("annotation.JudgeRun", on_delete=models.SET_NULL, null=True, blank=True,
                                  related_name="+")
    # The per-item figures the PM saw when sending it (strict / zone-aware agreement, units).
    figures = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "status"], name="item_suggestion_status_idx")]

    def __str__(self) -> str:
        return f"suggestion for {self.item_key} ({self.status})"
