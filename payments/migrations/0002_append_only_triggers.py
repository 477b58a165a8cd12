"""The database refuses what the money must never do, whatever the caller (ORM update(), raw SQL).

- ledger entries and statements: no UPDATE, no DELETE;
- no new ledger entry in a closed period (its statements are written);
- a closed period never changes and is never deleted;
- a payout batch is never deleted, its amounts never change, and a paid batch is final.

TRUNCATE stays possible: it is how the test database is reset, and who may truncate is
a matter of database roles, not of rows.
"""
from django.db import migrations

from core.db import VendorSQL

PG_REFUSE = """
CREATE OR REPLACE FUNCTION payments_refuse_change() RETURNS trigger AS $$
BEGIN
  RAISE EXCEPTION '% on % is refused: payments rows are append-only', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'check_violation';
END $$ LANGUAGE plpgsql;
"""
PG_ENTRY_PERIOD_OPEN = """
CREATE OR REPLACE FUNCTION payments_entry_period_open() RETURNS trigger AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM payments_period WHERE id = NEW.period_id AND status = 'closed') THEN
    RAISE EXCEPTION 'period % is closed: no new ledger entry', NEW.period_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
"""
BATCH_AMOUNTS_CHANGE = ("NEW.period_id <> OLD.period_id OR NEW.project_id <> OLD.project_id "
                        "OR NEW.total <> OLD.total OR NEW.statement_count <> OLD.statement_count "
                        "OR NEW.currency <> OLD.currency OR OLD.status = 'paid'")

POSTGRESQL = [
    PG_REFUSE,
    PG_ENTRY_PERIOD_OPEN,
    "CREATE TRIGGER payments_ledgerentry_append_only BEFORE UPDATE OR DELETE ON payments_ledgerentry "
    "FOR EACH ROW EXECUTE FUNCTION payments_refuse_change()",
    "CREATE TRIGGER payments_ledgerentry_period_open BEFORE INSERT ON payments_ledgerentry "
    "FOR EACH ROW EXECUTE FUNCTION payments_entry_period_open()",
    "CREATE TRIGGER payments_statement_append_only BEFORE UPDATE OR DELETE ON payments_statement "
    "FOR EACH ROW EXECUTE FUNCTION payments_refuse_change()",
    "CREATE TRIGGER payments_period_closed_final BEFORE UPDATE OR DELETE ON payments_period "
    "FOR EACH ROW WHEN (OLD.status = 'closed') EXECUTE FUNCTION payments_refuse_change()",
    "CREATE TRIGGER payments_payoutbatch_no_delete BEFORE DELETE ON payments_payoutbatch "
    "FOR EACH ROW EXECUTE FUNCTION payments_refuse_change()",
    f"CREATE TRIGGER payments_payoutbatch_amounts_final BEFORE UPDATE ON payments_payoutbatch "
    f"FOR EACH ROW WHEN ({BATCH_AMOUNTS_CHANGE}) EXECUTE FUNCTION payments_refuse_change()",
]
REVERSE_POSTGRESQL = [
    "DROP TRIGGER IF EXISTS payments_payoutbatch_amounts_final ON payments_payoutbatch",
    "DROP TRIGGER IF EXISTS payments_payoutbatch_no_delete ON payments_payoutbatch",
    "DROP TRIGGER IF EXISTS payments_period_closed_final ON payments_period",
    "DROP TRIGGER IF EXISTS payments_statement_append_only ON payments_statement",
    "DROP TRIGGER IF EXISTS payments_ledgerentry_period_open ON payments_ledgerentry",
    "DROP TRIGGER IF EXISTS payments_ledgerentry_append_only ON payments_ledgerentry",
    "DROP FUNCTION IF EXISTS payments_entry_period_open()",
    "DROP FUNCTION IF EXISTS payments_refuse_change()",
]


def _sqlite_refuse(name: str, event: str, table: str, when: str = "") -> str:
    condition = f" WHEN {when}" if when else ""
    return (f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW{condition} "
            f"BEGIN SELECT RAISE(ABORT, '{event} on {table} is refused: payments rows are append-only'); END")


SQLITE = [
    _sqlite_refuse("payments_ledgerentry_no_update", "UPDATE", "payments_ledgerentry"),
    _sqlite_refuse("payments_ledgerentry_no_delete", "DELETE", "payments_ledgerentry"),
    _sqlite_refuse("payments_ledgerentry_period_open", "INSERT", "payments_ledgerentry",
                   "EXISTS (SELECT 1 FROM payments_period WHERE id = NEW.period_id AND status = 'closed')"),
    _sqlite_refuse("payments_statement_no_update", "UPDATE", "payments_statement"),
    _sqlite_refuse("payments_statement_no_delete", "DELETE", "payments_statement"),
    _sqlite_refuse("payments_period_closed_no_update", "UPDATE", "payments_period", "OLD.status = 'closed'"),
    _sqlite_refuse("payments_period_closed_no_delete", "DELETE", "payments_period", "OLD.status = 'closed'"),
    _sqlite_refuse("payments_payoutbatch_no_delete", "DELETE", "payments_payoutbatch"),
    _sqlite_refuse("payments_payoutbatch_amounts_final", "UPDATE", "payments_payoutbatch", BATCH_AMOUNTS_CHANGE),
]
REVERSE_SQLITE = [
    f"DROP TRIGGER IF EXISTS {name}" for name in (
        "payments_ledgerentry_no_update", "payments_ledgerentry_no_delete", "payments_ledgerentry_period_open",
        "payments_statement_no_update", "payments_statement_no_delete", "payments_period_closed_no_update",
        "payments_period_closed_no_delete", "payments_payoutbatch_no_delete", "payments_payoutbatch_amounts_final",
    )
]


class Migration(migrations.Migration):
    dependencies = [("payments", "0001_ledger")]

    operations = [
        VendorSQL(postgresql=POSTGRESQL, sqlite=SQLITE,
                  reverse_postgresql=REVERSE_POSTGRESQL, reverse_sqlite=REVERSE_SQLITE),
    ]
