"""`reconcile_ledger` passes on an honest ledger and lists what is wrong with a tampered one."""
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from payments.models import Statement
from payments.reconciliation import ledger_reconcile
from payments.services import statement_settle_period
from tests.payments.factories import T0, WEEK_END, make_expert, make_paid_project, submit, submit_and_post

pytestmark = pytest.mark.django_db


def _reconcile() -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("reconcile_ledger", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_an_honest_ledger_reconciles():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    entry = submit_and_post(project, expert, T0)
    statement_settle_period(period_id=entry.period_id, now=WEEK_END)

    out, err = _reconcile()

    assert "reconciles" in out and err == ""


def test_a_submission_without_its_earning_is_reported():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    unpaid = submit(project, expert, T0)

    with pytest.raises(CommandError) as failure:
        call_command("reconcile_ledger", stdout=StringIO(), stderr=(err := StringIO()))

    assert failure.value.returncode == 1
    assert f"earning_missing: submitted assignment {unpaid.pk} has no earning" in err.getvalue()


def test_the_grace_period_spares_work_whose_task_is_still_on_its_way():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    submit(project, expert, T0)

    assert ledger_reconcile(now=T0 + timedelta(seconds=30), grace=timedelta(minutes=1)) == []
    assert [p.code for p in ledger_reconcile(now=T0 + timedelta(minutes=2), grace=timedelta(minutes=1))] == [
        "earning_missing"]


@pytest.mark.postgres
def test_a_statement_that_differs_from_its_lines_is_reported():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    entry = submit_and_post(project, expert, T0)
    [statement] = statement_settle_period(period_id=entry.period_id, now=WEEK_END).statements
    with connection.cursor() as cursor:
        # Only the table's owner can do this; the rollback of the test restores the trigger.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE payments_statement DISABLE TRIGGER payments_statement_append_only")
        cursor.execute("UPDATE payments_statement SET total = 50, payable = 50 WHERE id = %s", [statement.pk])

    problems = {p.code: p.message for p in ledger_reconcile()}

    assert problems["statement_total"].startswith(f"statement {statement.pk} ")
    assert "50.00" in problems["statement_total"] and "5.00" in problems["statement_total"]
    assert "batch_total" in problems


def test_a_forged_statement_without_entries_is_reported():
    expert, other = make_expert(), make_expert()
    project = make_paid_project(experts=[expert])
    entry = submit_and_post(project, expert, T0)
    statement_settle_period(period_id=entry.period_id, now=WEEK_END)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO payments_statement (period_id, project_id, expert_id, currency, total, entry_count, "
            "carried_in, payable, carried_out, created_at) VALUES (%s, %s, %s, 'CNY', 7, 1, 0, 7, 0, %s)",
            [entry.period_id, project.pk, other.pk, WEEK_END])

    codes = [p.code for p in ledger_reconcile()]

    assert codes == ["statement_total", "batch_total"]
    assert Statement.objects.count() == 2
