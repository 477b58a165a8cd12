"""A rubric item's two references (its version, its dimension) are checked once per statement.

PostgreSQL checks a foreign key with one query per inserted row, queued until commit: the
210,000 checks of a 10,000-question import's 105,000 items took about 2 s, half the import.
The same rule, set-based, as 0005 did for the published-version guard:

- after each INSERT or UPDATE statement on items, the distinct versions and dimensions its new
  rows name are locked `FOR KEY SHARE` (what a foreign key check locks, so a concurrent delete
  of one waits for this transaction), then any row naming a version or a dimension that does
  not exist fails the whole statement with SQLSTATE 23503 (foreign_key_violation, as before);
- deleting a version or a dimension, or changing its id, while an item names it fails the same
  way (a row trigger: such deletes are rare and look one index up).

Django keeps `on_delete=PROTECT` (it refuses such deletes itself before the database does);
the model says `db_constraint=False` because the constraint is these triggers now. SQLite
keeps its foreign keys: the embedded mode imports small files and pays little for them.
"""
from django.db import migrations, models

from core.db import VendorSQL

FOREIGN_KEYS = {
    "version": ("rubrics_rubricitem_version_id_24f853f7_fk_rubrics_r", "version_id", "rubrics_rubricversion"),
    "dimension": ("rubrics_rubricitem_dimension_id_ecd2b235_fk_rubrics_d", "dimension_id", "rubrics_dimension"),
}

CHECK_ADDED = """
CREATE OR REPLACE FUNCTION rubrica_item_references_check() RETURNS trigger AS $$
DECLARE
  missing bigint;
BEGIN
  PERFORM 1 FROM rubrics_rubricversion v WHERE v.id IN (SELECT DISTINCT version_id FROM rubrica_items_new)
     FOR KEY SHARE;
  PERFORM 1 FROM rubrics_dimension d WHERE d.id IN (SELECT DISTINCT dimension_id FROM rubrica_items_new)
     FOR KEY SHARE;
  SELECT n.version_id INTO missing FROM rubrica_items_new n
   WHERE NOT EXISTS (SELECT 1 FROM rubrics_rubricversion v WHERE v.id = n.version_id) LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'rubric item names rubric version %, which does not exist', missing
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  SELECT n.dimension_id INTO missing FROM rubrica_items_new n
   WHERE NOT EXISTS (SELECT 1 FROM rubrics_dimension d WHERE d.id = n.dimension_id) LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'rubric item names dimension %, which does not exist', missing
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

REFUSE_REFERENCED = """
CREATE OR REPLACE FUNCTION rubrica_item_referenced_refuse() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
    RETURN NEW;
  END IF;
  IF (TG_TABLE_NAME = 'rubrics_rubricversion'
      AND EXISTS (SELECT 1 FROM rubrics_rubricitem WHERE version_id = OLD.id))
     OR (TG_TABLE_NAME = 'rubrics_dimension'
      AND EXISTS (SELECT 1 FROM rubrics_rubricitem WHERE dimension_id = OLD.id)) THEN
    RAISE EXCEPTION '% % has rubric items and cannot be deleted or renumbered', TG_TABLE_NAME, OLD.id
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
"""

FORWARD = [
    *(f'ALTER TABLE rubrics_rubricitem DROP CONSTRAINT IF EXISTS "{name}"' for name, _c, _t in FOREIGN_KEYS.values()),
    CHECK_ADDED,
    REFUSE_REFERENCED,
    "CREATE TRIGGER rubrica_item_references_insert AFTER INSERT ON rubrics_rubricitem "
    "REFERENCING NEW TABLE AS rubrica_items_new FOR EACH STATEMENT EXECUTE FUNCTION rubrica_item_references_check()",
    "CREATE TRIGGER rubrica_item_references_update AFTER UPDATE ON rubrics_rubricitem "
    "REFERENCING NEW TABLE AS rubrica_items_new FOR EACH STATEMENT EXECUTE FUNCTION rubrica_item_references_check()",
    *(f"CREATE TRIGGER rubrica_item_referenced BEFORE DELETE OR UPDATE OF id ON {table} "
      "FOR EACH ROW EXECUTE FUNCTION rubrica_item_referenced_refuse()" for _n, _c, table in FOREIGN_KEYS.values()),
]
BACKWARD = [
    *(f"DROP TRIGGER IF EXISTS rubrica_item_referenced ON {table}" for _n, _c, table in FOREIGN_KEYS.values()),
    "DROP TRIGGER IF EXISTS rubrica_item_references_update ON rubrics_rubricitem",
    "DROP TRIGGER IF EXISTS rubrica_item_references_insert ON rubrics_rubricitem",
    "DROP FUNCTION IF EXISTS rubrica_item_referenced_refuse()",
    "DROP FUNCTION IF EXISTS rubrica_item_references_check()",
    *(f'ALTER TABLE rubrics_rubricitem ADD CONSTRAINT "{name}" FOREIGN KEY ({column}) REFERENCES {table} (id) '
      "DEFERRABLE INITIALLY DEFERRED" for name, column, table in FOREIGN_KEYS.values()),
]


class Migration(migrations.Migration):

    dependencies = [
        ("rubrics", "0006_item_indexes_covered"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="rubricitem",
                    name="version",
                    field=models.ForeignKey(db_constraint=False, db_index=False,
                                            on_delete=models.deletion.PROTECT, related_name="items",
                                            to="rubrics.rubricversion"),
                ),
                migrations.AlterField(
                    model_name="rubricitem",
                    name="dimension",
                    field=models.ForeignKey(db_constraint=False, on_delete=models.deletion.PROTECT,
                                            related_name="items", to="rubrics.dimension"),
                ),
            ],
            database_operations=[
                VendorSQL(postgresql=FORWARD, sqlite=[], reverse_postgresql=BACKWARD, reverse_sqlite=[]),
            ],
        ),
    ]
