"""Two of a rubric item's seven indexes were never used, and each imported item paid for them.

- the index on `version_id` alone: both unique constraints, (version, item_key) and
  (version, question_ref, position), lead with the version and serve every lookup by it;
- PostgreSQL's `varchar_pattern_ops` copy of the `question_ref` index, made for `LIKE 'x%'`
  lookups, which nothing makes (question refs are matched whole).

The index names are dropped directly (on SQLite an AlterField would rebuild the table and lose
its immutability triggers, see core.db.VendorSQL); the state records the version's index gone.
"""
from django.db import migrations, models

from core.db import VendorSQL

VERSION_INDEX = '"rubrics_rubricitem_version_id_24f853f7"'
LIKE_INDEX = '"rubrics_rubricitem_question_ref_6db3a0bc_like"'
CREATE_VERSION = f'CREATE INDEX {VERSION_INDEX} ON "rubrics_rubricitem" ("version_id")'
CREATE_LIKE = f'CREATE INDEX {LIKE_INDEX} ON "rubrics_rubricitem" ("question_ref" varchar_pattern_ops)'


class Migration(migrations.Migration):

    dependencies = [
        ("rubrics", "0005_item_insert_guard_per_statement"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="rubricitem",
                    name="version",
                    field=models.ForeignKey(db_index=False, on_delete=models.deletion.PROTECT, related_name="items",
                                            to="rubrics.rubricversion"),
                ),
            ],
            database_operations=[
                VendorSQL(postgresql=[f"DROP INDEX IF EXISTS {VERSION_INDEX}", f"DROP INDEX IF EXISTS {LIKE_INDEX}"],
                          sqlite=[f"DROP INDEX IF EXISTS {VERSION_INDEX}"],
                          reverse_postgresql=[CREATE_VERSION, CREATE_LIKE], reverse_sqlite=[CREATE_VERSION]),
            ],
        ),
    ]
