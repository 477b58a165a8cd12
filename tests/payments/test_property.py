"""Random sequences of submissions, rejections, tier and price changes and settlements always reconcile."""
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from django.db.models import Sum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import Conflict
from payments.ledger import earnings_sweep, ledger_post_earning
from payments.models import LedgerEntry, Period, Statement
from payments.pricing import price_rule_create, tier_multiplier_create
from payments.reconciliation import ledger_reconcile
from payments.services import period_close_now, periods_settle_due, submission_reject
from tests.payments.factories import T0, make_expert, make_paid_project, set_tier, submit

pytestmark = pytest.mark.django_db

EXPERTS = 3
TIERS = ["bronze", "silver", "gold", "platinum"]

submissions = st.tuples(st.just("submit"), st.integers(0, EXPERTS - 1), st.booleans())
# Branches are drawn evenly, so submissions are listed thrice to make them the common step.
operations = st.one_of(
    submissions, submissions, submissions,
    st.tuples(st.just("reject"), st.integers(0, 50)),
    st.tuples(st.just("settle_due")),
    st.tuples(st.just("close_now")),
    st.tuples(st.just("sweep")),
    st.tuples(st.just("tier"), st.integers(0, EXPERTS - 1), st.sampled_from(TIERS)),
    st.tuples(st.just("price"), st.sampled_from(["normal", "hard"]), st.integers(0, 3000)),
    st.tuples(st.just("multiplier"), st.sampled_from(TIERS), st.integers(1, 400)),
)
# Hours between steps: a week is 168 hours, so a history of a few dozen steps crosses periods.
steps = st.lists(st.tuples(operations, st.integers(0, 60)), min_size=6, max_size=40)


class _Rollback(Exception):
    """Raised at the end of each example so its rows never reach the next one."""


def _run(ops, admin) -> None:
    experts = [make_expert() for _ in range(EXPERTS)]
    project = make_paid_project(experts=experts, n_questions=6)
    clock = T0
    submitted = []
    for (name, *args), hours in ops:
        clock += timedelta(hours=hours, seconds=1)
        if name == "submit":
            assignment = submit(project, experts[args[0]], clock)
            if assignment is not None:
                submitted.append(assignment)
                if args[1]:  # else the posting task was lost and the sweep must find it
                    ledger_post_earning(assignment_id=assignment.pk, now=clock)
        elif name == "reject" and submitted:
            target = submitted[args[0] % len(submitted)]
            try:
                submission_reject(actor=admin, assignment_id=target.pk, reason="spam", now=clock)
            except Conflict:
                pass  # already rejected: the sequence may pick the same submission twice
        elif name == "settle_due":
            periods_settle_due(now=clock)
        elif name == "close_now":
            try:
                period_close_now(actor=admin, project_id=project.pk, now=clock)
            except Conflict:
                pass  # nothing open to close
        elif name == "sweep":
            earnings_sweep(now=clock)
        elif name == "tier":
            set_tier(experts[args[0]], args[1])
        elif name == "price":
            price_rule_create(project=project, difficulty=args[0], amount=Decimal(args[1]) / 1000,
                              effective_from=None, created_by=None, now=clock)
        elif name == "multiplier":
            tier_multiplier_create(project=project, tier=args[0], multiplier=Decimal(args[1]) / 100,
                                   effective_from=None, created_by=None, now=clock)
    earnings_sweep(now=clock)
    _assert_books_balance(experts)


def _assert_books_balance(experts) -> None:
    assert ledger_reconcile() == []
    for expert in experts:
        statements = list(Statement.objects.filter(expert=expert).order_by("period__starts_at"))
        settled = LedgerEntry.objects.filter(expert=expert, period__status=Period.Status.CLOSED)
        settled_total = settled.aggregate(v=Sum("amount"))["v"] or Decimal("0.00")
        paid = sum((s.payable for s in statements), Decimal("0.00"))
        still_owed = statements[-1].carried_out if statements else Decimal("0.00")
        # Everything settled is paid, except a negative balance still carried forward.
        assert paid + still_owed == settled_total


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ops=steps)
def test_random_pay_histories_always_reconcile(ops, admin_user):
    with pytest.raises(_Rollback), transaction.atomic():
        _run(ops, admin_user)
        raise _Rollback


def test_the_property_holds_for_a_history_with_every_kind_of_step(admin_user):
    ops = [(("submit", 0, True), 1), (("submit", 1, False), 2), (("tier", 0, "gold"), 0),
           (("price", "normal", 5005), 1), (("submit", 0, True), 2), (("close_now",), 1), (("reject", 0), 1),
           (("reject", 2), 1), (("reject", 1), 3), (("multiplier", "silver", 133), 1), (("settle_due",), 200),
           (("submit", 0, True), 1), (("submit", 1, False), 1), (("settle_due",), 200), (("sweep",), 1)]

    _run(ops, admin_user)

    assert Statement.objects.filter(carried_out__lt=0).exists()
    assert Statement.objects.filter(carried_in__lt=0).exists()
