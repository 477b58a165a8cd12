"""The work: tasks, leases (assignments), drafts, labels and per-item consensus."""
from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

PRIORITY_MAX = 100


class Task(models.Model):
    """One response judged under one rubric version by `overlap` distinct experts.

    `live_count` counts leased + submitted assignments and `submitted_count` the
    submitted ones; both change only under a row lock in the assignment services, and
    the database refuses values outside 0..overlap.
    """

    class Status(models.TextChoices):
        OPEN = "open", pgettext_lazy("task state", "Open")
        FULL = "full", _("All slots leased")
        COMPLETE = "complete", _("Complete")
        # Left behind by a rubric version that changed its question's items before the task was
        # complete: never offered again, its labels kept for audit (the new version has its own task).
        SUPERSEDED = "superseded", _("Superseded")

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="tasks")
    response = models.ForeignKey("annotation.Response", on_delete=models.CASCADE, related_name="tasks")
    rubric_version = models.ForeignKey("rubrics.RubricVersion", on_delete=models.PROTECT, related_name="tasks")
    overlap = models.PositiveSmallIntegerField()
    live_count = models.PositiveSmallIntegerField(default=0)
    submitted_count = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    # A random position on a ring: claiming reads the first open task past a random
    # point through an index, which is O(log n) where ORDER BY random() is O(n).
    shuffle_key = models.BigIntegerField()
    is_golden = models.BooleanField(default=False)
    # Slots added beyond the panel because a complete panel left an item tied (counted in `overlap`).
    extra_slots = models.PositiveSmallIntegerField(default=0)
    # Set by a PM for urgent work: the claim draws the highest priority first, still at random
    # among tasks of equal priority (`annotation.assignment.services`).
    priority = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["response", "rubric_version"], name="task_response_version_unique"),
            models.CheckConstraint(condition=Q(live_count__lte=F("overlap")), name="task_live_within_overlap"),
            models.CheckConstraint(
                condition=Q(submitted_count__lte=F("live_count")), name="task_submitted_within_live"
            ),
            models.CheckConstraint(condition=Q(overlap__gte=1), name="task_overlap_positive"),
            models.CheckConstraint(condition=Q(extra_slots__lt=F("overlap")), name="task_extra_within_overlap"),
            models.CheckConstraint(condition=Q(priority__lte=PRIORITY_MAX), name="task_priority_range"),
        ]
        indexes = [
            models.Index(
                fields=["project", "rubric_version", "shuffle_key"],
                condition=Q(status="open"),
                name="task_open_ring_idx",
            ),
            # The claim's draw among the open tasks of the highest priority: the top priority is the
            # first entry, and the ring walk within one priority is the same index range scan.
            models.Index(
                fields=["project", "rubric_version", "-priority", "shuffle_key"],
                condition=Q(status="open"),
                name="task_open_priority_ring_idx",
            ),
            # "Finish started tasks first": the draw walks the ring of the open tasks someone started
            # (a submission or a live lease), which stays small however large the project.
            models.Index(
                fields=["project", "rubric_version", "shuffle_key"],
                condition=Q(status="open", live_count__gt=0),
                name="task_started_ring_idx",
            ),
            models.Index(fields=["project", "status"], name="task_project_status_idx"),
            # The PM's board pages through a project's tasks in id order (keyset paging).
            models.Index(fields=["project", "id"], name="task_project_id_idx"),
            # The golden set of a version (calibration readiness on every home page, control draws):
            # a few hundred tasks, which a scan of the project's 100,000 took 95 ms to find.
            models.Index(fields=["project", "rubric_version"], condition=Q(is_golden=True), name="task_golden_idx"),
        ]

    def __str__(self) -> str:
        return f"task {self.pk} ({self.status}, {self.live_count}/{self.overlap})"


LIVE_ASSIGNMENT_STATUSES = ("leased", "submitted")


