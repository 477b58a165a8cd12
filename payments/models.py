"""Payments: price rules, tier multipliers, the append-only ledger, periods, statements, payouts.

Decisions (DESIGN step 9):

- Per-project payment settings (currency, weekly or bi-weekly periods, the date the
  period grid starts from) live here, not on `annotation.Project`: payments is the
  highest app, so it may point at annotation and experts, never the other way round.
- Prices and tier multipliers are history rows with `effective_from`; the one in force
  at `Assignment.submitted_at` prices the work (see `payments.pricing`). A price may
  carry four decimal places (5.005); a ledger amount carries two, rounded half-up once,
  when the entry is posted.
- A ledger entry records its period when it is inserted, under a share lock on that
  open period (see `payments.ledger`); settlement takes the same row exclusively, so an
  entry is in a period's statement exactly when it committed before the period closed.
  Statement lines are the ledger entries of (period, expert); a statement is written
  once, when its period closes.
- The database refuses what must never happen (triggers in migration 0002): UPDATE or
  DELETE of a ledger entry or a statement, a new entry in a closed period, any change
  to a closed period, deleting a payout batch or changing its amounts.
"""
from datetime import date

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from annotation.models import Assignment, Difficulty
from experts.models import Tier

MONEY = {"max_digits": 12, "decimal_places": 2}
PRICE = {"max_digits": 12, "decimal_places": 4}
FACTOR = {"max_digits": 8, "decimal_places": 4}

# A Monday: weekly and bi-weekly periods start at local midnight on this date plus whole periods.
DEFAULT_PERIOD_ANCHOR = date(2024, 1, 1)


class Currency(models.TextChoices):
    CNY = "CNY", _("Chinese yuan (CNY)")
    HKD = "HKD", _("Hong Kong dollar (HKD)")
    USD = "USD", _("US dollar (USD)")
    EUR = "EUR", _("Euro (EUR)")
    GBP = "GBP", _("Pound sterling (GBP)")


def _currency_field() -> models.CharField:
    return models.CharField(_("currency"), max_length=3, choices=Currency.choices, default=Currency.CNY)


def _currency_check(name: str) -> models.CheckConstraint:
    return models.CheckConstraint(condition=Q(currency__in=Currency.values), name=name)


class PaymentSettings(models.Model):
    """How one project pays: its currency and the length and grid of its settlement periods."""

    class PeriodLength(models.TextChoices):
        WEEKLY = "weekly", _("Weekly")
        BIWEEKLY = "biweekly", _("Every two weeks")

    project = models.OneToOneField("annotation.Project", on_delete=models.CASCADE,
                                   related_name="payment_settings", verbose_name=_("project"))
    currency = _currency_field()
    period_length = models.CharField(_("period length"), max_length=10, choices=PeriodLength.choices,
                                     default=PeriodLength.WEEKLY)
    period_anchor = models.DateField(
        _("period anchor"), default=DEFAULT_PERIOD_ANCHOR,
        help_text=_("Periods start at local midnight on this date plus whole periods."))
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("payment settings")
        verbose_name_plural = _("payment settings")
        constraints = [
            _currency_check("payment_settings_currency_known"),
            models.CheckConstraint(condition=Q(period_length__in=["weekly", "biweekly"]),
                                   name="payment_settings_period_length_known"),
        ]

    def __str__(self) -> str:
        return f"payment settings of project {self.project_id}"

    @property
    def period_days(self) -> int:
        return 14 if self.period_length == self.PeriodLength.BIWEEKLY else 7


class PriceRule(models.Model):
    """The base price of one piece of work of a difficulty, from `effective_from` on.

    Rows are history: a price change is a new row, so work keeps the price that was in
    force when it was submitted.
    """

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="price_rules",
                                verbose_name=_("project"))
    difficulty = models.CharField(_("difficulty"), max_length=10, choices=Difficulty.choices)
    amount = models.DecimalField(_("base price"), **PRICE)
    currency = _currency_field()
    effective_from = models.DateTimeField(_("effective from"))
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+", verbose_name=_("created by"))
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("price rule")
        verbose_name_plural = _("price rules")
        ordering = ["project_id", "difficulty", "-effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["project", "difficulty", "effective_from"],
                                    name="price_rule_one_per_instant"),
            models.CheckConstraint(condition=Q(amount__gte=0), name="price_rule_amount_not_negative"),
            models.CheckConstraint(condition=Q(difficulty__in=Difficulty.values), name="price_rule_difficulty_known"),
            _currency_check("price_rule_currency_known"),
        ]

    def __str__(self) -> str:
        return f"{self.difficulty} {self.amount} {self.currency} from {self.effective_from:%Y-%m-%d %H:%M}"


