"""Projects and the material experts judge: questions (dialogues) and model responses."""
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db import models, transaction
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from experts.models import Tier


class Difficulty(models.TextChoices):
    NORMAL = "normal", _("Normal")
    HARD = "hard", _("Hard")


@dataclass(frozen=True)
class SettingRange:
    """The whole numbers one project setting accepts, and its default.

    The one definition that the model's default and check constraints, the services'
    validation (`project_create`, `project_quality_update`) and the API serializers read,
    so that no layer accepts what another refuses.
    """

    name: str
    low: int
    high: int | None  # None: no upper bound
    default: int

    def contains(self, value: int) -> bool:
        return self.low <= value and (self.high is None or value <= self.high)


OVERLAP = SettingRange("overlap", 1, 9, 3)
# A lease longer than a week is no lease; the bound also keeps the value inside a database integer.
LEASE_TIMEOUT_S = SettingRange("lease_timeout_s", 60, 7 * 24 * 3600, 45 * 60)
CALIBRATION_THRESHOLD_PCT = SettingRange("calibration_threshold_pct", 0, 100, 80)
CALIBRATION_SIZE = SettingRange("calibration_size", 10, 20, 10)
CALIBRATION_RETRY_DELAY_S = SettingRange("calibration_retry_delay_s", 0, 30 * 24 * 3600, 60 * 60)
CONTROL_RATE_PCT = SettingRange("control_rate_pct", 0, 100, 5)
CONTROL_PAUSE_BELOW_PCT = SettingRange("control_pause_below_pct", 0, 100, 60)
CONTROL_WINDOW = SettingRange("control_window", 1, 200, 10)
# Extra experts a task may get, one at a time, while its panel leaves an item tied.
TIE_EXTRA_CAP = SettingRange("tie_extra_cap", 0, 5, 2)
# Days an expert has to contest a rejection or a statement line (payments.appeals).
APPEAL_WINDOW_DAYS = SettingRange("appeal_window_days", 1, 90, 7)
# Consultations (annotation.consultations): when one opens by itself, and how long its blind vote runs.
CONSULT_SPLIT_MIN_SCORE = SettingRange("consult_split_min_score", 1, 100, 5)
CONSULT_SPLIT_SHARE_PCT = SettingRange("consult_split_share_pct", 1, 99, 33)
CONSULT_DEADLINE_H = SettingRange("consult_deadline_h", 1, 30 * 24, 72)
# Review flags (annotation.review): a submission faster than this per item is flagged (0: off); a run
# of this many submissions in a row, each with every item the same value, is flagged (0: off).
MIN_SECONDS_PER_ITEM = SettingRange("min_seconds_per_item", 0, 600, 3)
REVIEW_RUN_LENGTH = SettingRange("review_run_length", 0, 100, 5)
# Reminders (annotation.review.reminders): minutes before a lease ends; idle days before an expert
# with work left is reminded (0: off).
REMIND_LEASE_MINUTES = SettingRange("remind_lease_minutes", 1, 120, 10)
REMIND_IDLE_DAYS = SettingRange("remind_idle_days", 0, 60, 3)
# The quality dashboard's bar for the judge: its headline agreement with the panel, in percent.
JUDGE_AGREEMENT_BAR_PCT = SettingRange("judge_agreement_bar_pct", 0, 100, 75)
QUALITY_SETTINGS = (CALIBRATION_THRESHOLD_PCT, CALIBRATION_SIZE, CALIBRATION_RETRY_DELAY_S, CONTROL_RATE_PCT,
                    CONTROL_PAUSE_BELOW_PCT, CONTROL_WINDOW)


class FillOrder(models.TextChoices):
    """How "next task" spreads work over a project's tasks (`annotation.assignment.services`)."""

    # Tasks someone already started (a submission or a live lease) are drawn first, so panels
    # complete and consensus arrives steadily; random among equals, so nobody picks the panel.
    FINISH_STARTED = "finish_started", _("Finish started tasks first")
    # Every open task equally likely: work spreads thinly and tasks complete late.
    SPREAD_EVENLY = "spread_evenly", _("Spread evenly")


class ConsensusLabels(models.TextChoices):
    """Which expert labels consensus and reports read once experts may revise after the judge's reveal."""

    # The expert's label as submitted, before they saw the judge: the blind judgement.
    FIRST = "first", _("First labels (as submitted, before the reveal)")
    # The label after the one revision round, where the expert revised; the first label elsewhere.
    REVISED = "revised", _("Revised labels (after the reveal)")


