"""Shared knowledge of a project: the case library (agreed readings of disputed items) and the FAQ.

A case links rubric items by their stable `item_key` (and the question's external id),
never by a foreign key to one version's `RubricItem` row, so it keeps pointing at the
same criterion when a new rubric version is published. The text columns that search
reads carry trigram indexes on PostgreSQL (see the migration and annotation.library.search).
"""
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from .project import Project, Question

# Limits the services enforce and the forms announce (characters).
TITLE_MAX = 200
TEXT_MAX = 10_000
FAQ_QUESTION_MAX = 2_000
FAQ_ANSWER_MAX = 10_000
SCENE_MAX = 100


class CaseOutcome(models.TextChoices):
    """What the experts agreed the item's label is on the case's reply."""

    HIT = "hit", _("Hit")
    MISS = "miss", _("Miss")
    AMBIGUOUS = "ambiguous", _("Item is ambiguous")


class CaseStatus(models.TextChoices):
    DRAFT = "draft", _("Draft")
    PUBLISHED = "published", _("Published")


class Case(models.Model):
    """A reference case: a disputed judgement, how the experts reached an agreed reading, and where it applies.

    Experts read only published cases; PMs write and publish them. `read_count` is the
    number of distinct readers (one `CaseRead` per user), so "most read" means most readers.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="cases")
    title = models.CharField(max_length=TITLE_MAX)
    problem = models.TextField()
    disagreement = models.TextField(blank=True)
    discussion = models.TextField(blank=True)
    reading = models.TextField(help_text="The agreed reading of the item.")
    outcome = models.CharField(max_length=10, choices=CaseOutcome.choices, blank=True)
    question = models.ForeignKey(Question, on_delete=models.SET_NULL, null=True, blank=True, related_name="cases")
    # The resolved consultation the case was written from, if any (one case per consultation).
    consultation = models.OneToOneField("annotation.Consultation", on_delete=models.SET_NULL, null=True, blank=True,
                                        related_name="case")
    scenes = models.JSONField(default=list, blank=True)
    dimensions = models.ManyToManyField("rubrics.Dimension", blank=True, related_name="cases")
    status = models.CharField(max_length=10, choices=CaseStatus.choices, default=CaseStatus.DRAFT)
    read_count = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    published_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                     related_name="+")
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-published_at", "-id"]
        indexes = [
            models.Index(fields=["project", "status", "-read_count"], name="case_project_most_read_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=CaseStatus.values), name="case_status_known"),
            models.CheckConstraint(condition=Q(outcome="") | Q(outcome__in=CaseOutcome.values),
                                   name="case_outcome_known"),
            models.CheckConstraint(
                condition=Q(status=CaseStatus.DRAFT, published_at__isnull=True)
                | Q(status=CaseStatus.PUBLISHED, published_at__isnull=False),
                name="case_published_at_matches_status"),
        ]

    def __str__(self) -> str:
        return f"case {self.pk} {self.title} (project {self.project_id})"

    @property
    def is_published(self) -> bool:
        return self.status == CaseStatus.PUBLISHED


class CaseItem(models.Model):
    """A rubric item a case applies to, by its stable key (the same in every rubric version)."""

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="items")
    item_key = models.CharField(max_length=110)
    question_ref = models.CharField(max_length=100, help_text="The question's external id.")

    class Meta:
        ordering = ["case_id", "question_ref", "item_key"]
        indexes = [models.Index(fields=["item_key"], name="case_item_key_idx")]
        constraints = [models.UniqueConstraint(fields=["case", "item_key"], name="case_item_unique")]

    def __str__(self) -> str:
        return f"{self.item_key} in case {self.case_id}"


class CaseRead(models.Model):
    """A user read a published case (the first time only: a reader counts once)."""

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="reads")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    read_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["case", "user"], name="case_read_once_per_user")]

    def __str__(self) -> str:
        return f"user {self.user_id} read case {self.case_id}"


class FaqEntry(models.Model):
    """A question an expert asked about the guidelines, and the answer of a senior expert or a PM."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="faq_entries")
    question = models.TextField()
    asked_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    asked_at = models.DateTimeField()
    # Where it was asked from, when from the annotation page: the task's question and item.
    source_question = models.ForeignKey(Question, on_delete=models.SET_NULL, null=True, blank=True,
                                        related_name="faq_entries")
    item_key = models.CharField(max_length=110, blank=True)
    dimensions = models.ManyToManyField("rubrics.Dimension", blank=True, related_name="faq_entries")
    scenes = models.JSONField(default=list, blank=True)
    answer = models.TextField(blank=True)
    answered_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+")
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "FAQ entry"
        verbose_name_plural = "FAQ entries"
        ordering = ["-answered_at", "-asked_at", "-id"]
        indexes = [models.Index(fields=["project", "answered_at"], name="faq_project_answered_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(answer="", answered_at__isnull=True) | (~Q(answer="") & Q(answered_at__isnull=False)),
                name="faq_answered_at_matches_answer"),
        ]

    def __str__(self) -> str:
        return f"FAQ {self.pk} (project {self.project_id})"

    @property
    def is_answered(self) -> bool:
        return self.answered_at is not None
