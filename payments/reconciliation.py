"""Reconciliation: the ledger, the statements and the submissions must tell one story.

`ledger_reconcile` lists every disagreement it finds (an empty list means the books
balance); the `reconcile_ledger` command prints them and exits non-zero. The checks:

- every statement equals the sum and count of its ledger entries, carries in exactly
  what its predecessor carried out, and belongs to a closed period;
- every closed period has one payout batch equal to the sum of its statements;
- every submitted work assignment has exactly one earning (and at most one reversal,
  which the schema guarantees); nothing else has any entry;
- every reversal cancels its own assignment's earning exactly;
- every appeal correction is the one entry of an accepted appeal of its own assignment,
  no larger than what that appeal could credit; a submission restored on appeal has
  its correction, and an accepted rejection appeal left no submission rejected;
- no entry is orphaned: each sits in a statement once its period is closed, and its
  project, period, expert and assignment agree;
- every earning carries the price in force at submission, rounded once.
"""
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Count, DecimalField, Exists, F, IntegerField, OuterRef, Q, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from annotation.models import Assignment
from payments.ledger import assignments_missing_earning
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
from payments.pricing import DEFAULT_BASE_PRICES, money_round, quote_from_rules, tier_or_default

ZERO = Decimal("0.00")
MONEY = DecimalField(max_digits=14, decimal_places=2)


@dataclass(frozen=True)
class Problem:
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def _entries_of_statement(aggregate):
    return Subquery(
        LedgerEntry.objects.filter(period_id=OuterRef("period_id"), expert_id=OuterRef("expert_id"))
        .values("period_id").annotate(v=aggregate).values("v")[:1]
    )


def _statements() -> Iterator[Problem]:
    statements = Statement.objects.annotate(
        lines_total=Coalesce(_entries_of_statement(Sum("amount")), Value(ZERO), output_field=MONEY),
        lines_count=Coalesce(_entries_of_statement(Count("pk")), Value(0), output_field=IntegerField()),
    )
    for s in statements.filter(~Q(total=F("lines_total")) | ~Q(entry_count=F("lines_count"))).order_by("pk"):
        yield Problem("statement_total", f"statement {s.pk} (period {s.period_id}, expert {s.expert_id}) says "
                                         f"{s.total} over {s.entry_count} entries; its entries sum to "
                                         f"{s.lines_total} over {s.lines_count}")
    other_currency = LedgerEntry.objects.filter(period_id=OuterRef("period_id"), expert_id=OuterRef("expert_id")
                                                ).exclude(currency=OuterRef("currency"))
    for pk in Statement.objects.filter(Exists(other_currency)).values_list("pk", flat=True):
        yield Problem("statement_currency", f"statement {pk} has entries in another currency")
    for pk in Statement.objects.filter(period__status=Period.Status.OPEN).values_list("pk", flat=True):
        yield Problem("statement_open_period", f"statement {pk} belongs to a period that is still open")
    for s in Statement.objects.select_related("previous").order_by("pk"):
        expected = s.previous.carried_out if s.previous else ZERO
        if s.carried_in != expected:
            yield Problem("statement_carry", f"statement {s.pk} carries in {s.carried_in}, its predecessor "
                                             f"carried out {expected}")
        if s.previous and (s.previous.expert_id, s.previous.project_id) != (s.expert_id, s.project_id):
            yield Problem("statement_carry", f"statement {s.pk} follows statement {s.previous_id} of another "
                                             f"expert or project")
    for pk in Statement.objects.exclude(project_id=F("period__project_id")).values_list("pk", flat=True):
        yield Problem("statement_project", f"statement {pk} names another project than its period")


