"""Row locks of the payments app, always taken in one order so concurrent work never deadlocks.

Lock order policy (a function that needs several takes them top to bottom; rows of one
kind in ascending pk):

1. `PaymentSettings` of the project, FOR UPDATE: settlement, and opening a new period.
   It serialises everything that changes the set of periods of one project.
2. `Period`, FOR UPDATE by settlement (closing it), FOR SHARE by ledger posting (an
   entry is inserted into an open period). The two conflict, so a settlement waits for
   entries being posted into its period and an entry posted meanwhile finds the period
   closed and goes to the next one; postings do not wait for each other.
3. `PayoutBatch`, FOR UPDATE: approving and marking paid.

Apart from that chain, and before it: `Appeal` (`appeal_lock`), FOR UPDATE while it is
decided. It is the first lock of its transaction; accepting a rejection appeal then takes
annotation's task and assignment (its order, `annotation.lock_objects`) and posts the
correction (the period share lock above). No code that holds an annotation or period lock
ever asks for an appeal, so two deciders queue on the appeal row and the second finds it
decided.

Ledger posting takes no lock of a lower app: it runs in its own transaction after the
submission committed (or within a rejection, which holds no annotation lock).
"""
from django.db import connection

from payments.models import Appeal, PaymentSettings, PayoutBatch, Period


def payment_settings_lock(project_id: int) -> PaymentSettings:
    """The project's payment settings row, created with defaults if missing, locked FOR UPDATE."""
    PaymentSettings.objects.get_or_create(project_id=project_id)
    return PaymentSettings.objects.select_for_update(of=("self",)).get(project_id=project_id)


def period_lock(period_id: int) -> Period:
    return Period.objects.select_for_update(of=("self",)).get(pk=period_id)


def period_share_if_open(period_id: int) -> bool:
    """Share-lock the period and tell whether it is still open once the lock is held.

    Django offers FOR UPDATE but not FOR SHARE; FOR UPDATE here would make concurrent
    postings into one period queue behind each other, so these few lines are raw SQL.
    SQLite has no row locks: its IMMEDIATE transactions already serialise writers.
    """
    if connection.vendor != "postgresql":
        return Period.objects.filter(pk=period_id, status=Period.Status.OPEN).exists()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT status FROM {Period._meta.db_table} WHERE id = %s FOR SHARE", [period_id])
        row = cursor.fetchone()
    return row is not None and row[0] == Period.Status.OPEN


def payout_batch_lock(batch_id: int) -> PayoutBatch:
    return PayoutBatch.objects.select_for_update(of=("self",)).get(pk=batch_id)


def appeal_lock(appeal_id: int) -> Appeal:
    return Appeal.objects.select_for_update(of=("self",)).get(pk=appeal_id)
