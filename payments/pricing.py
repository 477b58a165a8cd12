"""What a piece of work earns: base price by difficulty × tier multiplier, in force at submission.

The price in force at an instant is the price rule of the project and difficulty with
the latest `effective_from` at or before it; without one, the default below in the
project's currency. Tier multipliers work the same way, per project, falling back to
the defaults. The amount is rounded half-up to cents exactly once, here, and the ledger
stores it; nothing downstream rounds again.

A change takes effect one minute after it is made at the earliest (`PRICE_NOTICE`), so
an earning posted while the change commits was submitted before it and is rightly
priced without it. An account that submitted without an expert profile (no tier
recorded) is priced as bronze.
"""
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from django.db import IntegrityError, transaction

from annotation.audit.services import audit_record
from annotation.models import AuditAction, Difficulty, Project
from annotation.rubric_editing.pricing import Cost
from core.errors import Conflict, DomainError
from experts.models import Tier, User
from payments.models import PaymentSettings, PriceRule, TierMultiplier

CENT = Decimal("0.01")
DEFAULT_BASE_PRICES: dict[str, Decimal] = {
    Difficulty.NORMAL: Decimal("5.00"),
    Difficulty.HARD: Decimal("20.00"),
}
DEFAULT_MULTIPLIERS: dict[str, Decimal] = {
    Tier.BRONZE: Decimal("1.0"),
    Tier.SILVER: Decimal("1.2"),
    Tier.GOLD: Decimal("1.5"),
    Tier.PLATINUM: Decimal("2.0"),
}
PRICE_PLACES = Decimal("0.0001")
MAX_PRICE = Decimal("100000000")
MAX_MULTIPLIER = Decimal("1000")
# A change takes effect this long after it is made, at the earliest: longer than any
# submission or posting transaction, so no earning is priced without seeing it.
PRICE_NOTICE = timedelta(minutes=1)


def money_round(value: Decimal) -> Decimal:
    """Round to cents, half-up: 5.005 → 5.01, 1.2 × 3.33 = 3.996 → 4.00."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Quote:
    """The price of one piece of work and where each factor came from (None: a default)."""

    difficulty: str
    tier: str
    base_price: Decimal
    multiplier: Decimal
    amount: Decimal
    currency: str
    price_rule_id: int | None
    tier_multiplier_id: int | None


def tier_or_default(tier: str) -> str:
    return tier if tier in Tier.values else Tier.BRONZE


def _latest_at(rows: Iterable, at: datetime):
    """The row with the latest effective_from <= at (rows in any order), or None."""
    best = None
    for row in rows:
        if row.effective_from <= at and (best is None or (row.effective_from, row.pk) > (best.effective_from, best.pk)):
            best = row
    return best


def quote_from_parts(*, difficulty: str, tier: str, currency: str, rule: tuple[int, Decimal, str] | None,
                     factor: tuple[int, Decimal] | None) -> Quote:
    """Price work from the rule (id, amount, currency) and tier multiplier (id, multiplier) in force, if any.

    `tier` is the effective tier (`tier_or_default`) the multiplier was looked up for;
    without a rule or multiplier the defaults above apply, in the project's `currency`.
    """
    base = rule[1] if rule else DEFAULT_BASE_PRICES[difficulty]
    multiplier = factor[1] if factor else DEFAULT_MULTIPLIERS[tier]
    return Quote(
        difficulty=difficulty, tier=tier, base_price=base, multiplier=multiplier,
        amount=money_round(base * multiplier), currency=rule[2] if rule else currency,
        price_rule_id=rule[0] if rule else None, tier_multiplier_id=factor[0] if factor else None,
    )


def quote_from_rules(*, difficulty: str, tier: str, at: datetime, currency: str,
                     price_rules: Iterable[PriceRule], multipliers: Iterable[TierMultiplier]) -> Quote:
    """Price work from rules already loaded (any order, any difficulty or tier); no queries."""
    tier = tier_or_default(tier)
    rule = _latest_at((r for r in price_rules if r.difficulty == difficulty), at)
    factor = _latest_at((m for m in multipliers if m.tier == tier), at)
    return quote_from_parts(difficulty=difficulty, tier=tier, currency=currency,
                            rule=(rule.pk, rule.amount, rule.currency) if rule else None,
                            factor=(factor.pk, factor.multiplier) if factor else None)


def default_currency() -> str:
    """The currency of a project without payment settings: the settings' own default."""
    return PaymentSettings._meta.get_field("currency").default


def project_currency(project_id: int) -> str:
    found = PaymentSettings.objects.filter(project_id=project_id).values_list("currency", flat=True).first()
    return found or default_currency()


def price_quote(*, project_id: int, difficulty: str, tier: str, at: datetime) -> Quote:
    """The price in force at `at` for work of `difficulty` by an expert of `tier`."""
    tier = tier_or_default(tier)
    rule = (PriceRule.objects.filter(project_id=project_id, difficulty=difficulty, effective_from__lte=at)
            .order_by("-effective_from", "-pk").first())
    factor = (TierMultiplier.objects.filter(project_id=project_id, tier=tier, effective_from__lte=at)
              .order_by("-effective_from", "-pk").first())
    return quote_from_rules(difficulty=difficulty, tier=tier, at=at, currency=project_currency(project_id),
                            price_rules=[rule] if rule else [], multipliers=[factor] if factor else [])


