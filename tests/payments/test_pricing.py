"""Prices: base price by difficulty × tier multiplier, in force at submission, rounded half-up once."""
from datetime import timedelta
from decimal import Decimal

import pytest

from core.errors import DomainError
from payments.models import PriceRule
from payments.pricing import money_round, price_quote, price_rule_create, tier_multiplier_create
from tests.payments.factories import T0, make_expert, make_paid_project

pytestmark = pytest.mark.django_db

EARLIER = T0 - timedelta(hours=1)


@pytest.mark.parametrize(("value", "expected"), [
    (Decimal("5.005"), Decimal("5.01")),
    (Decimal("1.2") * Decimal("3.33"), Decimal("4.00")),
    (Decimal("2.675"), Decimal("2.68")),
    (Decimal("0.125"), Decimal("0.13")),
    (Decimal("-5.005"), Decimal("-5.01")),
])
def test_money_rounds_half_up_to_cents(value, expected):
    assert money_round(value) == expected


def test_a_price_is_rounded_once_not_at_each_step():
    # 1.005 × 1.5 = 1.5075 → 1.51; rounding the base first would give 1.01 × 1.5 = 1.515 → 1.52.
    project = make_paid_project(experts=[])
    price_rule_create(project=project, difficulty="normal", amount="1.005", effective_from=T0, created_by=None,
                      now=EARLIER)

    assert price_quote(project_id=project.pk, difficulty="normal", tier="gold", at=T0).amount == Decimal("1.51")


def test_defaults_apply_without_rules():
    project = make_paid_project(experts=[])

    quotes = {(d, t): price_quote(project_id=project.pk, difficulty=d, tier=t, at=T0).amount
              for d in ("normal", "hard") for t in ("bronze", "silver", "gold", "platinum")}

    assert quotes == {
        ("normal", "bronze"): Decimal("5.00"), ("normal", "silver"): Decimal("6.00"),
        ("normal", "gold"): Decimal("7.50"), ("normal", "platinum"): Decimal("10.00"),
        ("hard", "bronze"): Decimal("20.00"), ("hard", "silver"): Decimal("24.00"),
        ("hard", "gold"): Decimal("30.00"), ("hard", "platinum"): Decimal("40.00"),
    }


def test_the_rule_in_force_is_the_latest_at_or_before_the_instant():
    project = make_paid_project(experts=[])
    price_rule_create(project=project, difficulty="normal", amount="3.33", effective_from=T0, created_by=None,
                      now=EARLIER)
    price_rule_create(project=project, difficulty="normal", amount="8", effective_from=T0 + timedelta(days=1),
                      created_by=None, now=EARLIER)
    tier_multiplier_create(project=project, tier="silver", multiplier="1.2", effective_from=T0, created_by=None,
                           now=EARLIER)

    before = price_quote(project_id=project.pk, difficulty="normal", tier="silver", at=T0 - timedelta(seconds=1))
    at_start = price_quote(project_id=project.pk, difficulty="normal", tier="silver", at=T0)
    later = price_quote(project_id=project.pk, difficulty="normal", tier="silver", at=T0 + timedelta(days=2))

    assert (before.base_price, before.amount, before.price_rule_id) == (Decimal("5.00"), Decimal("6.00"), None)
    assert (at_start.base_price, at_start.amount) == (Decimal("3.33"), Decimal("4.00"))
    assert later.amount == Decimal("9.60")


def test_an_unknown_or_blank_tier_is_priced_as_bronze():
    project = make_paid_project(experts=[])

    assert price_quote(project_id=project.pk, difficulty="normal", tier="", at=T0).tier == "bronze"


@pytest.mark.parametrize("amount", [5.005, "-1", "abc", "1.00001", "NaN"])
def test_invalid_prices_are_refused(amount):
    project = make_paid_project(experts=[])

    with pytest.raises(DomainError):
        price_rule_create(project=project, difficulty="normal", amount=amount, effective_from=None,
                          created_by=None, now=T0)
    assert not PriceRule.objects.exists()


def test_a_price_change_takes_effect_a_minute_from_now_at_the_earliest():
    project = make_paid_project(experts=[])

    default = price_rule_create(project=project, difficulty="hard", amount="30", effective_from=None,
                                created_by=None, now=T0)
    with pytest.raises(DomainError, match="one minute"):
        price_rule_create(project=project, difficulty="hard", amount="30", effective_from=T0 - timedelta(hours=1),
                          created_by=None, now=T0)
    with pytest.raises(DomainError, match="one minute"):
        price_rule_create(project=project, difficulty="hard", amount="30", effective_from=T0 + timedelta(seconds=30),
                          created_by=None, now=T0)

    assert default.effective_from == T0 + timedelta(minutes=1)
    assert PriceRule.objects.count() == 1


@pytest.mark.parametrize("multiplier", ["0", "-1.2", 1.2])
def test_invalid_multipliers_are_refused(multiplier):
    project = make_paid_project(experts=[make_expert()])

    with pytest.raises(DomainError):
        tier_multiplier_create(project=project, tier="gold", multiplier=multiplier, effective_from=None,
                               created_by=None, now=T0)
