"""The board searches a stored plain-text copy of each question (its turns' contents and the
final user turn, upper-cased) instead of `UPPER(dialogue::text)` on every row: no JSON cast per
question and no keys or escapes in what is matched. The trigram indexes of 0026 over the JSON
and the final turn are replaced by one over the copy."""
from django.db import migrations, models

from core.db import VendorSQL

OLD_INDEXES = ("final_user_turn", "dialogue")
CREATE_OLD = [f'CREATE INDEX "annotation_question_{column}_trgm" ON "annotation_question" '
              f'USING gin ((UPPER("{column}"::text)) gin_trgm_ops)' for column in OLD_INDEXES]
DROP_OLD = [f'DROP INDEX IF EXISTS "annotation_question_{column}_trgm"' for column in OLD_INDEXES]
# Inserted entries wait in the index's pending list (up to 256 MB) instead of being merged one
# question at a time (2.5 ms a question, 7.6 of an import's 10 s for 3,000 questions); the
# import's follow-up task `annotation.question_search_merge` merges them after commit.
CREATE_NEW = ['CREATE INDEX "annotation_question_search_text_trgm" ON "annotation_question" '
              'USING gin ("search_text" gin_trgm_ops) WITH (fastupdate = on, gin_pending_list_limit = 262144)']
DROP_NEW = ['DROP INDEX IF EXISTS "annotation_question_search_text_trgm"']


def _text(dialogue, final):
    # As annotation.models.project.question_search_text was when this migration was written.
    turns = dialogue if isinstance(dialogue, list) else []
    contents = [str(t.get("content") or "") if isinstance(t, dict) else "" for t in turns]
    return "\n".join([*contents, final or ""]).upper()


def backfill(apps, schema_editor):
    Question = apps.get_model("annotation", "Question")
    batch = []
    for question in Question.objects.only("pk", "dialogue", "final_user_turn").iterator(chunk_size=2000):
        question.search_text = _text(question.dialogue, question.final_user_turn)
        batch.append(question)
        if len(batch) >= 2000:
            Question.objects.bulk_update(batch, ["search_text"])
            batch = []
    if batch:
        Question.objects.bulk_update(batch, ["search_text"])


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0031_agreement_claim"),
    ]

    operations = [
        migrations.AddField(
            model_name="question",
            name="search_text",
            field=models.TextField(default="", editable=False),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        VendorSQL(postgresql=DROP_OLD + CREATE_NEW, sqlite=[], reverse_postgresql=DROP_NEW + CREATE_OLD,
                  reverse_sqlite=[]),
    ]
