"""The database refuses to change money: ledger rows and statements are append-only, closed periods final."""
from decimal import Decimal

import pytest
from django.db import DatabaseError, connection, transaction

from payments.models import LedgerEntry, PayoutBatch, Period, Statement
from payments.services import statement_settle_period
from tests.payments.factories import T0, WEEK_END, make_expert, make_paid_project, submit_and_post

pytestmark = pytest.mark.django_db


@pytest.fixture
def settled():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    entry = submit_and_post(project, expert, T0)
    settlement = statement_settle_period(period_id=entry.period_id, now=WEEK_END)
    return entry, settlement


def _refused(action) -> None:
    with pytest.raises(DatabaseError), transaction.atomic():
        action()


def test_a_ledger_entry_cannot_be_updated_by_the_orm(settled):
    entry, _ = settled

    _refused(lambda: LedgerEntry.objects.filter(pk=entry.pk).update(amount=Decimal("500.00")))
    _refused(lambda: entry.save())

    entry.refresh_from_db()
    assert entry.amount == Decimal("5.00")


def test_a_ledger_entry_cannot_be_deleted(settled):
    entry, _ = settled

    _refused(lambda: LedgerEntry.objects.filter(pk=entry.pk).delete())

    assert LedgerEntry.objects.filter(pk=entry.pk).exists()


def _sql(statement: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def test_raw_sql_cannot_change_or_remove_a_ledger_entry(settled):
    entry, _ = settled

    _refused(lambda: _sql("UPDATE payments_ledgerentry SET amount = 0 WHERE id = %s", [entry.pk]))
    _refused(lambda: _sql("DELETE FROM payments_ledgerentry WHERE id = %s", [entry.pk]))

    assert LedgerEntry.objects.get(pk=entry.pk).amount == Decimal("5.00")


def test_a_closed_period_takes_no_new_entry_and_never_changes(settled):
    entry, settlement = settled
    period = settlement.period
    copy = {f.attname: getattr(entry, f.attname) for f in LedgerEntry._meta.concrete_fields if f.attname != "id"}
    copy |= {"idempotency_key": "forged", "kind": "earning"}

    _refused(lambda: LedgerEntry.objects.create(**copy))
    _refused(lambda: Period.objects.filter(pk=period.pk).update(ends_at=WEEK_END + (WEEK_END - T0)))
    _refused(lambda: Period.objects.filter(pk=period.pk).delete())


def test_statements_cannot_be_updated_or_deleted(settled):
    _, settlement = settled
    statement = settlement.statements[0]

    _refused(lambda: Statement.objects.filter(pk=statement.pk).update(total=Decimal("1.00")))
    _refused(lambda: _sql("DELETE FROM payments_statement WHERE id = %s", [statement.pk]))


def test_a_payout_batch_keeps_its_amounts_but_moves_through_its_states(settled):
    _, settlement = settled
    batch = settlement.batch

    _refused(lambda: PayoutBatch.objects.filter(pk=batch.pk).update(total=Decimal("0.00")))
    _refused(lambda: PayoutBatch.objects.filter(pk=batch.pk).delete())
    PayoutBatch.objects.filter(pk=batch.pk).update(status="approved", approved_at=WEEK_END)

    assert PayoutBatch.objects.get(pk=batch.pk).status == "approved"
