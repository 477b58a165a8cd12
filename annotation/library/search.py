"""Search over Chinese (and English) text, for the case library and the FAQ alike.

PostgreSQL's full-text search splits on spaces and punctuation, so a Chinese sentence is
one "word" and 边界感 never matches inside it. Instead a query matches by substring:

* each phrase of the query (split on whitespace) as a whole: `icontains`, which the GIN
  trigram indexes of migration annotation/0016 serve on PostgreSQL;
* for a Chinese phrase, also its character bigrams (建议给得太早: 建议, 议给, 给得, 得太, 太早):
  a text holding at least half of them (建议给得过早) is still found, ranked below one
  with the exact phrase.

The rank adds, per phrase, a large weight for the exact phrase (more in the title field)
and the share of its bigrams found; on PostgreSQL it adds pg_trgm's word similarity of
the whole query to the searched text, which orders texts that match equally otherwise.
On SQLite (`make run`) the same substring matching runs without the trigram term.
"""
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.postgres.search import TrigramWordSimilarity
from django.db import connection
from django.db.models import Case, F, FloatField, IntegerField, Q, QuerySet, TextField, Value, When
from django.db.models.functions import Concat

QUERY_MAX = 100
PHRASES_MAX = 5
EXACT_WEIGHT = 10.0
TITLE_WEIGHT = 5.0
BIGRAM_WEIGHT = 3.0
TRIGRAM_WEIGHT = 2.0
BIGRAMS_MAX = 30
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]{2,}")


@dataclass(frozen=True)
class SearchQuery:
    """A user's query, cleaned: its phrases and, for Chinese phrases, their bigrams."""

    text: str
    phrases: tuple[str, ...]
    bigrams: tuple[tuple[str, ...], ...]  # per phrase; empty for a phrase without Chinese or of two characters

    def __bool__(self) -> bool:
        return bool(self.phrases)


def search_query_parse(raw: str | None) -> SearchQuery:
    """Split `raw` into at most PHRASES_MAX phrases of a query cut to QUERY_MAX characters."""
    text = " ".join((raw or "").split())[:QUERY_MAX]
    phrases = tuple(dict.fromkeys(text.split()))[:PHRASES_MAX]
    bigrams = tuple(_bigrams(p) for p in phrases)
    return SearchQuery(text=" ".join(phrases), phrases=phrases, bigrams=bigrams)


def _bigrams(phrase: str) -> tuple[str, ...]:
    """The character pairs of the Chinese runs of `phrase` (punctuation breaks a run), at most BIGRAMS_MAX."""
    if len(phrase) <= 2 or not _CJK.search(phrase):
        return ()
    pairs = [run[i:i + 2] for run in _CJK_RUN.findall(phrase) for i in range(len(run) - 1)]
    return tuple(dict.fromkeys(pairs))[:BIGRAMS_MAX]


def _any_field(fields: Sequence[str], term: str) -> Q:
    match = Q()
    for field in fields:
        match |= Q(**{f"{field}__icontains": term})
    return match


def search_rank(queryset: QuerySet, query: SearchQuery, *, fields: Sequence[str]) -> QuerySet:
    """`queryset` narrowed to rows matching `query` in `fields`, annotated `search_rank` and ordered by it.

    `fields[0]` is the title-like field whose exact match weighs more. Rows tie-break by
    their model's own ordering after the rank. An empty query returns `queryset` unchanged.
    """
    if not query:
        return queryset
    match = Q()
    hits: dict[str, Any] = {}
    rank: Any = Value(0.0, output_field=FloatField())
    for n, (phrase, bigrams) in enumerate(zip(query.phrases, query.bigrams, strict=True)):
        exact = _any_field(fields, phrase)
        match |= exact
        rank = rank + Case(When(exact, then=Value(EXACT_WEIGHT)), default=Value(0.0), output_field=FloatField())
        rank = rank + Case(When(Q(**{f"{fields[0]}__icontains": phrase}), then=Value(TITLE_WEIGHT)),
                           default=Value(0.0), output_field=FloatField())
        if not bigrams:
            continue
        found: Any = Value(0, output_field=IntegerField())
        for bigram in bigrams:
            found = found + Case(When(_any_field(fields, bigram), then=Value(1)), default=Value(0),
                                 output_field=IntegerField())
        # Without the exact phrase, a row needs at least half of its pairs: 建议给得过早 shares three of
        # the five pairs of 建议给得太早, a text that only says 建议 one (it is found by the query 建议).
        hits[f"_bigram_hits_{n}"] = found
        match |= Q(**{f"_bigram_hits_{n}__gte": math.ceil(len(bigrams) / 2)})
        rank = rank + found * Value(BIGRAM_WEIGHT / len(bigrams))
    if connection.vendor == "postgresql":
        searched = Concat(*[part for field in fields for part in (F(field), Value(" "))], output_field=TextField())
        rank = rank + TRIGRAM_WEIGHT * TrigramWordSimilarity(query.text, searched)
    ordering = [str(o) for o in queryset.model._meta.ordering]
    return queryset.alias(**hits).filter(match).annotate(search_rank=rank).order_by("-search_rank", *ordering)
