"""Reads of the payments pages, scoped to the user: missing and not-yours give the same NotFound.

An expert's statement lines name the task, question, rubric version and difficulty of
each piece of work, never the model that wrote the response.
"""
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal

from django.db.models import Count, Q, QuerySet, Sum

from annotation.models import Assignment, Difficulty, ItemConsensus, Project
from annotation.rubric_editing.pricing import PeriodSpend
from annotation.selectors import project_get_for_user, project_list_for_user
from core.errors import NotFound
from experts.models import TIER_ORDER, ExpertProfile, Tier, User
from payments import permissions
from payments.models import (
    Appeal,
    LedgerEntry,
    PaymentSettings,
    PayoutBatch,
    Period,
    PriceRule,
    Statement,
    TierMultiplier,
)
from payments.pricing import default_currency, project_currency, quote_from_rules

ZERO = Decimal("0.00")
RECENT_LINES = 50


def decimal_text(value: Decimal, *, places: int) -> str:
    """A stored price or factor without padding zeros, keeping at least `places` decimals: 5.0050 → 5.005."""
    whole, _dot, fraction = f"{value.normalize():f}".partition(".")
    return f"{whole}.{fraction.ljust(places, '0')}"


# --- The expert's side ------------------------------------------------------------------

@dataclass(frozen=True)
class PendingEarnings:
    """An expert's entries in a project's open periods: what the next statement will hold."""

    project: Project
    currency: str
    total: Decimal
    earnings: int
    reversals: int
    period_ends_at: datetime | None


def earnings_pending_for_expert(expert: User) -> list[PendingEarnings]:
    rows = (LedgerEntry.objects.filter(expert=expert, period__status=Period.Status.OPEN)
            .values("project_id", "currency")
            .annotate(total=Sum("amount"),
                      earnings=Count("pk", filter=Q(kind=LedgerEntry.Kind.EARNING)),
                      reversals=Count("pk", filter=Q(kind=LedgerEntry.Kind.REVERSAL)))
            .order_by("project_id"))
    rows = list(rows)
    projects = Project.objects.in_bulk([r["project_id"] for r in rows])
    ends = {}
    for project_id, ends_at in (Period.objects.filter(project_id__in=projects, status=Period.Status.OPEN)
                                .order_by("project_id", "starts_at").values_list("project_id", "ends_at")):
        ends.setdefault(project_id, ends_at)
    return [
        PendingEarnings(project=projects[r["project_id"]], currency=r["currency"], total=r["total"] or ZERO,
                        earnings=r["earnings"], reversals=r["reversals"], period_ends_at=ends.get(r["project_id"]))
        for r in rows
    ]


@dataclass(frozen=True)
class Line:
    """One ledger entry as a statement shows it: traceable to the task, blind to the model."""

    entry_id: int
    kind: str
    posted_at: datetime
    submitted_at: datetime
    task_id: int
    question: str
    rubric_version: int
    difficulty: str
    tier: str
    base_price: Decimal
    multiplier: Decimal
    amount: Decimal
    currency: str
    reason: str
    appeal: Appeal | None = None  # the expert's appeal against this line, when there is one

    @property
    def is_reversal(self) -> bool:
        return self.kind == LedgerEntry.Kind.REVERSAL

    @property
    def is_correction(self) -> bool:
        return self.kind == LedgerEntry.Kind.ADJUSTMENT

    @property
    def contestable(self) -> bool:
        """An earning line without an appeal (the window is checked when the form opens)."""
        return self.kind == LedgerEntry.Kind.EARNING and self.appeal is None and self.amount > 0

    @property
    def base_price_text(self) -> str:
        return decimal_text(self.base_price, places=2)

    @property
    def multiplier_text(self) -> str:
        return decimal_text(self.multiplier, places=1)

    @property
    def kind_label(self) -> str:
        return LedgerEntry.Kind(self.kind).label

    @property
    def difficulty_label(self) -> str:
        return Difficulty(self.difficulty).label

    @property
    def tier_label(self) -> str:
        return Tier(self.tier).label


LINE_FIELDS = {
    "entry_id": "pk", "kind": "kind", "posted_at": "posted_at", "submitted_at": "submitted_at",
    "task_id": "assignment__task_id", "question": "assignment__task__response__question__external_id",
    "rubric_version": "assignment__task__rubric_version__number", "difficulty": "difficulty", "tier": "tier",
    "base_price": "base_price", "multiplier": "multiplier", "amount": "amount", "currency": "currency",
    "reason": "reason",
}


def _lines(entries: QuerySet[LedgerEntry]) -> list[Line]:
    names = list(LINE_FIELDS)
    lines = [Line(**dict(zip(names, row, strict=True)))
             for row in entries.order_by("posted_at", "pk").values_list(*LINE_FIELDS.values())]
    appeals = {a.entry_id: a for a in Appeal.objects.filter(entry_id__in=[line.entry_id for line in lines])}
    return [replace(line, appeal=appeals.get(line.entry_id)) for line in lines]


