"""Settlement: one statement per expert and one payout batch per period, once; rejections and price history."""
from datetime import timedelta
from decimal import Decimal

import pytest

from annotation.models import Assignment
from core.errors import Conflict, DomainError, NotFound
from payments.ledger import ledger_post_earning
from payments.models import LedgerEntry, PaymentSettings, PayoutBatch, Period, Statement
from payments.pricing import price_rule_create, tier_multiplier_create
from payments.reconciliation import ledger_reconcile
from payments.services import (
    payout_batch_approve,
    payout_batch_mark_paid,
    period_close_now,
    periods_settle_due,
    statement_settle_period,
    submission_reject,
)
from tests.factories import AdminFactory, PMFactory
from tests.payments.factories import (
    T0,
    WEEK_END,
    WEEK_START,
    make_expert,
    make_paid_project,
    set_difficulty,
    set_tier,
    submit,
    submit_and_post,
)

pytestmark = pytest.mark.django_db

NEXT_WEEK_END = WEEK_END + timedelta(days=7)


def test_closing_a_period_writes_one_statement_per_expert_and_a_batch():
    alice, bob = make_expert(), make_expert("silver")
    project = make_paid_project(experts=[alice, bob])
    first = submit_and_post(project, alice, T0)
    submit_and_post(project, alice, T0 + timedelta(hours=1))
    submit_and_post(project, bob, T0 + timedelta(hours=2))

    settlement = statement_settle_period(period_id=first.period_id, now=WEEK_END)

    totals = {s.expert_id: (s.total, s.entry_count, s.payable) for s in settlement.statements}
    assert totals == {alice.pk: (Decimal("10.00"), 2, Decimal("10.00")), bob.pk: (Decimal("6.00"), 1, Decimal("6.00"))}
    assert (settlement.batch.total, settlement.batch.statement_count, settlement.batch.status) == (
        Decimal("16.00"), 2, "draft")
    assert settlement.period.status == "closed" and settlement.created
    assert ledger_reconcile() == []


def test_settling_the_same_period_twice_pays_nothing_twice():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    entry = submit_and_post(project, expert, T0)
    first = statement_settle_period(period_id=entry.period_id, now=WEEK_END)

    second = statement_settle_period(period_id=entry.period_id, now=WEEK_END + timedelta(hours=1))

    assert not second.created
    assert [s.pk for s in second.statements] == [s.pk for s in first.statements]
    assert second.batch.pk == first.batch.pk
    assert (Statement.objects.count(), PayoutBatch.objects.count()) == (1, 1)


def test_a_period_is_not_settled_before_its_end_unless_closed_early():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    entry = submit_and_post(project, expert, T0)

    with pytest.raises(Conflict, match="not ended"):
        statement_settle_period(period_id=entry.period_id, now=T0 + timedelta(hours=1))
    assert periods_settle_due(now=T0 + timedelta(hours=1)) == []


def test_an_admin_closes_the_period_now_and_later_work_goes_to_the_rest_of_the_week():
    expert = make_expert()
    admin = AdminFactory()
    project = make_paid_project(experts=[expert])
    submit_and_post(project, expert, T0)
    close_at = T0 + timedelta(hours=3)

    [settlement] = period_close_now(actor=admin, project_id=project.pk, now=close_at)
    later = submit_and_post(project, expert, close_at + timedelta(minutes=1))

    assert (settlement.period.ends_at, settlement.period.closed_by_id) == (close_at, admin.pk)
    assert (later.period.starts_at, later.period.ends_at) == (close_at, WEEK_END)
    with pytest.raises(Conflict):
        period_close_now(actor=admin, project_id=project.pk, now=close_at)


def test_only_admins_close_periods():
    pm, expert = PMFactory(), make_expert()
    project = make_paid_project(experts=[expert, pm])
    submit_and_post(project, expert, T0)

    with pytest.raises(NotFound):
        period_close_now(actor=pm, project_id=project.pk, now=T0 + timedelta(hours=1))
    assert not Statement.objects.exists()


