from django.db import migrations

from core.db import VendorSQL

PG_SLOT_GUARD = """
CREATE OR REPLACE FUNCTION rubrica_assignment_slot_within_overlap() RETURNS trigger AS $$
BEGIN
  IF NEW.slot > (SELECT overlap FROM annotation_task WHERE id = NEW.task_id) THEN
    RAISE EXCEPTION 'slot % is beyond the overlap of task %', NEW.slot, NEW.task_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
"""
SQLITE_WHEN = "WHEN NEW.slot > (SELECT overlap FROM annotation_task WHERE id = NEW.task_id)"
SQLITE_BODY = "BEGIN SELECT RAISE(ABORT, 'assignment slot beyond the task overlap'); END"


class Migration(migrations.Migration):
    dependencies = [("annotation", "0002_initial")]

    operations = [
        VendorSQL(
            postgresql=[
                PG_SLOT_GUARD,
                "CREATE TRIGGER rubrica_assignment_slot_guard BEFORE INSERT OR UPDATE OF slot, task_id "
                "ON annotation_assignment FOR EACH ROW EXECUTE FUNCTION rubrica_assignment_slot_within_overlap()",
            ],
            sqlite=[
                f"CREATE TRIGGER rubrica_assignment_slot_insert BEFORE INSERT ON annotation_assignment "
                f"{SQLITE_WHEN} {SQLITE_BODY}",
                f"CREATE TRIGGER rubrica_assignment_slot_update BEFORE UPDATE OF slot, task_id "
                f"ON annotation_assignment {SQLITE_WHEN} {SQLITE_BODY}",
            ],
            reverse_postgresql=[
                "DROP TRIGGER IF EXISTS rubrica_assignment_slot_guard ON annotation_assignment",
                "DROP FUNCTION IF EXISTS rubrica_assignment_slot_within_overlap()",
            ],
            reverse_sqlite=[
                "DROP TRIGGER IF EXISTS rubrica_assignment_slot_insert",
                "DROP TRIGGER IF EXISTS rubrica_assignment_slot_update",
            ],
        ),
    ]
