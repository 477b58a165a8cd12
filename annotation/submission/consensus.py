"""Per-item consensus of a task's panel, written with its last label."""
from datetime import datetime

from django.db.models import Count, Sum

from annotation.models import ItemConsensus, Label, Task


def majority_of(hit_votes: int, total_votes: int) -> tuple[int, str]:
    """(majority, zone): a hit needs more than half the votes (2 of 3); a tie is no majority for hit."""
    majority = 1 if 2 * hit_votes > total_votes else 0
    zone = ItemConsensus.Zone.UNANIMOUS if hit_votes in (0, total_votes) else ItemConsensus.Zone.SPLIT
    return majority, zone


def consensus_compute(*, task: Task, now: datetime) -> list[ItemConsensus]:
    """Write (or rewrite) the consensus rows of a task from its labels."""
    rows = (Label.objects.filter(task=task).values("rubric_item_id")
            .annotate(hits=Sum("value"), total=Count("id")).order_by("rubric_item_id"))
    records = []
    for row in rows:
        majority, zone = majority_of(row["hits"], row["total"])
        records.append(ItemConsensus(task=task, rubric_item_id=row["rubric_item_id"], hit_votes=row["hits"],
                                     total_votes=row["total"], majority=majority, zone=zone, computed_at=now))
    return ItemConsensus.objects.bulk_create(
        records, update_conflicts=True, unique_fields=["task", "rubric_item"],
        update_fields=["hit_votes", "total_votes", "majority", "zone", "computed_at"],
    )