def test_work_whose_period_closed_before_it_was_posted_lands_in_the_next_period():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    first = submit_and_post(project, expert, T0)
    late = submit(project, expert, T0 + timedelta(hours=1))
    statement_settle_period(period_id=first.period_id, now=WEEK_END)

    # Posted with an instant inside the closed period, as a posting that waited on the settlement's lock.
    entry = ledger_post_earning(assignment_id=late.pk, now=T0 + timedelta(hours=1))

    assert (entry.period.starts_at, entry.period.ends_at) == (WEEK_END, NEXT_WEEK_END)
    assert Statement.objects.get().entry_count == 1


def test_a_tier_change_mid_period_prices_each_submission_at_its_own_tier():
    expert = make_expert("bronze")
    project = make_paid_project(experts=[expert])
    first = submit_and_post(project, expert, T0)
    set_tier(expert, "gold")
    second = submit_and_post(project, expert, T0 + timedelta(days=1))

    [statement] = statement_settle_period(period_id=first.period_id, now=WEEK_END).statements

    assert (first.tier, first.amount) == ("bronze", Decimal("5.00"))
    assert (second.tier, second.amount) == ("gold", Decimal("7.50"))
    assert statement.total == Decimal("12.50")


def test_a_price_change_mid_period_applies_to_work_submitted_after_it():
    expert = make_expert("silver")
    project = make_paid_project(experts=[expert])
    set_difficulty(project, "hard")
    change_at = T0 + timedelta(days=1)
    price_rule_create(project=project, difficulty="hard", amount="3.33", effective_from=change_at, created_by=None,
                      now=T0)
    tier_multiplier_create(project=project, tier="silver", multiplier="1.25",
                           effective_from=change_at + timedelta(days=1), created_by=None, now=T0)
    before = submit_and_post(project, expert, change_at - timedelta(seconds=1))
    after = submit_and_post(project, expert, change_at)
    later = submit_and_post(project, expert, change_at + timedelta(days=1))

    [statement] = statement_settle_period(period_id=before.period_id, now=WEEK_END).statements

    assert [before.amount, after.amount, later.amount] == [Decimal("24.00"), Decimal("4.00"), Decimal("4.16")]
    assert statement.total == Decimal("32.16")
    assert ledger_reconcile() == []


def test_a_rejection_after_settlement_is_deducted_in_the_next_period():
    expert = make_expert()
    pm = PMFactory()
    project = make_paid_project(experts=[expert, pm])
    rejected = submit_and_post(project, expert, T0)
    submit_and_post(project, expert, T0 + timedelta(hours=1))
    statement_settle_period(period_id=rejected.period_id, now=WEEK_END)

    reversal = submission_reject(actor=pm, assignment_id=rejected.assignment_id, reason="copy-paste",
                                 now=WEEK_END + timedelta(hours=1))
    submit_and_post(project, expert, WEEK_END + timedelta(hours=2))
    next_settlement = statement_settle_period(period_id=reversal.period_id, now=NEXT_WEEK_END)

    first_statement = Statement.objects.get(period_id=rejected.period_id)
    assert first_statement.total == Decimal("10.00")
    assert reversal.period_id != rejected.period_id
    assert (reversal.amount, reversal.reason, reversal.created_by_id) == (Decimal("-5.00"), "copy-paste", pm.pk)
    [statement] = next_settlement.statements
    assert (statement.total, statement.entry_count, statement.payable) == (Decimal("0.00"), 2, Decimal("0.00"))
    assert ledger_reconcile() == []


def test_a_negative_balance_is_carried_into_the_next_statement_not_paid():
    expert = make_expert()
    admin = AdminFactory()
    project = make_paid_project(experts=[expert])
    earning = submit_and_post(project, expert, T0)
    statement_settle_period(period_id=earning.period_id, now=WEEK_END)
    reversal = submission_reject(actor=admin, assignment_id=earning.assignment_id, reason="spam",
                                 now=WEEK_END + timedelta(hours=1))
    owed = statement_settle_period(period_id=reversal.period_id, now=NEXT_WEEK_END).statements[0]
    later = [submit_and_post(project, expert, NEXT_WEEK_END + timedelta(hours=h)) for h in (1, 2)]

    paid = statement_settle_period(period_id=later[0].period_id, now=NEXT_WEEK_END + timedelta(days=7)).statements[0]

    assert (owed.total, owed.payable, owed.carried_out) == (Decimal("-5.00"), Decimal("0.00"), Decimal("-5.00"))
    assert (paid.previous_id, paid.carried_in, paid.total, paid.payable) == (
        owed.pk, Decimal("-5.00"), Decimal("10.00"), Decimal("5.00"))
    assert PayoutBatch.objects.get(period_id=paid.period_id).total == Decimal("5.00")
    assert ledger_reconcile() == []


