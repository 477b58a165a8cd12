"""The board search index's pending list may hold a whole large import (PostgreSQL's maximum,
2 GB; 100,000 HeartBench questions take about 1 GB of it) instead of 256 MB (about 25,000).

Past the limit the importing request itself merged the list into the index, in the middle of the
COPY: 5 s of a 30,000-question import, and four such merges in a 100,000-question one. Within
the limit the import only appends, and its follow-up task `annotation.question_search_merge`
(or autovacuum) merges after commit; the board's search reads the pending list meanwhile."""
from django.db import migrations

from core.db import VendorSQL

INDEX = '"annotation_question_search_text_trgm"'


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0038_reveal_after_submission"),
    ]

    operations = [
        VendorSQL(postgresql=[f"ALTER INDEX {INDEX} SET (gin_pending_list_limit = 2097151)"], sqlite=[],
                  reverse_postgresql=[f"ALTER INDEX {INDEX} SET (gin_pending_list_limit = 262144)"],
                  reverse_sqlite=[]),
    ]