def _decimal(value, *, field: str, places: Decimal, low: Decimal, high: Decimal, low_inclusive: bool) -> Decimal:
    # Floats are refused rather than converted: 5.005 as a float is 5.00499999...
    if isinstance(value, float | bool):
        raise DomainError(f"{field} must be given as a decimal string, not a float.", code="invalid_amount",
                          errors=[{"field": field, "message": "expected a decimal"}])
    try:
        number = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise DomainError(f"{field} is not a number.", code="invalid_amount",
                          errors=[{"field": field, "message": "expected a decimal"}]) from None
    if not number.is_finite():
        raise DomainError(f"{field} is not a number.", code="invalid_amount",
                          errors=[{"field": field, "message": "expected a decimal"}])
    too_low = number < low if low_inclusive else number <= low
    if too_low or number >= high or number != number.quantize(places):
        raise DomainError(f"{field} is out of range or has more than four decimal places.",
                          code="invalid_amount", errors=[{"field": field, "message": "out of range"}])
    return number


def _effective_from(effective_from: datetime | None, now: datetime) -> datetime:
    earliest = now + PRICE_NOTICE
    if effective_from is None:
        return earliest
    if effective_from < earliest:
        raise DomainError("A price change takes effect one minute from now at the earliest: work already "
                          "submitted keeps its price.", code="effective_too_soon",
                          errors=[{"field": "effective_from", "message": "at least one minute from now"}])
    return effective_from


@dataclass(frozen=True)
class RuleChange:
    """A validated price or multiplier change, ready to be written."""

    key: str  # the difficulty or the tier
    value: Decimal
    effective_from: datetime


def price_rule_clean(*, difficulty: str, amount, effective_from: datetime | None, now: datetime) -> RuleChange:
    """Validate a base price change; raises DomainError naming the field."""
    if difficulty not in Difficulty.values:
        raise DomainError(f"Unknown difficulty {difficulty!r}.", code="invalid_difficulty",
                          errors=[{"field": "difficulty", "message": "unknown"}])
    price = _decimal(amount, field="amount", places=PRICE_PLACES, low=Decimal(0), high=MAX_PRICE,
                     low_inclusive=True)
    return RuleChange(key=difficulty, value=price, effective_from=_effective_from(effective_from, now))


def tier_multiplier_clean(*, tier: str, multiplier, effective_from: datetime | None, now: datetime) -> RuleChange:
    """Validate a tier multiplier change; raises DomainError naming the field."""
    if tier not in Tier.values:
        raise DomainError(f"Unknown tier {tier!r}.", code="invalid_tier",
                          errors=[{"field": "tier", "message": "unknown"}])
    factor = _decimal(multiplier, field="multiplier", places=PRICE_PLACES, low=Decimal(0), high=MAX_MULTIPLIER,
                      low_inclusive=False)
    return RuleChange(key=tier, value=factor, effective_from=_effective_from(effective_from, now))


def price_rule_create(*, project: Project, difficulty: str, amount, effective_from: datetime | None,
                      created_by: User | None, now: datetime) -> PriceRule:
    """Set the base price of `difficulty` work in `project` from `effective_from` on.

    The rule is a new history row in the project's currency; work submitted before it
    keeps its price. It takes effect one minute from `now` at the earliest (the
    default): an earning being posted while the rule commits was submitted before it,
    so no earning is ever priced by a rule it could not see.
    """
    change = price_rule_clean(difficulty=difficulty, amount=amount, effective_from=effective_from, now=now)
    try:
        with transaction.atomic():
            rule = PriceRule.objects.create(project=project, difficulty=change.key, amount=change.value,
                                            currency=project_currency(project.pk),
                                            effective_from=change.effective_from, created_by=created_by)
            audit_record(actor=created_by, action=AuditAction.PRICE_CHANGE, project_id=project.pk, objects=[rule],
                         now=now, details={"difficulty": rule.difficulty, "amount": rule.amount,
                                           "currency": rule.currency, "effective_from": rule.effective_from})
            return rule
    except IntegrityError:
        raise Conflict("A price for this difficulty already starts at that instant.",
                       code="duplicate_rule") from None


def tier_multiplier_create(*, project: Project, tier: str, multiplier, effective_from: datetime | None,
                           created_by: User | None, now: datetime) -> TierMultiplier:
    """Set the multiplier of `tier` in `project` from `effective_from` on (see `price_rule_create`)."""
    change = tier_multiplier_clean(tier=tier, multiplier=multiplier, effective_from=effective_from, now=now)
    try:
        with transaction.atomic():
            multiplier_row = TierMultiplier.objects.create(project=project, tier=change.key, multiplier=change.value,
                                                           effective_from=change.effective_from,
                                                           created_by=created_by)
            audit_record(actor=created_by, action=AuditAction.PRICE_CHANGE, project_id=project.pk, now=now,
                         objects=[multiplier_row], details={"tier": multiplier_row.tier,
                                                            "multiplier": multiplier_row.multiplier,
                                                            "effective_from": multiplier_row.effective_from})
            return multiplier_row
    except IntegrityError:
        raise Conflict("A multiplier for this tier already starts at that instant.",
                       code="duplicate_rule") from None


def reannotation_price(project_id: int, work: dict[str, int], at: datetime) -> Cost:
    """Price pieces of work by difficulty at the base price in force at `at` (the lowest tier's multiplier:
    who will do the work is not known yet). Registered in `annotation.rubric_editing.pricing`."""
    total = Decimal("0")
    currency = project_currency(project_id)
    for difficulty, pieces in work.items():
        if pieces:
            quote = price_quote(project_id=project_id, difficulty=difficulty, tier=Tier.BRONZE, at=at)
            total += quote.amount * pieces
            currency = quote.currency
    return Cost(amount=money_round(total), currency=currency)
