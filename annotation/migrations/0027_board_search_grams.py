from django.db import migrations

from core.db import VendorSQL

# The board's text search over the dialogue and the final user turn, on PostgreSQL.
# Chinese has no word breaks and a common term is often two characters, which a trigram index
# cannot look up (0026). `rubrica_board_text` is what is searched: the turns' contents and the
# final turn, one a line, upper-cased (the case-insensitive match of `icontains`);
# `rubrica_board_grams` the set of its characters and pairs of adjacent characters. A GIN index
# over the set answers a term of one or two characters exactly, and narrows a longer term to the
# questions holding all its pairs, checked then with `strpos` (annotation/board/selectors.py).
FUNCTIONS = [
    r"""CREATE OR REPLACE FUNCTION rubrica_board_text(final_turn text, dialogue jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT upper(coalesce((SELECT string_agg(coalesce(turn ->> 'content', ''), E'\n' ORDER BY n)
                         FROM jsonb_array_elements(CASE jsonb_typeof(dialogue) WHEN 'array' THEN dialogue
                                                   ELSE '[]'::jsonb END) WITH ORDINALITY AS t(turn, n)), '')
               || E'\n' || coalesce(final_turn, ''))
$$""",
    r"""CREATE OR REPLACE FUNCTION rubrica_board_grams(t text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(DISTINCT g), '{}')
  FROM (SELECT c, c || lead(c) OVER (ORDER BY n) AS b
        FROM unnest(regexp_split_to_array(t, '')) WITH ORDINALITY AS u(c, n)) AS s
  CROSS JOIN LATERAL (VALUES (s.c), (s.b)) AS v(g)
  WHERE g IS NOT NULL
$$""",
    'CREATE INDEX "annotation_question_board_grams" ON "annotation_question" USING gin '
    '((rubrica_board_grams(rubrica_board_text("final_user_turn", "dialogue"))))',
]
DROP = [
    'DROP INDEX IF EXISTS "annotation_question_board_grams"',
    "DROP FUNCTION IF EXISTS rubrica_board_grams(text)",
    "DROP FUNCTION IF EXISTS rubrica_board_text(text, jsonb)",
]


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0026_board_dashboard'),
    ]

    operations = [
        VendorSQL(postgresql=FUNCTIONS, sqlite=[], reverse_postgresql=DROP, reverse_sqlite=[]),
    ]