def _batches() -> Iterator[Problem]:
    for pk in (Period.objects.filter(status=Period.Status.CLOSED, payout_batch__isnull=True)
               .values_list("pk", flat=True)):
        yield Problem("batch_missing", f"closed period {pk} has no payout batch")
    for pk in Period.objects.filter(status=Period.Status.OPEN, payout_batch__isnull=False).values_list("pk", flat=True):
        yield Problem("batch_open_period", f"period {pk} is open but has a payout batch")
    payable = Subquery(Statement.objects.filter(period_id=OuterRef("period_id")).values("period_id")
                       .annotate(v=Sum("payable")).values("v")[:1])
    count = Subquery(Statement.objects.filter(period_id=OuterRef("period_id")).values("period_id")
                     .annotate(v=Count("pk")).values("v")[:1])
    batches = PayoutBatch.objects.annotate(
        statements_total=Coalesce(payable, Value(ZERO), output_field=MONEY),
        statements_count=Coalesce(count, Value(0), output_field=IntegerField()),
    )
    for b in batches.filter(~Q(total=F("statements_total")) | ~Q(statement_count=F("statements_count"))):
        yield Problem("batch_total", f"payout batch {b.pk} says {b.total} over {b.statement_count} statements; "
                                     f"its statements pay {b.statements_total} over {b.statements_count}")


def _assignments(*, submitted_before: datetime | None) -> Iterator[Problem]:
    missing = assignments_missing_earning()
    if submitted_before is not None:
        missing = missing.filter(submitted_at__lt=submitted_before)
    for pk in missing.order_by("pk").values_list("pk", flat=True):
        yield Problem("earning_missing", f"submitted assignment {pk} has no earning")
    unpaid = (LedgerEntry.objects.filter(kind=LedgerEntry.Kind.EARNING)
              .exclude(assignment__status__in=(Assignment.Status.SUBMITTED, Assignment.Status.REJECTED),
                       assignment__kind=Assignment.Kind.WORK))
    for pk, assignment_id in unpaid.values_list("pk", "assignment_id"):
        yield Problem("earning_unpaid_work", f"earning {pk} pays assignment {assignment_id}, which is not "
                                             f"submitted work")
    reversals = LedgerEntry.objects.filter(kind=LedgerEntry.Kind.REVERSAL)
    bad = reversals.filter(~Q(reverses__kind=LedgerEntry.Kind.EARNING) | ~Q(reverses__assignment_id=F("assignment_id"))
                           | ~Q(amount=-F("reverses__amount")) | ~Q(currency=F("reverses__currency")))
    for pk, assignment_id in bad.values_list("pk", "assignment_id"):
        yield Problem("reversal_mismatch", f"reversal {pk} of assignment {assignment_id} does not cancel that "
                                           f"assignment's earning exactly")


def _appeals() -> Iterator[Problem]:
    corrections = LedgerEntry.objects.filter(kind=LedgerEntry.Kind.ADJUSTMENT)
    unbacked = corrections.filter(~Q(appeal_correction__status=Appeal.Status.ACCEPTED)
                                  | Q(appeal_correction__isnull=True)
                                  | ~Q(appeal_correction__assignment_id=F("assignment_id")))
    for pk in unbacked.values_list("pk", flat=True):
        yield Problem("correction_unbacked", f"correction {pk} is not the entry of an accepted appeal of its "
                                             f"assignment")
    earning = LedgerEntry.objects.filter(assignment_id=OuterRef("assignment_id"), kind=LedgerEntry.Kind.EARNING)
    too_large = corrections.annotate(earned=Subquery(earning.values("amount")[:1])).filter(
        Q(earned__isnull=True) | Q(amount__gt=F("earned")))
    for pk in too_large.values_list("pk", flat=True):
        yield Problem("correction_too_large", f"correction {pk} credits more than the earning it corrects")
    reversed_ = LedgerEntry.objects.filter(assignment_id=OuterRef("pk"), kind=LedgerEntry.Kind.REVERSAL)
    restored = Appeal.objects.filter(assignment_id=OuterRef("pk"), kind=Appeal.Kind.REJECTION,
                                     status=Appeal.Status.ACCEPTED)
    for pk in (Assignment.objects.filter(status=Assignment.Status.SUBMITTED).filter(Exists(reversed_))
               .exclude(Exists(restored)).values_list("pk", flat=True)):
        yield Problem("restored_without_appeal", f"assignment {pk} was reversed and is counted again without "
                                                 f"an accepted appeal")
    for pk in (Appeal.objects.filter(kind=Appeal.Kind.REJECTION, status=Appeal.Status.ACCEPTED,
                                     assignment__status=Assignment.Status.REJECTED).values_list("pk", flat=True)):
        yield Problem("appeal_not_restored", f"appeal {pk} was accepted but its submission is still rejected")