class ProjectState(models.TextChoices):
    """Where a project is in its life: only an active one hands out new leases."""

    ACTIVE = "active", _("Active")
    PAUSED = "paused", _("Paused")
    CLOSED = "closed", _("Closed")


class Project(models.Model):
    """An evaluation project: one rubric, its questions, responses and the experts' work.

    Members are granted the guardian object permissions below; a PM reaches only the
    projects they manage, an expert only those they annotate in.
    """

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    rubric = models.OneToOneField("rubrics.Rubric", on_delete=models.PROTECT, related_name="project")
    overlap = models.PositiveSmallIntegerField(default=OVERLAP.default)
    lease_timeout_s = models.PositiveIntegerField(default=LEASE_TIMEOUT_S.default)
    # Expert quality (calibration, control tasks, difficulty gate): see annotation.calibration.
    # The ranges in the help texts are translated strings; tests hold them to the ranges above.
    calibration_threshold_pct = models.PositiveSmallIntegerField(
        default=CALIBRATION_THRESHOLD_PCT.default,
        help_text=_("Share of golden items an expert must get right to pass calibration (0–100)."))
    calibration_size = models.PositiveSmallIntegerField(
        default=CALIBRATION_SIZE.default, help_text=_("Golden tasks drawn for one calibration attempt (10–20)."))
    calibration_retry_delay_s = models.PositiveIntegerField(
        default=CALIBRATION_RETRY_DELAY_S.default,
        help_text=_("Seconds a failed calibration waits before it can be retried."))
    control_rate_pct = models.PositiveSmallIntegerField(
        default=CONTROL_RATE_PCT.default, help_text=_("Share of leases that are silent control tasks (0–100)."))
    control_pause_below_pct = models.PositiveSmallIntegerField(
        default=CONTROL_PAUSE_BELOW_PCT.default,
        help_text=_("An expert whose control-task accuracy over the window falls below this is paused."))
    control_window = models.PositiveSmallIntegerField(
        default=CONTROL_WINDOW.default, help_text=_("Control tasks the pause rule looks back over."))
    hard_min_tier = models.CharField(
        max_length=10, default=Tier.SILVER, choices=Tier.choices,
        help_text=_("Lowest tier that takes hard tasks."))
    fill_order = models.CharField(
        max_length=16, choices=FillOrder.choices, default=FillOrder.FINISH_STARTED,
        help_text=_("Whether experts get tasks others already started first, or any open task at random."))
    # Ties (an even panel split evenly): one more expert is drawn, up to the cap per task.
    tie_extra_experts = models.BooleanField(
        default=True, help_text=_("Draw one more expert for a task whose panel leaves an item tied."))
    tie_extra_cap = models.PositiveSmallIntegerField(
        default=TIE_EXTRA_CAP.default, help_text=_("Most extra experts one task may get to resolve ties (0–5)."))
    appeal_window_days = models.PositiveSmallIntegerField(
        default=APPEAL_WINDOW_DAYS.default,
        help_text=_("Days an expert has to contest a rejection or a statement line (1–90)."))
    # Consultations open by themselves on: a tie the extra experts could not break; a split on an
    # item whose |score| reaches the threshold; every split item of a task whose share of split
    # items is above the percentage. Each rule can be switched off.
    consult_on_unbroken_tie = models.BooleanField(
        default=True, help_text=_("Open a consultation on a tie the extra experts could not break."))
    consult_on_score_split = models.BooleanField(
        default=True, help_text=_("Open a consultation on a split item whose |score| reaches the threshold."))
    consult_split_min_score = models.PositiveSmallIntegerField(
        default=CONSULT_SPLIT_MIN_SCORE.default,
        help_text=_("Lowest |score| of an item whose split opens a consultation (1–100)."))
    consult_on_many_splits = models.BooleanField(
        default=True, help_text=_("Open consultations on a task where many of the items split."))
    consult_split_share_pct = models.PositiveSmallIntegerField(
        default=CONSULT_SPLIT_SHARE_PCT.default,
        help_text=_("A task whose share of split items is above this opens a consultation on each (1–99)."))
    consult_deadline_h = models.PositiveSmallIntegerField(
        default=CONSULT_DEADLINE_H.default,
        help_text=_("Hours the blind vote of a consultation runs before the votes are revealed (1–720)."))
    consult_show_judge = models.BooleanField(
        default=False, help_text=_("Show the judge's label and reason when a consultation's votes are revealed."))
    # Reveal after submission (annotation.reveal): an expert who submitted sees the judge's label and
    # reason where they differ and may revise once; Label.value keeps the first label for ever.
    judge_reveal = models.BooleanField(
        default=False, help_text=_("Show the judge's labels to experts after they submit"))
    consensus_labels = models.CharField(
        max_length=8, choices=ConsensusLabels.choices, default=ConsensusLabels.FIRST,
        help_text=_("Which labels consensus and reports use: the first ones, or those revised after the reveal."))
    judge_agreement_bar_pct = models.PositiveSmallIntegerField(
        default=JUDGE_AGREEMENT_BAR_PCT.default,
        help_text=_("Headline judge agreement with the panel majority the judge must reach to be trusted (0–100)."))
    due_date = models.DateField(null=True, blank=True)
    min_seconds_per_item = models.PositiveSmallIntegerField(
        default=MIN_SECONDS_PER_ITEM.default,
        help_text=_("A submission faster than this many seconds per item is flagged for review (0: off)."))
    review_run_length = models.PositiveSmallIntegerField(
        default=REVIEW_RUN_LENGTH.default,
        help_text=_("This many submissions in a row with every item the same value are flagged (0: off)."))
    review_repeated_notes = models.BooleanField(
        default=True, help_text=_("Flag a note an expert repeats word for word on another task."))
    remind_lease_expiring = models.BooleanField(
        default=True, help_text=_("Remind an expert before their lease of a task ends."))
    remind_lease_minutes = models.PositiveSmallIntegerField(
        default=REMIND_LEASE_MINUTES.default, help_text=_("Minutes before a lease ends that the reminder goes."))
    remind_idle_days = models.PositiveSmallIntegerField(
        default=REMIND_IDLE_DAYS.default,
        help_text=_("Remind an expert idle this many days while work is left (0: off)."))
    alert_quality = models.BooleanField(
        default=True, help_text=_("Tell the PMs of a drift alert or a fall in an expert's control accuracy."))
    alert_deadline_risk = models.BooleanField(
        default=True, help_text=_("Tell the PMs when the forecast finish passes the due date."))
    # Set when a PM gives tasks a priority (`annotation.assignment.manual.tasks_set_priority`): only then
    # does the claim look for the top priority first, so a project without priorities pays no query for it.
    has_priorities = models.BooleanField(default=False)
    # Paused: no new leases, open ones can still be submitted. Closed: read-only (exports
    # and reports still work). Archived: a closed project hidden from the project lists.
    state = models.CharField(max_length=10, choices=ProjectState.choices, default=ProjectState.ACTIVE)
    archived_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        permissions = [
            ("manage_project", "Can manage the project (PM)"),
            ("annotate_project", "Can annotate in the project (expert)"),
        ]
        # The ranges above, where the database checks them: a lower bound of 0 is the
        # unsigned column's own check, and the upper bounds of the retry delay and the
        # control window are the service's alone (a check for them would be a schema change).
        constraints = [
            models.CheckConstraint(condition=Q(overlap__gte=OVERLAP.low, overlap__lte=OVERLAP.high),
                                   name="project_overlap_range"),
            models.CheckConstraint(condition=Q(lease_timeout_s__gte=LEASE_TIMEOUT_S.low),
                                   name="project_lease_timeout_min"),
            models.CheckConstraint(condition=Q(lease_timeout_s__lte=LEASE_TIMEOUT_S.high),
                                   name="project_lease_timeout_max"),
            models.CheckConstraint(condition=Q(calibration_threshold_pct__lte=CALIBRATION_THRESHOLD_PCT.high),
                                   name="project_calibration_threshold_range"),
            models.CheckConstraint(condition=Q(calibration_size__gte=CALIBRATION_SIZE.low,
                                               calibration_size__lte=CALIBRATION_SIZE.high),
                                   name="project_calibration_size_range"),
            models.CheckConstraint(condition=Q(control_rate_pct__lte=CONTROL_RATE_PCT.high),
                                   name="project_control_rate_range"),
            models.CheckConstraint(condition=Q(control_pause_below_pct__lte=CONTROL_PAUSE_BELOW_PCT.high),
                                   name="project_control_pause_range"),
            models.CheckConstraint(condition=Q(control_window__gte=CONTROL_WINDOW.low),
                                   name="project_control_window_positive"),
            models.CheckConstraint(condition=Q(tie_extra_cap__lte=TIE_EXTRA_CAP.high),
                                   name="project_tie_extra_cap_range"),
            models.CheckConstraint(condition=Q(appeal_window_days__gte=APPEAL_WINDOW_DAYS.low,
                                               appeal_window_days__lte=APPEAL_WINDOW_DAYS.high),
                                   name="project_appeal_window_range"),
            models.CheckConstraint(condition=Q(consult_split_min_score__gte=CONSULT_SPLIT_MIN_SCORE.low,
                                               consult_split_min_score__lte=CONSULT_SPLIT_MIN_SCORE.high),
                                   name="project_consult_score_range"),
            models.CheckConstraint(condition=Q(consult_split_share_pct__gte=CONSULT_SPLIT_SHARE_PCT.low,
                                               consult_split_share_pct__lte=CONSULT_SPLIT_SHARE_PCT.high),
                                   name="project_consult_share_range"),
            models.CheckConstraint(condition=Q(consult_deadline_h__gte=CONSULT_DEADLINE_H.low,
                                               consult_deadline_h__lte=CONSULT_DEADLINE_H.high),
                                   name="project_consult_deadline_range"),
            models.CheckConstraint(condition=Q(min_seconds_per_item__lte=MIN_SECONDS_PER_ITEM.high),
                                   name="project_min_seconds_per_item_range"),
            models.CheckConstraint(condition=Q(review_run_length__lte=REVIEW_RUN_LENGTH.high),
                                   name="project_review_run_length_range"),
            models.CheckConstraint(condition=Q(remind_lease_minutes__gte=REMIND_LEASE_MINUTES.low,
                                               remind_lease_minutes__lte=REMIND_LEASE_MINUTES.high),
                                   name="project_remind_lease_minutes_range"),
            models.CheckConstraint(condition=Q(remind_idle_days__lte=REMIND_IDLE_DAYS.high),
                                   name="project_remind_idle_days_range"),
            models.CheckConstraint(condition=Q(judge_agreement_bar_pct__lte=JUDGE_AGREEMENT_BAR_PCT.high),
                                   name="project_judge_bar_range"),
            models.CheckConstraint(condition=Q(state__in=ProjectState.values), name="project_state_known"),
            models.CheckConstraint(condition=Q(fill_order__in=FillOrder.values), name="project_fill_order_known"),
            models.CheckConstraint(condition=Q(consensus_labels__in=ConsensusLabels.values),
                                   name="project_consensus_labels_known"),
            models.CheckConstraint(condition=Q(archived_at__isnull=True) | Q(state=ProjectState.CLOSED),
                                   name="project_archived_only_closed"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.name}"

    @property
    def is_closed(self) -> bool:
        return self.state == ProjectState.CLOSED

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None


class ProjectSettingChange(models.Model):
    """One change of one project setting: who, when, the value before and after. Append-only.

    Values are stored as the text the settings page shows (a date as YYYY-MM-DD, a number
    as its digits), so the history reads the same after the setting's type changes.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="setting_changes")
    setting = models.CharField(max_length=40)
    old_value = models.TextField(blank=True)
    new_value = models.TextField(blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    changed_at = models.DateTimeField()

    class Meta:
        ordering = ["-changed_at", "-id"]
        indexes = [models.Index(fields=["project", "-changed_at"], name="setting_change_project_idx")]

    def __str__(self) -> str:
        return f"{self.setting}: {self.old_value} → {self.new_value} (project {self.project_id})"


def question_search_text(dialogue: object, final_user_turn: str) -> str:
    """What the board's search reads of a question: each earlier turn's content and the final
    user turn, one a line, upper-cased (the search upper-cases the term the same way, so a
    case-insensitive match is a plain `LIKE` that the trigram index serves)."""
    turns = dialogue if isinstance(dialogue, list) else []
    contents = [str(t.get("content") or "") if isinstance(t, dict) else "" for t in turns]
    return "\n".join([*contents, final_user_turn or ""]).upper()


class QuestionQuerySet(models.QuerySet):
    def bulk_create(self, objs, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        """Write each question's search row too, as `save` does (clones and the demo create in bulk;
        an import writes none and leaves them to its follow-up task)."""
        with transaction.atomic(using=self.db, savepoint=False):
            created = super().bulk_create(objs, *args, **kwargs)
            QuestionSearch.objects.using(self.db).bulk_create(
                question_search_rows(q for q in created if q.pk is not None), batch_size=2000)
        return created

    def update(self, **kwargs):  # type: ignore[no-untyped-def]
        """An UPDATE of the dialogue or the final turn rewrites the changed rows' search text too."""
        if not {"dialogue", "final_user_turn"} & set(kwargs):
            return super().update(**kwargs)
        with transaction.atomic(using=self.db):
            pks = list(self.values_list("pk", flat=True))
            count = super().update(**kwargs)
            changed = self.model.objects.using(self.db).filter(pk__in=pks).only("pk", "dialogue", "final_user_turn")
            question_search_write(changed, using=self.db)
        return count


