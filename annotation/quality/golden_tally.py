"""The stored golden tally: per expert, project and dimension, golden items answered and answered right.

Matching reads an expert's golden accuracy on every claim. Scoring their whole history
each time cost ~114 ms at 4,000 labels; the tally (`annotation.GoldenTally`) is read in
one query instead, and is kept equal to what `portrait.golden_counts_grouped` computes
from the work:

* a submitted control task adds its scored items (`annotation.quality.control.control_record`),
  and a scored calibration adds its answers (`annotation.calibration.services`), in the
  transaction that records them; an idempotent retry returns before recording, so it
  adds nothing;
* what changes past results recounts the rows it touches (`golden_tally_rebuild`): a PM
  returning a submission (its labels leave) or putting it back, and a golden import (new
  references, newly golden tasks).

Lock order: the tally rows come last, after the rows their caller locked (task,
assignment, expert profile or calibration attempt), in dimension order within one
statement, so two transactions adding to the same expert never wait on each other in a cycle.
"""
from collections.abc import Iterable, Mapping

from django.db import connection, transaction

from annotation.models import GoldenTally
from annotation.quality.portrait import golden_counts_grouped


def golden_tally_add(*, expert_id: int, project_id: int, counts: Mapping[int, tuple[int, int]]) -> None:
    """Add golden results, {dimension id: (items answered, answered right)}, to the expert's tally.

    One INSERT ... ON CONFLICT DO UPDATE statement, which adds to the stored numbers in
    the database (never read-modify-write), so concurrent results of one expert all count.
    """
    rows = [(expert_id, project_id, dim, total, correct) for dim, (total, correct) in sorted(counts.items())
            if total]
    if not rows:
        return
    quote = connection.ops.quote_name
    table = quote(GoldenTally._meta.db_table)
    values = ", ".join(["(%s, %s, %s, %s, %s)"] * len(rows))
    sql = (f"INSERT INTO {table} (expert_id, project_id, dimension_id, total, correct) VALUES {values} "
           f"ON CONFLICT (expert_id, project_id, dimension_id) DO UPDATE SET "
           f"total = {table}.total + excluded.total, correct = {table}.correct + excluded.correct")
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for row in rows for value in row])


@transaction.atomic
def golden_tally_rebuild(*, project_id: int, expert_ids: Iterable[int] | None = None) -> int:
    """Recount the tally of `project_id` (of `expert_ids` only, when given) from the work; returns the rows.

    Three to four queries whatever the history: the rows go, the counts are grouped in the
    database, the new rows are written in one batch.
    """
    experts = None if expert_ids is None else sorted(set(expert_ids))
    stale = GoldenTally.objects.filter(project_id=project_id)
    if experts is not None:
        stale = stale.filter(expert_id__in=experts)
    stale.delete()
    counts = golden_counts_grouped(experts, [project_id], "expert_key")
    GoldenTally.objects.bulk_create(
        GoldenTally(expert_id=expert_id, project_id=project_id, dimension_id=dim, total=total, correct=correct)
        for (expert_id, dim), (total, correct) in sorted(counts.items()) if total)
    return len(counts)
