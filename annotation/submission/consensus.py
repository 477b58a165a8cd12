"""Per-item consensus of a task's panel, written with its last label.

A tie (as many hit as miss votes) is no verdict: it is stored as zone `tied` with no
majority, so nothing downstream can count it as a hit or a miss. A panel of one is
`single`. When a complete panel leaves an item tied, the project may draw one more
expert for the task (`tie_slot_add`); the verdict that extra vote makes possible is
marked `extra_expert`. A consultation's resolution (`Adjudication`) overrides the votes
every time the consensus is written: provenance `adjudicated`, and for "item is
ambiguous" zone `ambiguous` with no majority.

Which value of a label votes is the project's choice (`Project.consensus_labels`): the
first label as submitted (the default), or the label as revised after the judge's reveal
(`annotation.reveal`), the first one where the expert revised nothing.
"""
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Case, Exists, F, OuterRef, QuerySet, Subquery, When
from django.db.models.functions import Coalesce
from psycopg.types.json import Jsonb

from annotation.models import Adjudication, Assignment, ConsensusLabels, Consultation, ItemConsensus, Label, Task
from core.prepared import Prepared
from core.sql_insert import insert_rows, saved_as

Zone = ItemConsensus.Zone
Provenance = ItemConsensus.Provenance


def majority_of(hit_votes: int, total_votes: int) -> tuple[int | None, str]:
    """(majority, zone): a hit needs more than half the votes, a miss more than half the misses.

    An even split has no majority (None, `tied`); one vote is `single`.
    """
    if 2 * hit_votes == total_votes:
        return None, Zone.TIED
    majority = 1 if 2 * hit_votes > total_votes else 0
    if total_votes == 1:
        return majority, Zone.SINGLE
    zone = Zone.UNANIMOUS if hit_votes in (0, total_votes) else Zone.SPLIT
    return majority, zone


def provenance_of(*, zone: str, base_tied: bool) -> str:
    """How a verdict was reached; `base_tied` says the panel before the extra experts was tied."""
    if zone == Zone.TIED:
        return ""
    if base_tied:
        return Provenance.EXTRA_EXPERT
    if zone == Zone.UNANIMOUS:
        return Provenance.UNANIMOUS
    return Provenance.SINGLE if zone == Zone.SINGLE else Provenance.MAJORITY


def voting_value() -> Case:
    """The value a label votes with, chosen in the same query (no extra read of the project):
    its revision's where the project counts revised labels and the expert revised it, else the first."""
    return Case(When(task__project__consensus_labels=ConsensusLabels.REVISED,
                     then=Coalesce(F("revision__value"), F("value"))), default=F("value"))


def consensus_compute(*, task: Task, now: datetime, first: bool = False) -> list[ItemConsensus]:
    """Write (or rewrite) the consensus rows of a task from its counted labels (first or revised:
    the project's `consensus_labels`).

    Labels of rejected submissions never count; an item left without a counted label
    loses its row. The first `overlap - extra_slots` labels in submission order are the
    base panel: an item that panel left tied and the extra experts decided is `extra_expert`.
    `first`: the caller, holding the task's lock, found it without consensus rows, so none
    can be left over to delete (a submission completing its task: one statement less).
    Each record's `panel` is the experts who voted on its item, in submission order (a consultation
    the rules open asks them, without reading the labels again), and `consulted` whether the item
    ever had a consultation of the task (the rules open none again).
    """
    votes: dict[int, list[int]] = defaultdict(list)
    panels: dict[int, list[int]] = defaultdict(list)
    # An item's adjudication (at most one) comes with each of its labels: None when it has none.
    adjudicated: dict[int, tuple[int | None, bool]] = {}
    consulted: set[int] = set()
    for item_id, value, expert_id, verdict, ambiguous, ever_consulted in _VOTES.tuples(task_id=task.pk):
        votes[item_id].append(value)
        panels[item_id].append(expert_id)
        if ambiguous is not None:
            adjudicated[item_id] = (verdict, ambiguous)
        if ever_consulted:
            consulted.add(item_id)
    base_size = max(1, task.overlap - task.extra_slots)
    records = []
    for item_id, values in votes.items():
        hits, total = sum(values), len(values)
        majority, zone = majority_of(hits, total)
        base = values[:base_size]
        base_tied = task.extra_slots > 0 and len(values) > base_size and 2 * sum(base) == len(base)
        provenance = provenance_of(zone=zone, base_tied=base_tied)
        if item_id in adjudicated:
            verdict, ambiguous = adjudicated[item_id]
            provenance = Provenance.ADJUDICATED
            majority, zone = (None, Zone.AMBIGUOUS) if ambiguous else (verdict, zone)
        record = ItemConsensus(task=task, rubric_item_id=item_id, hit_votes=hits, total_votes=total,
                               majority=majority, zone=zone, provenance=provenance, computed_at=now)
        record.panel, record.consulted = panels[item_id], item_id in consulted
        records.append(record)
    if not first:
        _stale_delete(task_id=task.pk, kept=list(votes))
    _records_write(records, task_id=task.pk, now=now)
    return records