def lines_pending_for_expert(expert: User, *, limit: int = RECENT_LINES) -> list[Line]:
    """The expert's latest entries in open periods, newest last."""
    recent = (LedgerEntry.objects.filter(expert=expert, period__status=Period.Status.OPEN)
              .order_by("-posted_at", "-pk").values_list("pk", flat=True)[:limit])
    return _lines(LedgerEntry.objects.filter(pk__in=list(recent)))


def statement_list_for_expert(expert: User) -> QuerySet[Statement]:
    return (Statement.objects.filter(expert=expert)
            .select_related("period", "project", "period__payout_batch")
            .order_by("-period__starts_at", "-pk"))


def statement_get_for_expert(expert: User, statement_id) -> Statement:
    """The expert's own statement, or NotFound (also for another expert's id)."""
    try:
        return (Statement.objects.select_related("period", "project", "period__payout_batch")
                .get(pk=int(statement_id), expert=expert))
    except (Statement.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such statement.") from None


def statement_lines(statement: Statement) -> list[Line]:
    return _lines(LedgerEntry.objects.filter(period_id=statement.period_id, expert_id=statement.expert_id))


@dataclass(frozen=True)
class PriceRow:
    """What one tier earns per piece of each difficulty."""

    tier: str
    multiplier: Decimal
    prices: list[Decimal]  # in the order of ProjectPrices.difficulties
    is_mine: bool

    @property
    def tier_label(self) -> str:
        return Tier(self.tier).label


@dataclass(frozen=True)
class ProjectPrices:
    """The base prices of a project and what each tier makes of them, the expert's own tier marked."""

    project: Project
    currency: str
    tier: str
    difficulties: list[str]
    base_prices: list[Decimal]
    rows: list[PriceRow]

    @property
    def tier_label(self) -> str:
        return Tier(self.tier).label

    @property
    def difficulty_labels(self) -> list[str]:
        return [Difficulty(d).label for d in self.difficulties]

    @property
    def mine(self) -> PriceRow:
        return next(r for r in self.rows if r.is_mine)


def prices_for_expert(expert: User, *, now: datetime) -> list[ProjectPrices]:
    """The price table of each project the expert works in, in four queries whatever their number:
    every project's price rules, tier factors and currency are read at once, then priced in memory."""
    profile = ExpertProfile.objects.filter(user=expert).only("tier").first()
    tier = profile.tier if profile else Tier.BRONZE
    difficulties = list(Difficulty.values)
    projects = list(project_list_for_user(expert).order_by("name", "pk"))
    rules_of: dict[int, list[PriceRule]] = {p.pk: [] for p in projects}
    for rule in PriceRule.objects.filter(project__in=projects, effective_from__lte=now):
        rules_of[rule.project_id].append(rule)
    factors_of: dict[int, list[TierMultiplier]] = {p.pk: [] for p in projects}
    for factor in TierMultiplier.objects.filter(project__in=projects, effective_from__lte=now):
        factors_of[factor.project_id].append(factor)
    currencies = _currencies(projects)
    result = []
    for project in projects:
        currency = currencies[project.pk]
        rows = []
        base_prices: list[Decimal] = []
        for row_tier in TIER_ORDER:
            quotes = [quote_from_rules(difficulty=d, tier=row_tier, at=now, currency=currency,
                                       price_rules=rules_of[project.pk], multipliers=factors_of[project.pk])
                      for d in difficulties]
            base_prices = [q.base_price for q in quotes]
            rows.append(PriceRow(tier=row_tier, multiplier=quotes[0].multiplier, prices=[q.amount for q in quotes],
                                 is_mine=row_tier == tier))
        result.append(ProjectPrices(project=project, currency=currency, tier=tier, difficulties=difficulties,
                                    base_prices=base_prices, rows=rows))
    return result


def _currencies(projects: list[Project]) -> dict[int, str]:
    """`pricing.project_currency` of each of `projects`, by project id, in one query."""
    default = default_currency()
    found = dict(PaymentSettings.objects.filter(project__in=projects).values_list("project_id", "currency"))
    return {p.pk: found.get(p.pk) or default for p in projects}


# --- The PM's and admin's side ----------------------------------------------------------

def project_get_for_costs(user: User, project_id) -> Project:
    """The project if `user` is its PM or an admin, else NotFound."""
    return project_get_for_user(user, project_id, manage=True)


def project_list_for_costs(user: User) -> QuerySet[Project]:
    if user.is_expert:
        return Project.objects.none()
    return project_list_for_user(user).order_by("name", "pk")


def cost_per_label(cost: Decimal, labels: int) -> Decimal | None:
    """Cost of one consensus label, to the cent (a report figure, never posted)."""
    if not labels:
        return None
    return (cost / labels).quantize(Decimal("0.01"))


@dataclass(frozen=True)
class PeriodCost:
    period: Period
    earned: Decimal
    reversed: Decimal
    net: Decimal
    submissions: int
    consensus_labels: int
    batch: PayoutBatch | None
    corrected: Decimal = ZERO  # appeal corrections, part of `net`

    @property
    def per_label(self) -> Decimal | None:
        return cost_per_label(self.net, self.consensus_labels)


@dataclass(frozen=True)
class ProjectCost:
    project: Project
    currency: str
    net: Decimal
    pending: Decimal
    submissions: int
    consensus_labels: int
    periods: list[PeriodCost]

    @property
    def per_label(self) -> Decimal | None:
        return cost_per_label(self.net, self.consensus_labels)


def _consensus_labels(project: Project) -> QuerySet[ItemConsensus]:
    return ItemConsensus.objects.filter(task__project=project)


def project_cost(project: Project, *, with_periods: bool = True) -> ProjectCost:
    """A project's cost: net ledger total overall and per period, and per consensus label.

    A consensus label is one rubric item's verdict on one task (`ItemConsensus`); per
    period it counts the verdicts computed within the period's bounds.
    """
    entries = LedgerEntry.objects.filter(project=project)
    totals = entries.aggregate(
        net=Sum("amount"), pending=Sum("amount", filter=Q(period__status=Period.Status.OPEN)),
        submissions=Count("pk", filter=Q(kind=LedgerEntry.Kind.EARNING)))
    periods = []
    if with_periods:
        by_period = {
            row["period_id"]: row for row in entries.values("period_id").annotate(
                earned=Sum("amount", filter=Q(kind=LedgerEntry.Kind.EARNING)),
                reversed=Sum("amount", filter=Q(kind=LedgerEntry.Kind.REVERSAL)),
                corrected=Sum("amount", filter=Q(kind=LedgerEntry.Kind.ADJUSTMENT)),
                submissions=Count("pk", filter=Q(kind=LedgerEntry.Kind.EARNING)),
            ).order_by("period_id")
        }
        labels = _consensus_labels(project)
        for period in (Period.objects.filter(project=project).select_related("payout_batch")
                       .order_by("-starts_at")):
            row = by_period.get(period.pk, {})
            earned = row.get("earned") or ZERO
            reversed_ = row.get("reversed") or ZERO
            corrected = row.get("corrected") or ZERO
            periods.append(PeriodCost(
                period=period, earned=earned, reversed=reversed_, net=earned + reversed_ + corrected,
                corrected=corrected,
                submissions=row.get("submissions", 0),
                consensus_labels=labels.filter(computed_at__gte=period.starts_at,
                                               computed_at__lt=period.ends_at).count(),
                batch=getattr(period, "payout_batch", None),
            ))
    return ProjectCost(
        project=project, currency=project_currency(project.pk), net=totals["net"] or ZERO,
        pending=totals["pending"] or ZERO, submissions=totals["submissions"],
        consensus_labels=_consensus_labels(project).count(), periods=periods,
    )


def project_costs_for_user(user: User) -> list[ProjectCost]:
    return [project_cost(p, with_periods=False) for p in project_list_for_costs(user)]


@dataclass(frozen=True)
class SubmissionRow:
    """A paid submission as the PM reviews it: who (pseudonym), what, what it earned, whether rejected."""

    assignment_id: int
    task_id: int
    question: str
    expert: str
    submitted_at: datetime
    amount: Decimal
    currency: str
    rejected: bool
    reason: str
    restored: bool = False  # rejected, then restored on appeal (its reversal and correction both stand)


def submissions_for_review(project: Project, *, limit: int = RECENT_LINES) -> list[SubmissionRow]:
    earnings = (LedgerEntry.objects.filter(project=project, kind=LedgerEntry.Kind.EARNING)
                .select_related("assignment__task__response__question", "reversal")
                .order_by("-submitted_at", "-pk")[:limit])
    pseudonyms = dict(ExpertProfile.objects.filter(user__ledger_entries__project=project)
                      .values_list("user_id", "pseudonym").distinct())
    rows = []
    for entry in earnings:
        reversal = getattr(entry, "reversal", None)
        rows.append(SubmissionRow(
            assignment_id=entry.assignment_id, task_id=entry.assignment.task_id,
            question=entry.assignment.task.response.question.external_id,
            expert=pseudonyms.get(entry.expert_id, f"#{entry.expert_id}"), submitted_at=entry.submitted_at,
            amount=entry.amount, currency=entry.currency, rejected=reversal is not None,
            reason=reversal.reason if reversal is not None else "",
            restored=reversal is not None and entry.assignment.status == Assignment.Status.SUBMITTED,
        ))
    return rows


def submission_get_for_review(project: Project, assignment_id) -> SubmissionRow:
    """One paid submission of `project`, as the cost page lists it; NotFound when it is not the project's."""
    try:
        entry = (LedgerEntry.objects.filter(project=project, kind=LedgerEntry.Kind.EARNING)
                 .select_related("assignment__task__response__question", "reversal")
                 .get(assignment_id=int(assignment_id)))
    except (LedgerEntry.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such submission.") from None
    pseudonym = ExpertProfile.objects.filter(user_id=entry.expert_id).values_list("pseudonym", flat=True).first()
    reversal = getattr(entry, "reversal", None)
    return SubmissionRow(
        assignment_id=entry.assignment_id, task_id=entry.assignment.task_id,
        question=entry.assignment.task.response.question.external_id,
        expert=pseudonym or f"#{entry.expert_id}", submitted_at=entry.submitted_at,
        amount=entry.amount, currency=entry.currency, rejected=reversal is not None,
        reason=reversal.reason if reversal is not None else "",
        restored=reversal is not None and entry.assignment.status == Assignment.Status.SUBMITTED,
    )


@dataclass(frozen=True)
class PayoutSummary:
    statements: int
    experts: int
    total: Decimal
    currency: str


def payout_batch_summary(batch: PayoutBatch) -> PayoutSummary:
    """What a payout batch pays: statements with something to pay, distinct experts, the total."""
    payable = Statement.objects.filter(period_id=batch.period_id, payable__gt=0).aggregate(
        statements=Count("pk"), experts=Count("expert_id", distinct=True))
    return PayoutSummary(statements=payable["statements"], experts=payable["experts"], total=batch.total,
                         currency=batch.currency)


def payout_batch_get_for_settler(user: User, batch_id) -> PayoutBatch:
    if not permissions.can_settle(user):
        raise NotFound("No such payout batch.")
    try:
        return PayoutBatch.objects.select_related("period", "project").get(pk=int(batch_id))
    except (PayoutBatch.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such payout batch.") from None


PAYOUT_COLUMNS = ["batch", "project", "period_start", "period_end", "statement", "expert_pseudonym",
                  "username", "full_name", "email", "currency", "amount"]


def payout_rows(batch: PayoutBatch) -> Iterator[list[str]]:
    """The payouts of a batch, one row per statement with something to pay, for finance."""
    yield PAYOUT_COLUMNS
    pseudonyms = dict(ExpertProfile.objects.filter(user__statements__period_id=batch.period_id)
                      .values_list("user_id", "pseudonym"))
    statements = (Statement.objects.filter(period_id=batch.period_id, payable__gt=0)
                  .select_related("expert").order_by("expert_id"))
    for s in statements:
        yield [str(batch.pk), batch.project.name, batch.period.starts_at.isoformat(),
               batch.period.ends_at.isoformat(), str(s.pk), pseudonyms.get(s.expert_id, ""), s.expert.username,
               s.expert.get_full_name(), s.expert.email, s.currency, f"{s.payable:.2f}"]


def payment_settings_for(project: Project) -> PaymentSettings:
    """The project's settings, or the defaults (unsaved) when none were set."""
    return PaymentSettings.objects.filter(project=project).first() or PaymentSettings(project=project)


def project_period_spend(project_id: int, at: datetime) -> PeriodSpend | None:
    """The net cost of the period holding `at` (else the latest period) and per consensus label in it.

    The quality dashboard reads this through `annotation.rubric_editing.pricing.period_spend`
    (annotation may not import payments); the figures are those of the Costs page's period rows.
    """
    periods = Period.objects.filter(project_id=project_id)
    period = (periods.filter(starts_at__lte=at, ends_at__gt=at).first()
              or periods.order_by("-starts_at").first())
    if period is None:
        return None
    net = LedgerEntry.objects.filter(period=period).aggregate(net=Sum("amount"))["net"] or ZERO
    labels = ItemConsensus.objects.filter(task__project_id=project_id, computed_at__gte=period.starts_at,
                                          computed_at__lt=period.ends_at).count()
    return PeriodSpend(amount=net, currency=project_currency(project_id), consensus_labels=labels,
                       per_label=cost_per_label(net, labels), starts_at=period.starts_at, ends_at=period.ends_at)


def earnings_of_assignments(assignment_ids: list[int]) -> dict[str, Decimal]:
    """The earnings posted for `assignment_ids`, totalled per currency: what rejecting them reverses."""
    rows = (LedgerEntry.objects.filter(assignment_id__in=assignment_ids, kind=LedgerEntry.Kind.EARNING)
            .values("currency").annotate(total=Sum("amount")).order_by("currency"))
    return {row["currency"]: row["total"] for row in rows}
