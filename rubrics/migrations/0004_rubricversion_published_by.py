"""Who published each rubric version (the changelog's author).

PostgreSQL adds the nullable column in place, without touching a row, so the trigger
that refuses changes to published versions stays as it is. SQLite rebuilds the table for
a foreign key, which breaks the triggers of 0002 (see 0003): they are dropped first and
created again afterwards, word for word (copied, not imported, so this migration never
changes when another module does).
"""
import django.db.models.deletion
from django.conf import settings
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
    dependencies = [
        ("rubrics", "0003_rubric_version_guidelines"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        VendorSQL(postgresql=[], sqlite=SQLITE_DROP, reverse_postgresql=[], reverse_sqlite=SQLITE_TRIGGERS),
        migrations.AddField(
            model_name="rubricversion",
            name="published_by",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT,
                                    related_name="+", to=settings.AUTH_USER_MODEL),
        ),
        VendorSQL(postgresql=[], sqlite=SQLITE_TRIGGERS, reverse_postgresql=[], reverse_sqlite=SQLITE_DROP),
    ]
