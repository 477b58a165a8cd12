"""Who judges: accounts with a role, and expert profiles."""
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from core.db import RandomCode


class Role(models.TextChoices):
    EXPERT = "expert", _("Expert")
    PM = "pm", _("Project manager")
    ADMIN = "admin", _("Administrator")


class User(AbstractUser):
    """A platform account. The role decides which pages and endpoints it reaches."""

    role = models.CharField(max_length=10, choices=Role.choices, default=Role.EXPERT)

    class Meta(AbstractUser.Meta):
        swappable = "AUTH_USER_MODEL"

    @property
    def is_expert(self) -> bool:
        return self.role == Role.EXPERT

    @property
    def is_pm(self) -> bool:
        return self.role == Role.PM

    @property
    def is_platform_admin(self) -> bool:
        return self.role == Role.ADMIN or self.is_superuser


class Tier(models.TextChoices):
    BRONZE = "bronze", _("Bronze")
    SILVER = "silver", _("Silver")
    GOLD = "gold", _("Gold")
    PLATINUM = "platinum", _("Platinum")


TIER_ORDER = [Tier.BRONZE, Tier.SILVER, Tier.GOLD, Tier.PLATINUM]


# A deconstructible default, not a function here: migrations record it without
# importing this module (see core.db).
new_pseudonym = RandomCode(prefix="E-", nbytes=4)


