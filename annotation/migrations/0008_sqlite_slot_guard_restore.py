"""Create the SQLite slot-guard triggers of 0003 again.

On SQLite, 0004 added columns to annotation_assignment by rebuilding the table (new
table, copy, drop, rename), and the triggers went with the dropped table: since then a
SQLite database accepted slots beyond the task's overlap. PostgreSQL alters the table
in place and kept its trigger, so it has nothing to do here.
"""
from django.db import migrations

from core.db import VendorSQL

SQLITE_WHEN = "WHEN NEW.slot > (SELECT overlap FROM annotation_task WHERE id = NEW.task_id)"
SQLITE_BODY = "BEGIN SELECT RAISE(ABORT, 'assignment slot beyond the task overlap'); END"


class Migration(migrations.Migration):
    dependencies = [("annotation", "0007_judging_fields")]

    operations = [
        VendorSQL(
            postgresql=[],
            sqlite=[
                f"CREATE TRIGGER IF NOT EXISTS rubrica_assignment_slot_insert BEFORE INSERT ON annotation_assignment "
                f"{SQLITE_WHEN} {SQLITE_BODY}",
                f"CREATE TRIGGER IF NOT EXISTS rubrica_assignment_slot_update BEFORE UPDATE OF slot, task_id "
                f"ON annotation_assignment {SQLITE_WHEN} {SQLITE_BODY}",
            ],
            reverse_postgresql=[],
            # Back to the state after 0007, where SQLite had lost them.
            reverse_sqlite=[
                "DROP TRIGGER IF EXISTS rubrica_assignment_slot_insert",
                "DROP TRIGGER IF EXISTS rubrica_assignment_slot_update",
            ],
        ),
    ]
