"""Inserting rubric items into a published version is refused once per statement, not per row.

The row trigger of 0002 looked the version up for every inserted item: about 1.6 s of the
COPY of a 10,000-question import's 105,000 items. An AFTER INSERT statement trigger reads the
statement's new rows (a transition table) and refuses the whole statement when any of them
belongs to a published version: the same rule, one query. Updates and deletes keep the row
trigger (they need the old row). SQLite keeps its triggers of 0002.
"""
from django.db import migrations

from core.db import VendorSQL

INSERT_GUARD = """
CREATE OR REPLACE FUNCTION rubrica_refuse_published_item_insert() RETURNS trigger AS $$
DECLARE
  published bigint;
BEGIN
  SELECT v.id INTO published FROM rubrica_added a JOIN rubrics_rubricversion v ON v.id = a.version_id
   WHERE v.status = 'published' LIMIT 1;
  IF published IS NOT NULL THEN
    RAISE EXCEPTION 'rubric version % is published and cannot change', published
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

FORWARD = [
    INSERT_GUARD,
    "DROP TRIGGER rubrica_item_guard ON rubrics_rubricitem",
    "CREATE TRIGGER rubrica_item_guard BEFORE UPDATE OR DELETE ON rubrics_rubricitem "
    "FOR EACH ROW EXECUTE FUNCTION rubrica_refuse_published_item()",
    "CREATE TRIGGER rubrica_item_insert_guard AFTER INSERT ON rubrics_rubricitem "
    "REFERENCING NEW TABLE AS rubrica_added FOR EACH STATEMENT EXECUTE FUNCTION rubrica_refuse_published_item_insert()",
]
BACKWARD = [
    "DROP TRIGGER IF EXISTS rubrica_item_insert_guard ON rubrics_rubricitem",
    "DROP FUNCTION IF EXISTS rubrica_refuse_published_item_insert()",
    "DROP TRIGGER rubrica_item_guard ON rubrics_rubricitem",
    "CREATE TRIGGER rubrica_item_guard BEFORE INSERT OR UPDATE OR DELETE ON rubrics_rubricitem "
    "FOR EACH ROW EXECUTE FUNCTION rubrica_refuse_published_item()",
]


class Migration(migrations.Migration):
    dependencies = [("rubrics", "0004_rubricversion_published_by")]

    operations = [
        VendorSQL(postgresql=FORWARD, sqlite=[], reverse_postgresql=BACKWARD, reverse_sqlite=[]),
    ]