class TierMultiplier(models.Model):
    """The factor a tier applies to the base price in one project, from `effective_from` on."""

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="tier_multipliers",
                                verbose_name=_("project"))
    tier = models.CharField(_("tier"), max_length=10, choices=Tier.choices)
    multiplier = models.DecimalField(_("multiplier"), **FACTOR)
    effective_from = models.DateTimeField(_("effective from"))
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+", verbose_name=_("created by"))
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("tier multiplier")
        verbose_name_plural = _("tier multipliers")
        ordering = ["project_id", "tier", "-effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["project", "tier", "effective_from"],
                                    name="tier_multiplier_one_per_instant"),
            models.CheckConstraint(condition=Q(multiplier__gt=0), name="tier_multiplier_positive"),
            models.CheckConstraint(condition=Q(tier__in=Tier.values), name="tier_multiplier_tier_known"),
        ]

    def __str__(self) -> str:
        return f"{self.tier} ×{self.multiplier} from {self.effective_from:%Y-%m-%d %H:%M}"


class Period(models.Model):
    """A settlement period of one project: entries posted while it is open belong to it.

    Periods are created when the first entry needs one; closing a period writes its
    statements and payout batch, and the database then refuses any change to it.
    """

    class Status(models.TextChoices):
        OPEN = "open", pgettext_lazy("settlement period", "Open")
        CLOSED = "closed", pgettext_lazy("settlement period", "Closed")

    project = models.ForeignKey("annotation.Project", on_delete=models.PROTECT, related_name="payment_periods",
                                verbose_name=_("project"))
    starts_at = models.DateTimeField(_("starts at"))
    ends_at = models.DateTimeField(_("ends at"))
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.OPEN)
    closed_at = models.DateTimeField(_("closed at"), null=True, blank=True)
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                  related_name="+", verbose_name=_("closed by"))

    class Meta:
        verbose_name = _("period")
        verbose_name_plural = _("periods")
        ordering = ["project_id", "starts_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "starts_at"], name="period_start_unique_per_project"),
            models.CheckConstraint(condition=Q(ends_at__gt=F("starts_at")), name="period_ends_after_start"),
            models.CheckConstraint(
                condition=Q(status="open", closed_at__isnull=True) | Q(status="closed", closed_at__isnull=False),
                name="period_closed_at_matches_status",
            ),
        ]
        indexes = [models.Index(fields=["project", "status", "ends_at"], name="period_project_open_idx")]

    def __str__(self) -> str:
        return f"period {self.pk} of project {self.project_id} ({self.starts_at:%Y-%m-%d}, {self.status})"