class Assignment(models.Model):
    """A lease of one task slot to one expert.

    The database enforces the two assignment rules: one expert holds at most one
    assignment per task, ever (an expired lease still counts, so the task goes to
    someone else), and a slot number has at most one live assignment; a trigger keeps
    slot numbers within the task's overlap.
    """

    class Status(models.TextChoices):
        LEASED = "leased", _("Leased")
        SUBMITTED = "submitted", _("Submitted")
        EXPIRED = "expired", _("Expired")
        # Ended before it expired: the expert gave it back or skipped it, or left the
        # project. Unlike an expired lease it is never revived for a late submission.
        RELEASED = "released", _("Given back")
        # Submitted, then rejected by a PM: its labels stay stored but count nowhere, and its
        # slot is free again (for another expert: the expert never gets the task back).
        REJECTED = "rejected", _("Rejected")

    class RejectReason(models.TextChoices):
        SPAM = "spam", _("Spam")
        COPY_PASTE = "copy_paste", _("Copy-paste")
        GUIDELINES = "guidelines", _("Guideline violation")
        OTHER = "other", _("Other")

    class Kind(models.TextChoices):
        WORK = "work", _("Work")
        CALIBRATION = "calibration", _("Calibration")

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="assignments")
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.WORK)
    expert = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="assignments")
    slot = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.LEASED)
    leased_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    # The expert's tier when they submitted: pay and quality reports use the tier in
    # force at that moment, not today's.
    tier_at_submission = models.CharField(max_length=10, blank=True)
    rejected_at = models.DateTimeField(null=True, blank=True)
    rejected_reason = models.CharField(max_length=12, choices=RejectReason.choices, blank=True)
    rejected_text = models.TextField(blank=True)
    rejected_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+")

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "expert"], name="assignment_one_per_expert_task"),
            models.UniqueConstraint(
                fields=["task", "slot"],
                condition=Q(status__in=LIVE_ASSIGNMENT_STATUSES),
                name="assignment_live_slot_unique",
            ),
            models.CheckConstraint(condition=Q(slot__gte=1), name="assignment_slot_positive"),
            models.CheckConstraint(
                condition=Q(status__in=("submitted", "rejected"), submitted_at__isnull=False)
                | (~Q(status__in=("submitted", "rejected")) & Q(submitted_at__isnull=True)),
                name="assignment_submitted_at_matches_status",
            ),
            models.CheckConstraint(
                condition=Q(status="rejected", rejected_at__isnull=False, rejected_reason__in=[
                    "spam", "copy_paste", "guidelines", "other"])
                | (~Q(status="rejected") & Q(rejected_at__isnull=True, rejected_reason="")),
                name="assignment_rejected_matches_status",
            ),
        ]
        indexes = [
            models.Index(fields=["expert", "status"], name="assignment_expert_status_idx"),
            # The weekly capacity counts the expert's work since Monday, not their whole history.
            models.Index(fields=["expert", "submitted_at"], name="assignment_expert_week_idx"),
            models.Index(fields=["expires_at"], condition=Q(status="leased"), name="assignment_lease_expiry_idx"),
        ]

    def __str__(self) -> str:
        return f"assignment {self.pk} (task {self.task_id}, slot {self.slot}, {self.status})"


class Draft(models.Model):
    """Autosaved, unsubmitted labels of one assignment: {item_key: 0|1} and notes."""

    assignment = models.OneToOneField(Assignment, on_delete=models.CASCADE, related_name="draft")
    labels = models.JSONField(default=dict)
    notes = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"draft of assignment {self.assignment_id}"


class LabelQuerySet(models.QuerySet["Label"]):
    def counted(self) -> "LabelQuerySet":
        """Labels that count: those of rejected submissions stay stored for the audit only."""
        return self.exclude(assignment__status=Assignment.Status.REJECTED)


