"""Guidelines (Markdown) on each rubric version, frozen with it once published.

PostgreSQL adds the column in place: no row is updated, so the trigger that refuses
changes to a published version neither fires nor needs touching, and it covers the new
column from now on. SQLite cannot add a NOT NULL column in place: Django rebuilds the
table (new table, copy, drop, rename), and the item triggers of 0002, which name
rubrics_rubricversion, break the rename while the version triggers go with the old
table. So on SQLite the five triggers are dropped first and created again afterwards,
word for word as 0002 made them (copied, not imported: this migration must not change
when 0002's module does).
"""
from django.db import migrations, models

from core.db import VendorSQL

MSG = "'published rubric versions cannot change'"
SQLITE_TRIGGERS = [
    f"""CREATE TRIGGER rubrica_item_insert_guard BEFORE INSERT ON rubrics_rubricitem
        WHEN EXISTS (SELECT 1 FROM rubrics_rubricversion WHERE id = NEW.version_id AND status = 'published')
        BEGIN SELECT RAISE(ABORT, {MSG}); END""",
    f"""CREATE TRIGGER rubrica_item_update_guard BEFORE UPDATE ON rubrics_rubricitem
        WHEN EXISTS (SELECT 1 FROM rubrics_rubricversion WHERE id IN (OLD.version_id, NEW.version_id)
                     AND status = 'published')
        BEGIN SELECT RAISE(ABORT, {MSG}); END""",
    f"""CREATE TRIGGER rubrica_item_delete_guard BEFORE DELETE ON rubrics_rubricitem
        WHEN EXISTS (SELECT 1 FROM rubrics_rubricversion WHERE id = OLD.version_id AND status = 'published')
        BEGIN SELECT RAISE(ABORT, {MSG}); END""",
    f"""CREATE TRIGGER rubrica_version_update_guard BEFORE UPDATE ON rubrics_rubricversion
        WHEN OLD.status = 'published' BEGIN SELECT RAISE(ABORT, {MSG}); END""",
    f"""CREATE TRIGGER rubrica_version_delete_guard BEFORE DELETE ON rubrics_rubricversion
        WHEN OLD.status = 'published' BEGIN SELECT RAISE(ABORT, {MSG}); END""",
]
SQLITE_DROP = [
    f"DROP TRIGGER IF EXISTS {name}" for name in (
        "rubrica_item_insert_guard", "rubrica_item_update_guard", "rubrica_item_delete_guard",
        "rubrica_version_update_guard", "rubrica_version_delete_guard",
    )
]



class Migration(migrations.Migration):
    dependencies = [("rubrics", "0002_taxonomy_and_immutability")]

    operations = [
        # Forwards: drop, add the column, create again. Backwards runs the list in reverse:
        # drop, remove the column (another rebuild), create again.
        VendorSQL(postgresql=[], sqlite=SQLITE_DROP, reverse_postgresql=[], reverse_sqlite=SQLITE_TRIGGERS),
        migrations.AddField(
            model_name="rubricversion",
            name="guidelines",
            field=models.TextField(blank=True, default="", db_default=""),
        ),
        VendorSQL(postgresql=[], sqlite=SQLITE_TRIGGERS, reverse_postgresql=[], reverse_sqlite=SQLITE_DROP),
    ]