class LedgerEntry(models.Model):
    """One posting of money to an expert: an earning for a submission, its reversal, or an
    appeal's correction.

    Append-only: the database refuses UPDATE and DELETE. An assignment has at most one
    earning and one reversal (a unique constraint), and every entry a unique
    idempotency key (`earning:<assignment id>`, `reversal:<assignment id>`,
    `appeal:<appeal id>`). A correction (kind `adjustment`) is the only way an accepted
    appeal moves money: a new positive entry beside the ones it corrects, never an edit.
    """

    class Kind(models.TextChoices):
        EARNING = "earning", _("Earning")
        REVERSAL = "reversal", _("Reversal")
        ADJUSTMENT = "adjustment", _("Appeal correction")

    idempotency_key = models.CharField(_("idempotency key"), max_length=100, unique=True)
    kind = models.CharField(_("kind"), max_length=10, choices=Kind.choices)
    project = models.ForeignKey("annotation.Project", on_delete=models.PROTECT, related_name="ledger_entries",
                                verbose_name=_("project"))
    period = models.ForeignKey(Period, on_delete=models.PROTECT, related_name="entries", verbose_name=_("period"))
    expert = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="ledger_entries",
                               verbose_name=_("expert"))
    assignment = models.ForeignKey("annotation.Assignment", on_delete=models.PROTECT,
                                   related_name="ledger_entries", verbose_name=_("assignment"))
    amount = models.DecimalField(_("amount"), **MONEY)
    currency = _currency_field()
    # How the earning was priced, kept with the entry so a statement line explains itself.
    difficulty = models.CharField(_("difficulty"), max_length=10, choices=Difficulty.choices)
    tier = models.CharField(_("tier"), max_length=10, choices=Tier.choices)
    base_price = models.DecimalField(_("base price"), **PRICE)
    multiplier = models.DecimalField(_("multiplier"), **FACTOR)
    price_rule = models.ForeignKey(PriceRule, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                                   verbose_name=_("price rule"))
    tier_multiplier = models.ForeignKey(TierMultiplier, on_delete=models.PROTECT, null=True, blank=True,
                                        related_name="+", verbose_name=_("tier multiplier"))
    submitted_at = models.DateTimeField(_("submitted at"))
    reverses = models.OneToOneField("self", on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="reversal", verbose_name=_("reverses"))
    reason = models.TextField(_("reason"), blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+", verbose_name=_("created by"))
    posted_at = models.DateTimeField(_("posted at"))

    class Meta:
        verbose_name = _("ledger entry")
        verbose_name_plural = _("ledger entries")
        ordering = ["id"]
        constraints = [
            # Corrections are one per accepted appeal (their key), so an assignment may have several.
            models.UniqueConstraint(fields=["assignment", "kind"], condition=~Q(kind="adjustment"),
                                    name="ledger_one_entry_per_assignment_kind"),
            models.CheckConstraint(
                condition=Q(kind="earning", amount__gte=0, reverses__isnull=True)
                | (Q(kind="reversal", amount__lte=0, reverses__isnull=False) & ~Q(reason=""))
                | (Q(kind="adjustment", amount__gt=0, reverses__isnull=True) & ~Q(reason="")),
                name="ledger_kind_shape",
            ),
            _currency_check("ledger_currency_known"),
        ]
        indexes = [
            models.Index(fields=["period", "expert"], name="ledger_period_expert_idx"),
            models.Index(fields=["expert", "period"], name="ledger_expert_period_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.amount} {self.currency} (assignment {self.assignment_id})"


class Statement(models.Model):
    """What one expert earned in one closed period, and what is paid for it.

    `total` is the sum of the expert's ledger entries of the period (the statement's
    lines). A negative balance (a reversal larger than the period's earnings) is not
    paid out as a debt: it is carried into the expert's next statement in the project.
    """

    period = models.ForeignKey(Period, on_delete=models.PROTECT, related_name="statements",
                               verbose_name=_("period"))
    project = models.ForeignKey("annotation.Project", on_delete=models.PROTECT, related_name="statements",
                                verbose_name=_("project"))
    expert = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="statements",
                               verbose_name=_("expert"))
    currency = _currency_field()
    total = models.DecimalField(_("total"), **MONEY)
    entry_count = models.PositiveIntegerField(_("entries"))
    previous = models.OneToOneField("self", on_delete=models.PROTECT, null=True, blank=True, related_name="next",
                                    verbose_name=_("previous statement"))
    carried_in = models.DecimalField(_("carried in"), default=0, **MONEY)
    payable = models.DecimalField(_("payable"), **MONEY)
    carried_out = models.DecimalField(_("carried out"), default=0, **MONEY)
    created_at = models.DateTimeField(_("created at"))

    class Meta:
        verbose_name = _("statement")
        verbose_name_plural = _("statements")
        ordering = ["period_id", "expert_id"]
        constraints = [
            models.UniqueConstraint(fields=["period", "expert"], name="statement_one_per_period_expert"),
            models.CheckConstraint(condition=Q(carried_in__lte=0), name="statement_carried_in_not_positive"),
            models.CheckConstraint(condition=Q(carried_out__lte=0), name="statement_carried_out_not_positive"),
            models.CheckConstraint(condition=Q(payable__gte=0), name="statement_payable_not_negative"),
            models.CheckConstraint(condition=Q(payable=0) | Q(carried_out=0), name="statement_pays_or_carries"),
            models.CheckConstraint(
                condition=Q(payable=F("total") + F("carried_in") - F("carried_out")),
                name="statement_balance",
            ),
            _currency_check("statement_currency_known"),
        ]

    def __str__(self) -> str:
        return f"statement {self.pk} (period {self.period_id}, expert {self.expert_id}, {self.total})"


class PayoutBatch(models.Model):
    """The payment of one closed period's statements: drafted at close, approved, then marked paid."""

    class Status(models.TextChoices):
        DRAFT = "draft", _("Awaiting approval")
        APPROVED = "approved", _("Approved")
        PAID = "paid", _("Paid")

    period = models.OneToOneField(Period, on_delete=models.PROTECT, related_name="payout_batch",
                                  verbose_name=_("period"))
    project = models.ForeignKey("annotation.Project", on_delete=models.PROTECT, related_name="payout_batches",
                                verbose_name=_("project"))
    currency = _currency_field()
    total = models.DecimalField(_("total"), **MONEY)
    statement_count = models.PositiveIntegerField(_("statements"))
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.DRAFT)
    created_at = models.DateTimeField(_("created at"))
    approved_at = models.DateTimeField(_("approved at"), null=True, blank=True)
    approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+", verbose_name=_("approved by"))
    paid_at = models.DateTimeField(_("paid at"), null=True, blank=True)
    paid_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                related_name="+", verbose_name=_("paid by"))
    payment_reference = models.CharField(_("payment reference"), max_length=200, blank=True)

    class Meta:
        verbose_name = _("payout batch")
        verbose_name_plural = _("payout batches")
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(total__gte=0), name="payout_total_not_negative"),
            models.CheckConstraint(
                condition=Q(status="draft", approved_at__isnull=True, paid_at__isnull=True)
                | Q(status="approved", approved_at__isnull=False, paid_at__isnull=True)
                | Q(status="paid", approved_at__isnull=False, paid_at__isnull=False),
                name="payout_status_matches_dates",
            ),
            _currency_check("payout_currency_known"),
        ]

    def __str__(self) -> str:
        return f"payout batch {self.pk} (period {self.period_id}, {self.total} {self.currency}, {self.status})"