class Label(models.Model):
    """One expert's hit (1) or miss (0) on one rubric item of one task.

    Read them through `Label.objects.counted()` for anything that counts (consensus,
    reports, exports): a rejected submission's labels are kept but never counted.
    """

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="labels")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="labels")
    rubric_item = models.ForeignKey("rubrics.RubricItem", on_delete=models.PROTECT, related_name="labels")
    value = models.PositiveSmallIntegerField()
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = LabelQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["assignment", "rubric_item"], name="label_one_per_item"),
            models.CheckConstraint(condition=Q(value__in=[0, 1]), name="label_value_binary"),
        ]
        indexes = [models.Index(fields=["task", "rubric_item"], name="label_task_item_idx")]

    def __str__(self) -> str:
        return f"label {self.value} on item {self.rubric_item_id} (assignment {self.assignment_id})"


class ItemConsensus(models.Model):
    """The panel's verdict on one rubric item of one task, written with the last label.

    A tie (as many hit as miss votes) is no verdict: zone `tied` with no majority, never
    counted as a hit or a miss. A panel of one is `single`, never unanimous. A consultation's
    resolution (`Adjudication`) overrides the votes with provenance `adjudicated`: a tied item
    may then have a majority, and "item is ambiguous" is zone `ambiguous` with no majority
    (left out of judge agreement and scores, and counted, like a tie).
    """

    class Zone(models.TextChoices):
        UNANIMOUS = "unanimous", _("Unanimous")
        SPLIT = "split", _("Split")
        TIED = "tied", _("Tied")
        SINGLE = "single", _("Single label")
        AMBIGUOUS = "ambiguous", _("Ambiguous (adjudicated)")

    class Provenance(models.TextChoices):
        """How the verdict was reached; blank while the item is tied."""

        UNANIMOUS = "unanimous", _("Unanimous")
        MAJORITY = "majority", _("Majority")
        EXTRA_EXPERT = "extra_expert", _("Extra expert")
        ADJUDICATED = "adjudicated", _("Adjudicated")  # a consultation's resolution
        SINGLE = "single", _("Single label")

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="consensus")
    rubric_item = models.ForeignKey("rubrics.RubricItem", on_delete=models.PROTECT, related_name="consensus")
    hit_votes = models.PositiveSmallIntegerField()
    total_votes = models.PositiveSmallIntegerField()
    majority = models.PositiveSmallIntegerField(null=True, blank=True)  # None while tied
    zone = models.CharField(max_length=10, choices=Zone.choices)
    provenance = models.CharField(max_length=12, choices=Provenance.choices, blank=True)
    computed_at = models.DateTimeField()

    # Not columns, on a record `consensus_compute` just wrote: the voters' ids, in submission order, and
    # whether the item ever had a consultation of this task.
    panel: list[int] | None = None
    consulted: bool | None = None

    class Meta:
        ordering = ["task_id", "rubric_item_id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "rubric_item"], name="consensus_one_per_item"),
            models.CheckConstraint(condition=Q(hit_votes__lte=F("total_votes")), name="consensus_votes_range"),
            models.CheckConstraint(condition=Q(majority__in=[0, 1]) | Q(majority__isnull=True),
                                   name="consensus_majority_binary"),
            models.CheckConstraint(
                condition=Q(zone="tied", majority__isnull=True, provenance="")
                | Q(zone="tied", majority__isnull=False, provenance="adjudicated")
                | Q(zone="ambiguous", majority__isnull=True, provenance="adjudicated")
                | Q(zone__in=["unanimous", "split", "single"], majority__isnull=False),
                name="consensus_tied_has_no_majority",
            ),
        ]
        # The board's states and zone filter: the items of one zone (a few per cent are tied) by task.
        indexes = [models.Index(fields=["zone", "task"], name="consensus_zone_task_idx")]

    def __str__(self) -> str:
        return f"consensus {self.majority} ({self.hit_votes}/{self.total_votes}) item {self.rubric_item_id}"


class IdempotencyRecord(models.Model):
    """The stored outcome of a request sent with an Idempotency-Key, replayed on repeats."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    scope = models.CharField(max_length=100)
    request_hash = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    body = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique_per_user")]

    def __str__(self) -> str:
        return f"idempotency {self.key} ({self.scope})"