class ExpertProfile(models.Model):
    """An expert's standing on the platform. `pseudonym` is what exports and peers see."""

    class Status(models.TextChoices):
        ACTIVE = "active", _("Active")
        PAUSED = "paused", _("Paused")

    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="expert_profile")
    pseudonym = models.CharField(max_length=20, unique=True, default=new_pseudonym)
    credentials = models.CharField(max_length=200, blank=True)
    languages = models.CharField(max_length=100, blank=True, default="zh")
    weekly_capacity = models.PositiveIntegerField(default=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    # Why the status last changed (an automatic pause names the project and the accuracy),
    # and when: control accuracy that paused an expert counts only from the last change on.
    status_reason = models.CharField(max_length=300, blank=True)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    tier = models.CharField(max_length=10, choices=Tier.choices, default=Tier.BRONZE)
    max_concurrent_leases = models.PositiveSmallIntegerField(default=1)
    specialties = models.ManyToManyField("rubrics.Dimension", blank=True, related_name="specialists")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(max_concurrent_leases__gte=1), name="expert_lease_limit_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pseudonym} ({self.user.username})"

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE


def tier_rank(tier: str) -> int:
    """Position of `tier` in TIER_ORDER (bronze 0 ... platinum 3)."""
    return TIER_ORDER.index(Tier(tier))


def _percent(field: str) -> Q:
    return Q(**{f"{field}__gte": 0, f"{field}__lte": 100})


class TierRule(models.Model):
    """One rule of the tier ladder, editable by admins in the Django admin.

    A *promote* rule for tier T lifts an expert from the tier just below T to T once
    every threshold is met: submitted work, golden accuracy (on at least
    `min_golden_items` judged golden items) and leave-one-out peer agreement.
    A *demote* rule for tier T drops an expert at T one tier down when their accuracy
    on their last `window` control tasks is below `demote_below_pct` (sustained low
    accuracy; a window not yet full never demotes). Bronze is the floor: it has no rules.
    """

    class Kind(models.TextChoices):
        PROMOTE = "promote", _("Promote to this tier")
        DEMOTE = "demote", _("Demote from this tier")

    tier = models.CharField(max_length=10, choices=Tier.choices)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    min_completed = models.PositiveIntegerField(default=0, help_text=_("Promote: submitted tasks, all projects."))
    min_golden_accuracy_pct = models.PositiveSmallIntegerField(default=0)
    min_golden_items = models.PositiveIntegerField(
        default=20, help_text=_("Promote: golden items judged before golden accuracy counts."))
    min_peer_agreement_pct = models.PositiveSmallIntegerField(default=0)
    demote_below_pct = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text=_("Demote: control-task accuracy below this over the window."))
    window = models.PositiveSmallIntegerField(default=20, help_text=_("Demote: the last N control tasks."))
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["kind", "tier"]
        constraints = [
            models.UniqueConstraint(fields=["tier", "kind"], name="tier_rule_one_per_tier_kind"),
            models.CheckConstraint(condition=~Q(tier="bronze"), name="tier_rule_not_bronze"),
            models.CheckConstraint(condition=_percent("min_golden_accuracy_pct"), name="tier_rule_golden_pct"),
            models.CheckConstraint(condition=_percent("min_peer_agreement_pct"), name="tier_rule_peer_pct"),
            models.CheckConstraint(
                condition=Q(demote_below_pct__isnull=True) | _percent("demote_below_pct"), name="tier_rule_demote_pct"),
            models.CheckConstraint(
                condition=Q(kind="promote") | Q(demote_below_pct__isnull=False), name="tier_rule_demote_has_threshold"),
            models.CheckConstraint(condition=Q(window__gte=1), name="tier_rule_window_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.get_tier_display()}"


class TierChange(models.Model):
    """One entry of an expert's tier history: from, to, why, when and by whom (null: the rules)."""

    profile = models.ForeignKey(ExpertProfile, on_delete=models.CASCADE, related_name="tier_changes")
    from_tier = models.CharField(max_length=10, choices=Tier.choices)
    to_tier = models.CharField(max_length=10, choices=Tier.choices)
    reason = models.TextField()
    # An automatic change's reason as a code and its numbers, rendered in the reader's
    # language (experts.tier_reasons); blank for changes by hand and for older rows.
    reason_code = models.CharField(max_length=40, blank=True, default="")
    reason_params = models.JSONField(default=dict, blank=True)
    rule = models.ForeignKey(TierRule, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    changed_at = models.DateTimeField()
    changed_by = models.ForeignKey(User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")

    class Meta:
        ordering = ["-changed_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=~Q(from_tier=models.F("to_tier")), name="tier_change_changes"),
        ]

    def __str__(self) -> str:
        return f"{self.profile.pseudonym}: {self.from_tier} → {self.to_tier}"


class Notification(models.Model):
    """A message to one user, shown in their notification list until read.

    `message` is the English text (admin, API); pages render `kind` with `params` in
    the reader's language (see `experts.notifications`).
    """

    class Kind(models.TextChoices):
        # Every kind with a template in `experts.notifications.TEMPLATES`, which says its params.
        RUBRIC_PUBLISHED = "rubric_published", _("Calibration required (the rubric changed)")
        EXPERT_PAUSED = "expert_paused", _("An expert was paused")
        ACCOUNT_PAUSED = "account_paused", _("My account was paused")
        TASK_SUPERSEDED = "task_superseded", _("A task I held was superseded")
        TIER_CHANGED = "tier_changed", _("Tier changed")
        STATEMENT_ISSUED = "statement_issued", _("Statement issued")
        SUBMISSION_REJECTED = "submission_rejected", _("Submission rejected")
        SUBMISSION_RETURNED = "submission_returned", _("A submission was returned to me to fix")
        LEASE_EXPIRING = "lease_expiring", _("My lease of a task is about to end")
        EXPERT_IDLE = "expert_idle", _("Work is waiting while I am away")
        QUALITY_ALERT = "quality_alert", _("An expert's quality alert")
        DEADLINE_RISK = "deadline_risk", _("A project may miss its due date")
        MENTION = "mention", _("Someone mentioned me")
        CONSULTATION_VOTE = "consultation_vote", _("A consultation needs my vote")
        CONSULTATION_REVEALED = "consultation_revealed", _("Consultation votes revealed")
        CONSULTATION_RESOLVED = "consultation_resolved", _("A consultation I took part in is resolved")
        FAQ_ASKED = "faq_asked", _("A guidelines question waits for an answer")
        FAQ_ANSWERED = "faq_answered", _("My question was answered")
        APPEAL_DECIDED = "appeal_decided", _("My appeal was decided")
        JUDGE_DRIFT = "judge_drift", _("A judge run's labels drifted from an earlier run")

    class EmailStatus(models.TextChoices):
        # The email outbox: "" when the reader did not ask for email of this kind.
        NONE = "", _("Not emailed")
        PENDING = "pending", _("Email pending")
        SENT = "sent", _("Email sent")
        FAILED = "failed", _("Email failed")

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=30, choices=Kind.choices)
    message = models.TextField()
    params = models.JSONField(default=dict, blank=True)
    link = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField()
    read_at = models.DateTimeField(null=True, blank=True)
    email_status = models.CharField(max_length=8, choices=EmailStatus.choices, default=EmailStatus.NONE,
                                    blank=True)
    email_attempts = models.PositiveSmallIntegerField(default=0)
    email_attempted_at = models.DateTimeField(null=True, blank=True)
    email_sent_at = models.DateTimeField(null=True, blank=True)
    email_error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "read_at"], name="notification_user_read_idx"),
            # The sweep's scan: only the few rows still waiting for their email.
            models.Index(fields=["created_at"], condition=Q(email_status="pending"),
                         name="notification_email_pending_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(email_status__in=["", "pending", "sent", "failed"]),
                                   name="notification_email_status_valid"),
            models.CheckConstraint(condition=~Q(email_status="sent") | Q(email_sent_at__isnull=False),
                                   name="notification_email_sent_has_time"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} for {self.user_id} at {self.created_at:%Y-%m-%d %H:%M}"


class NotificationPreference(models.Model):
    """Whether `user` gets an email for notifications of `kind` (no row: no email).

    `language` is the page language the user had when they saved the choice; their
    emails are written in it.
    """

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="notification_preferences")
    kind = models.CharField(max_length=30, choices=Notification.Kind.choices)
    email = models.BooleanField(default=False)
    language = models.CharField(max_length=10, default="zh-hans")
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "kind"], name="notification_preference_once")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.kind}: email {'on' if self.email else 'off'}"