class Appeal(models.Model):
    """An expert contests a rejection of their submission or a line of their statement.

    One appeal per target, ever: a decision is final, so an expert cannot ask decider after
    decider until one says yes, and no target can be paid twice (partial unique constraints).
    A rejection appeal keeps a copy of the rejection it contests (`rejected_*`): accepting it
    clears those fields on the assignment (its status is `submitted` again), and this row is
    where the rejection stays on record. An accepted appeal points at the one ledger entry it
    posted (`correction`; none only for work priced at nothing); a denied one posts nothing.
    """

    class Kind(models.TextChoices):
        REJECTION = "rejection", _("Rejection")
        STATEMENT_LINE = "statement_line", _("Statement line")

    class Status(models.TextChoices):
        OPEN = "open", pgettext_lazy("appeal", "Open")
        ACCEPTED = "accepted", pgettext_lazy("appeal", "Accepted")
        DENIED = "denied", pgettext_lazy("appeal", "Denied")

    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.OPEN)
    project = models.ForeignKey("annotation.Project", on_delete=models.PROTECT, related_name="appeals",
                                verbose_name=_("project"))
    expert = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="appeals",
                               verbose_name=_("expert"))
    assignment = models.ForeignKey("annotation.Assignment", on_delete=models.PROTECT, related_name="appeals",
                                   verbose_name=_("assignment"))
    entry = models.ForeignKey(LedgerEntry, on_delete=models.PROTECT, null=True, blank=True,
                              related_name="appeals", verbose_name=_("statement line"))
    reason = models.TextField(_("reason"))
    created_at = models.DateTimeField(_("created at"))
    # The rejection contested, as it stood when the appeal was made.
    rejected_at = models.DateTimeField(_("rejected at"), null=True, blank=True)
    rejected_reason = models.CharField(_("rejection reason"), max_length=12, blank=True,
                                       choices=Assignment.RejectReason.choices)
    rejected_text = models.TextField(_("rejection text"), blank=True)
    rejected_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+", verbose_name=_("rejected by"))
    decided_at = models.DateTimeField(_("decided at"), null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+", verbose_name=_("decided by"))
    decision_reason = models.TextField(_("decision reason"), blank=True)
    correction = models.OneToOneField(LedgerEntry, on_delete=models.PROTECT, null=True, blank=True,
                                      related_name="appeal_correction", verbose_name=_("correction"))

    class Meta:
        verbose_name = _("appeal")
        verbose_name_plural = _("appeals")
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["assignment"], condition=Q(kind="rejection"),
                                    name="appeal_one_per_rejection"),
            models.UniqueConstraint(fields=["entry"], condition=Q(kind="statement_line"),
                                    name="appeal_one_per_statement_line"),
            models.CheckConstraint(
                condition=Q(kind="rejection", entry__isnull=True, rejected_at__isnull=False)
                | Q(kind="statement_line", entry__isnull=False),
                name="appeal_kind_shape",
            ),
            models.CheckConstraint(condition=~Q(reason=""), name="appeal_reason_given"),
            models.CheckConstraint(
                condition=Q(status="open", decided_at__isnull=True, correction__isnull=True)
                | (Q(status="accepted", decided_at__isnull=False) & ~Q(decision_reason=""))
                | (Q(status="denied", decided_at__isnull=False, correction__isnull=True) & ~Q(decision_reason="")),
                name="appeal_status_shape",
            ),
        ]
        indexes = [
            models.Index(fields=["project", "status"], name="appeal_project_status_idx"),
            models.Index(fields=["expert", "created_at"], name="appeal_expert_idx"),
        ]

    def __str__(self) -> str:
        return f"appeal {self.pk} ({self.kind}, assignment {self.assignment_id}, {self.status})"
