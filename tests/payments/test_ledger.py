"""Earnings: one per paid submission, at the price in force when it was submitted, posted idempotently."""
from decimal import Decimal

import pytest

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, Task
from payments.ledger import earnings_sweep, ledger_post_earning, ledger_post_reversal
from payments.models import LedgerEntry, Period
from tests.payments.factories import (
    T0,
    WEEK_END,
    WEEK_START,
    make_expert,
    make_paid_project,
    set_tier,
    submit,
    submit_and_post,
)

pytestmark = pytest.mark.django_db


def test_a_submission_posts_its_earning_through_the_task_sent_on_commit(django_capture_on_commit_callbacks):
    expert = make_expert()
    project = make_paid_project(experts=[expert])

    with django_capture_on_commit_callbacks(execute=True):
        assignment = submit(project, expert, T0)

    entry = LedgerEntry.objects.get()
    assert entry.idempotency_key == f"earning:{assignment.pk}"
    assert (entry.kind, entry.amount, entry.currency) == ("earning", Decimal("5.00"), "CNY")
    assert (entry.expert_id, entry.assignment_id, entry.project_id) == (expert.pk, assignment.pk, project.pk)
    assert entry.period.starts_at <= entry.posted_at < entry.period.ends_at


def test_posting_twice_leaves_one_earning():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    first = submit_and_post(project, expert, T0)

    again = ledger_post_earning(assignment_id=first.assignment_id, now=T0)

    assert again.pk == first.pk
    assert LedgerEntry.objects.count() == 1


def test_the_tier_recorded_at_submission_sets_the_multiplier():
    expert = make_expert("gold")
    project = make_paid_project(experts=[expert])
    assignment = submit(project, expert, T0)
    set_tier(expert, "bronze")

    entry = ledger_post_earning(assignment_id=assignment.pk, now=T0)

    assert (entry.tier, entry.multiplier, entry.amount) == ("gold", Decimal("1.5"), Decimal("7.50"))


def test_calibration_is_not_paid():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    assignment = submit(project, expert, T0)
    Assignment.objects.filter(pk=assignment.pk).update(kind=Assignment.Kind.CALIBRATION)

    assert ledger_post_earning(assignment_id=assignment.pk, now=T0) is None
    assert earnings_sweep(now=T0) == 0
    assert not LedgerEntry.objects.exists()


def test_silent_control_tasks_are_paid_like_real_work():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    assignment = submit(project, expert, T0)
    Task.objects.filter(pk=assignment.task_id).update(is_golden=True)

    entry = ledger_post_earning(assignment_id=assignment.pk, now=T0)

    assert entry.amount == Decimal("5.00")


def test_an_unsubmitted_or_missing_assignment_earns_nothing():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    lease = assignment_claim_next(project=project, expert=expert, now=T0)

    assert ledger_post_earning(assignment_id=lease.pk, now=T0) is None
    assert ledger_post_earning(assignment_id=10**9, now=T0) is None


def test_the_sweep_posts_what_a_lost_task_left_out():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    submitted = [submit(project, expert, T0), submit(project, expert, T0)]

    posted = earnings_sweep(now=T0)

    assert posted == 2
    assert set(LedgerEntry.objects.values_list("assignment_id", flat=True)) == {a.pk for a in submitted}
    assert earnings_sweep(now=T0) == 0


def test_a_reversal_cancels_the_earning_and_posts_it_first_when_missing():
    expert = make_expert("silver")
    project = make_paid_project(experts=[expert])
    assignment = submit(project, expert, T0)

    reversal = ledger_post_reversal(assignment_id=assignment.pk, reason="copy-paste", actor=None, now=T0)

    earning = LedgerEntry.objects.get(kind="earning")
    assert (reversal.amount, reversal.reverses_id, reversal.reason) == (Decimal("-6.00"), earning.pk, "copy-paste")
    assert reversal.idempotency_key == f"reversal:{assignment.pk}"
    assert ledger_post_reversal(assignment_id=assignment.pk, reason="again", actor=None, now=T0).pk == reversal.pk


def test_entries_go_to_the_open_period_of_their_posting_instant():
    expert = make_expert()
    project = make_paid_project(experts=[expert])

    first = submit_and_post(project, expert, T0)
    second = submit_and_post(project, expert, WEEK_END)

    assert first.period_id != second.period_id
    assert list(Period.objects.order_by("starts_at").values_list("starts_at", "ends_at")) == [
        (WEEK_START, WEEK_END), (WEEK_END, WEEK_END + (WEEK_END - WEEK_START))]


def test_posting_an_earning_takes_three_statements_however_long_the_history(django_assert_num_queries):
    """The read (assignment, price rule and multiplier in force, currency, open period), the period's
    share lock and the insert: the same three with 30 earlier earnings and a history of price changes."""
    from datetime import timedelta

    from payments.models import PriceRule, TierMultiplier

    expert = make_expert("silver")
    project = make_paid_project(experts=[expert], n_questions=32, overlap=1)
    for weeks in range(1, 6):
        at = T0 - timedelta(weeks=weeks)
        PriceRule.objects.create(project=project, difficulty="normal", amount=f"{5 + weeks}.25", effective_from=at)
        TierMultiplier.objects.create(project=project, tier="silver", multiplier=f"1.{weeks}", effective_from=at)
    for _ in range(30):
        submit_and_post(project, expert, T0 - timedelta(hours=1))
    assignment = submit(project, expert, T0)

    with django_assert_num_queries(3):
        entry = ledger_post_earning(assignment_id=assignment.pk, now=T0)

    # The rule and multiplier of a week ago (the latest in force): 6.25 x 1.1 = 6.875, half-up 6.88.
    assert (entry.base_price, entry.multiplier, entry.amount) == (Decimal("6.25"), Decimal("1.1"), Decimal("6.88"))
    stored = LedgerEntry.objects.get(pk=entry.pk)
    assert [getattr(stored, f.attname) for f in LedgerEntry._meta.concrete_fields] == [
        getattr(entry, f.attname) for f in LedgerEntry._meta.concrete_fields]
    with django_assert_num_queries(2):  # already posted: the read, then the entry
        assert ledger_post_earning(assignment_id=assignment.pk, now=T0).pk == entry.pk