def _orphans() -> Iterator[Problem]:
    has_statement = Statement.objects.filter(period_id=OuterRef("period_id"), expert_id=OuterRef("expert_id"))
    orphans = (LedgerEntry.objects.filter(period__status=Period.Status.CLOSED).exclude(Exists(has_statement))
               .values_list("pk", "period_id"))
    for pk, period_id in orphans:
        yield Problem("entry_orphaned", f"entry {pk} is in closed period {period_id} but on no statement")
    mismatched = LedgerEntry.objects.filter(
        ~Q(project_id=F("period__project_id")) | ~Q(project_id=F("assignment__task__project_id"))
        | ~Q(expert_id=F("assignment__expert_id")))
    for pk in mismatched.values_list("pk", flat=True):
        yield Problem("entry_mismatch", f"entry {pk} disagrees with its period or assignment on the project "
                                        f"or the expert")


def _prices() -> Iterator[Problem]:
    rules: dict[int, list[PriceRule]] = defaultdict(list)
    for rule in PriceRule.objects.all():
        rules[rule.project_id].append(rule)
    factors: dict[int, list[TierMultiplier]] = defaultdict(list)
    for factor in TierMultiplier.objects.all():
        factors[factor.project_id].append(factor)
    currencies = dict(PaymentSettings.objects.values_list("project_id", "currency"))
    default_currency = PaymentSettings._meta.get_field("currency").default
    earnings = (LedgerEntry.objects.filter(kind=LedgerEntry.Kind.EARNING).order_by("pk")
                .values_list("pk", "project_id", "amount", "currency", "difficulty", "tier", "base_price",
                             "multiplier", "submitted_at", "assignment__submitted_at",
                             "assignment__tier_at_submission", "assignment__task__response__question__difficulty"))
    for (pk, project_id, amount, currency, difficulty, tier, base, multiplier, submitted_at, assignment_submitted_at,
         assignment_tier, question_difficulty) in earnings.iterator(chunk_size=2000):
        if amount != money_round(base * multiplier):
            yield Problem("earning_rounding", f"earning {pk} is {amount}, but {base} × {multiplier} rounds to "
                                              f"{money_round(base * multiplier)}")
        if (submitted_at, tier, difficulty) != (assignment_submitted_at, tier_or_default(assignment_tier),
                                                question_difficulty):
            yield Problem("earning_basis", f"earning {pk} was priced for other work than its assignment's "
                                           f"(submission time, tier or difficulty)")
            continue
        if difficulty not in DEFAULT_BASE_PRICES:
            continue
        quote = quote_from_rules(difficulty=difficulty, tier=tier, at=submitted_at,
                                 currency=currencies.get(project_id, default_currency),
                                 price_rules=rules[project_id], multipliers=factors[project_id])
        if (quote.amount, quote.currency) != (amount, currency):
            yield Problem("earning_price", f"earning {pk} is {amount} {currency}; the price in force at "
                                           f"submission is {quote.amount} {quote.currency}")


def ledger_reconcile(*, now: datetime | None = None, grace: timedelta = timedelta(0)) -> list[Problem]:
    """Every inconsistency between ledger, statements, batches and submissions; [] when none.

    With `now` and `grace`, assignments submitted within `grace` before `now` are not
    yet expected to have their earning (the posting task may still be on its way).
    """
    submitted_before = now - grace if now is not None and grace else None
    return [*_statements(), *_batches(), *_assignments(submitted_before=submitted_before), *_appeals(), *_orphans(),
            *_prices()]