def test_rejection_rules():
    expert, stranger_pm, pm = make_expert(), PMFactory(), PMFactory()
    project = make_paid_project(experts=[expert, pm])
    paid = submit_and_post(project, expert, T0)
    calibration = submit(project, expert, T0)
    Assignment.objects.filter(pk=calibration.pk).update(kind=Assignment.Kind.CALIBRATION)

    with pytest.raises(NotFound):
        submission_reject(actor=stranger_pm, assignment_id=paid.assignment_id, reason="spam", now=T0)
    with pytest.raises(NotFound):
        submission_reject(actor=expert, assignment_id=paid.assignment_id, reason="spam", now=T0)
    with pytest.raises(DomainError, match="reason"):
        submission_reject(actor=pm, assignment_id=paid.assignment_id, reason="  ", now=T0)
    with pytest.raises(Conflict):
        submission_reject(actor=pm, assignment_id=calibration.pk, reason="spam", now=T0)
    submission_reject(actor=pm, assignment_id=paid.assignment_id, reason="spam", now=T0)
    with pytest.raises(Conflict, match="already"):
        submission_reject(actor=pm, assignment_id=paid.assignment_id, reason="spam", now=T0)

    assert LedgerEntry.objects.filter(kind="reversal").count() == 1


def test_the_beat_job_settles_due_periods_oldest_first_across_projects():
    alice, bob = make_expert(), make_expert()
    one, two = make_paid_project(experts=[alice]), make_paid_project(experts=[bob])
    submit_and_post(one, alice, T0)
    submit_and_post(one, alice, WEEK_END + timedelta(hours=1))
    submit_and_post(two, bob, T0)

    settled = periods_settle_due(now=NEXT_WEEK_END)

    assert [(s.period.project_id, s.period.starts_at) for s in settled] == [
        (one.pk, WEEK_START), (one.pk, WEEK_END), (two.pk, WEEK_START)]
    assert not Period.objects.filter(status="open").exists()


def test_a_later_period_waits_for_the_earlier_one():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    submit_and_post(project, expert, T0)
    later = submit_and_post(project, expert, WEEK_END + timedelta(hours=1))

    with pytest.raises(Conflict, match="earlier"):
        statement_settle_period(period_id=later.period_id, now=NEXT_WEEK_END)


def test_biweekly_periods_follow_the_project_setting():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    PaymentSettings.objects.create(project=project, period_length="biweekly")

    entry = submit_and_post(project, expert, T0)

    assert entry.period.ends_at - entry.period.starts_at == timedelta(days=14)


def test_payout_batches_are_approved_then_marked_paid_by_admins_only():
    expert, admin, pm = make_expert(), AdminFactory(), PMFactory()
    project = make_paid_project(experts=[expert, pm])
    entry = submit_and_post(project, expert, T0)
    batch = statement_settle_period(period_id=entry.period_id, now=WEEK_END).batch

    with pytest.raises(NotFound):
        payout_batch_approve(actor=pm, batch_id=batch.pk, now=WEEK_END)
    with pytest.raises(Conflict, match="Approve"):
        payout_batch_mark_paid(actor=admin, batch_id=batch.pk, now=WEEK_END, reference="TX-1")
    payout_batch_approve(actor=admin, batch_id=batch.pk, now=WEEK_END)
    paid = payout_batch_mark_paid(actor=admin, batch_id=batch.pk, now=WEEK_END, reference="TX-1")
    with pytest.raises(Conflict):
        payout_batch_mark_paid(actor=admin, batch_id=batch.pk, now=WEEK_END, reference="TX-1")

    assert (paid.status, paid.payment_reference, paid.paid_by_id) == ("paid", "TX-1", admin.pk)
