"""The standard experts judge against: dimensions, rubric versions and their items."""
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _


class Category(models.TextChoices):
    PERSONALITY = "personality", _("Personality")
    EMOTION = "emotion", _("Emotion")
    SOCIAL = "social", _("Social")
    MOTIVATION = "motivation", _("Motivation")
    MORALITY = "morality", _("Morality")
    GATE = "gate", _("Gate")


class Dimension(models.Model):
    """One ability of the HeartBench taxonomy (or the gate dimension "其他")."""

    code = models.SlugField(max_length=40, unique=True)
    name_zh = models.CharField(max_length=40, unique=True)
    name_en = models.CharField(max_length=60)
    category = models.CharField(max_length=20, choices=Category.choices)
    is_gate = models.BooleanField(default=False)
    sort_order = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["sort_order", "code"]

    def __str__(self) -> str:
        return f"{self.name_zh} / {self.name_en}"

    @property
    def display_name(self) -> str:
        return self.name_en if (get_language() or "").startswith("en") else self.name_zh


class Rubric(models.Model):
    """The rubric of one project: a sequence of versions."""

    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class RubricVersion(models.Model):
    """A numbered version of a rubric; once published it never changes (a trigger refuses)."""

    class Status(models.TextChoices):
        DRAFT = "draft", _("Draft")
        PUBLISHED = "published", _("Published")

    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.DRAFT)
    changelog = models.TextField(blank=True)
    # Markdown for the experts (rendered by rubrics.guidelines); published with the items,
    # so the database trigger that freezes a published version freezes its guidelines too.
    guidelines = models.TextField(blank=True, default="", db_default="")
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    # Who published it (the changelog's author); empty for versions published before this was kept
    # and for imports run from the command line.
    # PROTECT, not SET_NULL: clearing it would rewrite a published row, which the trigger refuses.
    published_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                     related_name="+")

    class Meta:
        ordering = ["rubric_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["rubric", "number"], name="rubric_version_number_unique"),
            models.UniqueConstraint(
                fields=["rubric"], condition=Q(status="draft"), name="rubric_one_draft_version"
            ),
            models.CheckConstraint(
                condition=Q(status="draft", published_at__isnull=True)
                | Q(status="published", published_at__isnull=False),
                name="rubric_version_published_at_matches_status",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.rubric} v{self.number} ({self.status})"

    @property
    def is_published(self) -> bool:
        return self.status == self.Status.PUBLISHED


class RubricItem(models.Model):
    """One criterion for one question, judged hit/miss.

    `item_key` is stable across versions: the question id and the 1-based position.
    A positive score credits, a negative one penalises; a hit always means "the
    criterion is present". Gate items ("其他") carry no score.
    """

    # No index of its own on the version: both unique constraints below lead with it. Neither
    # reference is a foreign key constraint on PostgreSQL: triggers check them once per statement
    # (migration 0007), with the same locks and the same error.
    version = models.ForeignKey(RubricVersion, on_delete=models.PROTECT, related_name="items", db_index=False,
                                db_constraint=False)
    question_ref = models.CharField(max_length=100, db_index=True)
    position = models.PositiveSmallIntegerField()
    item_key = models.CharField(max_length=110)
    dimension = models.ForeignKey(Dimension, on_delete=models.PROTECT, related_name="items", db_constraint=False)
    score = models.IntegerField(null=True, blank=True)
    content = models.TextField()
    tags = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["version_id", "question_ref", "position"]
        constraints = [
            models.UniqueConstraint(fields=["version", "item_key"], name="rubric_item_key_unique"),
            models.UniqueConstraint(
                fields=["version", "question_ref", "position"], name="rubric_item_position_unique"
            ),
            models.CheckConstraint(condition=Q(position__gte=1), name="rubric_item_position_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.item_key} [{self.dimension.name_zh}][{self.score}]"

    @property
    def is_gate(self) -> bool:
        return self.score is None
