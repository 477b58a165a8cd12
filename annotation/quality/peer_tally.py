"""The stored peer tally: per work submission, its items with a peer majority and those agreeing.

The tier rules read an expert's peer agreement after every submission. Comparing each
label of their history with the other labels of its unit (`portrait._peer_counts_by_dimension`)
cost about 90 ms of database time and 10 ms of CPU at 4,000 labels; the tally
(`annotation.PeerTally`) is summed in one indexed aggregate instead. It equals what the
portrait computes, summed over dimensions (tests hold it):

* a submission changes the peers of everyone on its task, so every path that changes a
  non-golden task's labels refreshes that task's rows, in its transaction, under the task
  lock it already holds: a submission, a rejection, a restored rejection, a PM's return
  and a returned submission put back as it was;
* the refresh recomputes the task's rows from its labels in one INSERT ... SELECT ...
  ON CONFLICT statement (a panel's few dozen labels), so running it twice changes nothing.

The peer majority follows the portrait: the other experts' counted labels of the unit
(labels of a rejected submission count for nobody else), ties and units without another
label left out; the expert's own labels count whatever the status of their submission.
"""
from django.db import connection

from annotation.models import Assignment, Label, PeerTally, Task

REJECTED = Assignment.Status.REJECTED.value
WORK = Assignment.Kind.WORK.value


# The task's id as a subquery's value, which no plan knows in advance: PostgreSQL then keeps one plan
# for the prepared statement after its first few runs, where with the id itself it found the plans made
# for each id a little cheaper and planned every submission's refresh anew (planning took twice as
# long as running it: 0.34 against 0.15 ms). The plan is the same either way (the task's indexes).
_ONE_TASK = " AND l.task_id = (SELECT CAST(%s AS bigint))"


def _refresh_sql(*, one_task: bool) -> str:
    """INSERT ... SELECT ... ON CONFLICT: every work submission's peer terms, computed in the database.

    Per label, the unit's other counted labels come from window sums over the unit
    (task, rubric item) less the label's own vote when it counts itself. PostgreSQL and
    SQLite (3.25 and later) both run it.
    """
    quote = connection.ops.quote_name
    tally, label = quote(PeerTally._meta.db_table), quote(Label._meta.db_table)
    assignment, task = quote(Assignment._meta.db_table), quote(Task._meta.db_table)
    counts = f"CASE WHEN a.status <> '{REJECTED}' THEN 1 ELSE 0 END"
    unit = "PARTITION BY l.task_id, l.rubric_item_id"
    decided = "peer_n > 0 AND 2 * peer_hits <> peer_n"
    return (
        f"INSERT INTO {tally} (assignment_id, expert_id, task_id, total, agree) "
        f"SELECT assignment_id, expert_id, task_id, SUM(CASE WHEN {decided} THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN {decided} AND value = (CASE WHEN 2 * peer_hits > peer_n THEN 1 ELSE 0 END) "
        f"THEN 1 ELSE 0 END) "
        f"FROM (SELECT l.assignment_id, a.expert_id, l.task_id, l.value, "
        f"SUM({counts} * l.value) OVER ({unit}) - {counts} * l.value AS peer_hits, "
        f"SUM({counts}) OVER ({unit}) - {counts} AS peer_n "
        f"FROM {label} l JOIN {assignment} a ON a.id = l.assignment_id JOIN {task} t ON t.id = l.task_id "
        f"WHERE a.kind = '{WORK}' AND NOT t.is_golden{_ONE_TASK if one_task else ''}) terms "
        f"WHERE 1 = 1 GROUP BY assignment_id, expert_id, task_id "
        f"ON CONFLICT (assignment_id) DO UPDATE SET total = excluded.total, agree = excluded.agree"
    )


def peer_tally_refresh(*, task_id: int, labels_removed: bool = False) -> None:
    """Rewrite the peer rows of every work submission on `task_id` from its labels, in one statement.

    `labels_removed`: a submission's labels left the task (a PM's return), so its row goes too.
    """
    if labels_removed:
        PeerTally.objects.filter(task_id=task_id).delete()
    with connection.cursor() as cursor:
        cursor.execute(_refresh_sql(one_task=True), [task_id])


def peer_tally_rebuild() -> None:
    """Recompute every row from the labels (the data migration, or a repair), in one statement."""
    PeerTally.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute(_refresh_sql(one_task=False))