# The rows in one statement on PostgreSQL, from one JSON parameter (as a submission writes its labels):
# preparing ten rows' values field by field (`core.sql_insert`) cost more CPU than the rest of the
# consensus, on every completed task.
_UPSERT_SQL = """INSERT INTO {table} (task_id, rubric_item_id, hit_votes, total_votes, majority, zone, provenance,
    computed_at)
SELECT %s, x.item, x.hits, x.total, x.majority, x.zone, x.provenance, %s
FROM jsonb_to_recordset(%s) AS x(item bigint, hits smallint, total smallint, majority smallint, zone text,
                                 provenance text)
ON CONFLICT (task_id, rubric_item_id) DO UPDATE SET hit_votes = EXCLUDED.hit_votes,
    total_votes = EXCLUDED.total_votes, majority = EXCLUDED.majority, zone = EXCLUDED.zone,
    provenance = EXCLUDED.provenance, computed_at = EXCLUDED.computed_at
RETURNING id, rubric_item_id"""


def _records_write(records: list[ItemConsensus], *, task_id: int, now: datetime) -> None:
    """Insert or update the task's rows of `records` (one an item), their ids read back onto them."""
    if not records:
        return
    if connection.vendor != "postgresql":
        # One statement, as bulk_create(update_conflicts=True) writes it.
        insert_rows(records, returning=True, unique_fields=["task", "rubric_item"],
                    update_fields=["hit_votes", "total_votes", "majority", "zone", "provenance", "computed_at"])
        return
    rows = Jsonb([{"item": r.rubric_item_id, "hits": r.hit_votes, "total": r.total_votes, "majority": r.majority,
                   "zone": str(r.zone), "provenance": str(r.provenance)} for r in records])
    with connection.cursor() as cursor:
        bound: list[Any] = [task_id, now, rows]
        cursor.execute(_UPSERT_SQL.format(table=ItemConsensus._meta.db_table), bound)
        ids = {item_id: pk for pk, item_id in cursor.fetchall()}
    for record in records:
        saved_as(record, ids[record.rubric_item_id])


def _votes_query(*, task_id: int) -> QuerySet[Any]:
    # The assignments are named by their task too (a label's task is its assignment's): the panel's
    # few rows come by the task's index, instead of a pass over every submitted assignment of the
    # database, which a generic plan of the prepared statement took (10 ms at 6,000 assignments).
    # The item's adjudication (one at most: a consultation's resolution) and whether it ever had a consultation
    # (the rules open none again) ride along, instead of reads of their own.
    adjudication = Adjudication.objects.filter(task_id=OuterRef("task_id"), rubric_item_id=OuterRef("rubric_item_id"))
    consultation = Consultation.objects.filter(task_id=OuterRef("task_id"), rubric_item_id=OuterRef("rubric_item_id"))
    return (Label.objects.counted().filter(task_id=task_id, assignment__task_id=task_id,
                                           assignment__status=Assignment.Status.SUBMITTED)
            .order_by("rubric_item_id", "assignment__submitted_at", "assignment_id")
            .values_list("rubric_item_id", voting_value(), "assignment__expert_id",
                         Subquery(adjudication.values("value")[:1]), Subquery(adjudication.values("ambiguous")[:1]),
                         Exists(consultation)))


# Every completed task's consensus reads them: compiled once per process (core.prepared).
_VOTES: Prepared[Any] = Prepared(_votes_query)


def _stale_delete(*, task_id: int, kept: list[int]) -> None:
    """Delete the task's consensus rows of items left without a counted label (rare: a rejection)."""
    if connection.vendor != "postgresql":
        ItemConsensus.objects.filter(task_id=task_id).exclude(rubric_item_id__in=kept).delete()
        return
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {ItemConsensus._meta.db_table} WHERE task_id = %s "
                       "AND NOT (rubric_item_id = ANY(%s))", [task_id, kept])


def tie_slot_add(*, task: Task, records: list[ItemConsensus]) -> bool:
    """Give a complete, locked task one more slot when an item is tied and the project's cap allows.

    The slot is drawn like any other (`assignment_claim_next`), so never by an expert who
    already held the task. Returns whether a slot was added.
    """
    # An adjudicated tie has its verdict already: it draws nobody.
    if task.is_golden or not any(r.zone == Zone.TIED and r.majority is None for r in records):
        return False
    project = task.project
    if not project.tie_extra_experts or task.extra_slots >= project.tie_extra_cap:
        return False
    task.overlap += 1
    task.extra_slots += 1
    task.status = Task.Status.OPEN
    task.completed_at = None
    task.save(update_fields=["overlap", "extra_slots", "status", "completed_at"])
    return True