def question_search_rows(questions: "Iterable[Question]") -> list["QuestionSearch"]:
    """The search rows of `questions`, unsaved (every writer of search rows builds them here)."""
    return [QuestionSearch(question_id=q.pk, text=question_search_text(q.dialogue, q.final_user_turn))
            for q in questions]


def question_search_write(questions: "Iterable[Question]", *, using: str = "default") -> int:
    """Write (or rewrite) the search rows of `questions`; returns how many were written."""
    rows = question_search_rows(questions)
    QuestionSearch.objects.using(using).bulk_create(rows, batch_size=2000, update_conflicts=True,
                                                    unique_fields=["question"], update_fields=["text"])
    return len(rows)


class Question(models.Model):
    """A dialogue whose final user turn the model answered."""

    class SourceFormat(models.TextChoices):
        HEARTBENCH = "heartbench", "HeartBench"
        HEALTHBENCH = "healthbench", "HealthBench"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="questions")
    external_id = models.CharField(max_length=100)
    dialogue = models.JSONField(help_text="Earlier turns: [{role: A|B, content}] without the final user turn.")
    final_user_turn = models.TextField()
    difficulty = models.CharField(max_length=10, choices=Difficulty.choices, default=Difficulty.NORMAL)
    primary_scene = models.CharField(max_length=100, blank=True)
    secondary_scene = models.CharField(max_length=100, blank=True)
    source_format = models.CharField(max_length=12, choices=SourceFormat.choices, default=SourceFormat.HEARTBENCH)
    # Derived from the dialogue and the final turn on every save and bulk create (never edited):
    # the board searches it instead of casting every dialogue's JSON to text.
    # Outside the project's active blind-test sample: the judge labels it, experts are never offered
    # its tasks (annotation.blind_test). Kept on the question so that tasks created later inherit it.
    # db_default: the questions import writes rows with COPY, naming only the columns it fills.
    judge_only = models.BooleanField(default=False, db_default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = QuestionQuerySet.as_manager()

    class Meta:
        ordering = ["project_id", "external_id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "external_id"], name="question_external_id_unique"),
        ]
        # A project's judge-only questions (a blind test's complement): none without a blind test, so
        # counting their tasks starts from an empty index range.
        indexes = [models.Index(fields=["project"], condition=Q(judge_only=True), name="question_judge_only_idx")]

    def __str__(self) -> str:
        return f"{self.external_id} (project {self.project_id})"

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        """Saved with its search row, unless the save changes neither the dialogue nor the final turn."""
        update_fields = kwargs.get("update_fields")
        using = kwargs.get("using") or self._state.db or "default"
        with transaction.atomic(using=using, savepoint=False):
            super().save(*args, **kwargs)
            if update_fields is None or {"dialogue", "final_user_turn"} & set(update_fields):
                question_search_write([self], using=using)

    def full_dialogue(self) -> list[dict]:
        """The dialogue as imported: earlier turns plus the final user turn."""
        return [*self.dialogue, {"role": "A", "content": self.final_user_turn}]


class QuestionSearch(models.Model):
    """What the board's search reads of one question (`question_search_text`), in its own table.

    Kept apart from the question so that an import does not pay for the trigram index: an
    import writes no search rows, and its follow-up task (`annotation.question_search_index`)
    writes them after commit. Until then the board says how many questions its search does not
    cover yet. Everything else that creates or changes a question writes its row at once.
    """

    question = models.OneToOneField(Question, on_delete=models.CASCADE, primary_key=True, related_name="search")
    text = models.TextField()

    def __str__(self) -> str:
        return f"search text of question {self.question_id}"


class Response(models.Model):
    """One model's reply to a question. The model name never reaches an expert before they submit."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="responses")
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="responses")
    model_name = models.CharField(max_length=200)
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["question_id", "model_name"]
        constraints = [
            models.UniqueConstraint(fields=["question", "model_name"], name="response_question_model_unique"),
        ]

    def __str__(self) -> str:
        return f"response {self.pk} to {self.question_id}"
