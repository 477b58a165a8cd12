"""The board's search text moves from a column of the question to a table of its own.

The trigram index over the text was the largest share of an import's database time (about 3 of
6.5 s of PostgreSQL CPU for 10,000 HeartBench questions): every imported question's 3 KB of
text was cut into trigrams inside the import's transaction. With the text in its own table, an
import writes no search rows and its follow-up task writes them after commit; the question row
no longer carries a second copy of its dialogue either.

The existing text is copied over as it is (it was written by the same function), then the old
column and its index go. On a large installation this runs under the migration's lock: about
a second per 10,000 questions for the copy and as much again for the new index.
"""
from django.db import migrations, models

from core.db import VendorSQL

OLD_INDEX = '"annotation_question_search_text_trgm"'
NEW_INDEX = '"annotation_questionsearch_text_trgm"'
COPY = ('INSERT INTO "annotation_questionsearch" ("question_id", "text") '
        'SELECT "id", "search_text" FROM "annotation_question"')
COPY_BACK_POSTGRESQL = ('UPDATE "annotation_question" AS q SET "search_text" = s."text" '
                        'FROM "annotation_questionsearch" AS s WHERE s."question_id" = q."id"')
COPY_BACK_SQLITE = ('UPDATE "annotation_question" SET "search_text" = (SELECT s."text" FROM '
                    '"annotation_questionsearch" AS s WHERE s."question_id" = "annotation_question"."id") '
                    'WHERE "id" IN (SELECT "question_id" FROM "annotation_questionsearch")')
# As the old index was (0032, 0039): entries wait in the pending list, which may hold a whole
# large backfill (2 GB), and the follow-up task merges them.
CREATE_NEW = [f'CREATE INDEX {NEW_INDEX} ON "annotation_questionsearch" USING gin ("text" gin_trgm_ops) '
              'WITH (fastupdate = on, gin_pending_list_limit = 2097151)']
CREATE_OLD = [f'CREATE INDEX {OLD_INDEX} ON "annotation_question" USING gin ("search_text" gin_trgm_ops) '
              'WITH (fastupdate = on, gin_pending_list_limit = 2097151)']


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0041_batch_job_reject_op"),
    ]

    operations = [
        migrations.CreateModel(
            name="QuestionSearch",
            fields=[
                ("question", models.OneToOneField(on_delete=models.deletion.CASCADE, primary_key=True,
                                                  related_name="search", serialize=False,
                                                  to="annotation.question")),
                ("text", models.TextField()),
            ],
        ),
        VendorSQL(postgresql=[COPY, f"DROP INDEX IF EXISTS {OLD_INDEX}"], sqlite=[COPY],
                  reverse_postgresql=[COPY_BACK_POSTGRESQL] + CREATE_OLD, reverse_sqlite=[COPY_BACK_SQLITE]),
        migrations.RemoveField(model_name="question", name="search_text"),
        VendorSQL(postgresql=CREATE_NEW, sqlite=[], reverse_postgresql=[f"DROP INDEX IF EXISTS {NEW_INDEX}"],
                  reverse_sqlite=[]),
    ]
