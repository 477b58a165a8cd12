"""An expert's capability portrait, computed from the work as it stands (never stored, never stale).

Per dimension and per category of the rubric items they judged:

* labelled: rubric items they labelled in submitted work (control tasks included:
  they are work to the expert);
* golden accuracy: their answers that match the reference, over every golden item
  they answered: control tasks and scored calibration attempts;
* peer agreement (leave-one-out): on regular tasks, how often their label equals the
  majority of the *other* experts' labels on the same item. Items where the others
  are split evenly (or where nobody else has labelled yet) have no majority and are
  left out.

`projects=None` spans every project; a PM's view passes the projects they manage.

What the expert sees of their own numbers counts control tasks only once they are
`OWN_VIEW_DELAY` old (`control_before`): a golden count that moved right after a
submission would tell them that task was a control task. PMs and the tier rules see
the live numbers.
"""
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Case, Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Sum, Value, When
from django.db.models.functions import Coalesce

from annotation.models import (
    Assignment,
    CalibrationAnswer,
    ControlResult,
    GoldenReference,
    GoldenTally,
    Label,
    PeerTally,
    Project,
    Task,
)
from core.prepared import Prepared
from experts.models import User
from experts.tiers import ExpertStats
from rubrics.models import Category, Dimension

DIMENSION_KEY = "rubric_item__dimension_id"
# Demote windows look back at most this many control tasks.
MAX_CONTROL_WINDOW = 200
OWN_VIEW_DELAY = timedelta(days=1)


def own_view_cutoff(now: datetime) -> datetime:
    """Control tasks submitted before this moment show in the expert's own portrait and progress."""
    return now - OWN_VIEW_DELAY


@dataclass
class PortraitRow:
    key: str
    label: str
    category: str
    labelled: int = 0
    golden_total: int = 0
    golden_correct: int = 0
    peer_total: int = 0
    peer_agree: int = 0

    @property
    def golden_pct(self) -> float | None:
        return 100 * self.golden_correct / self.golden_total if self.golden_total else None

    @property
    def peer_pct(self) -> float | None:
        return 100 * self.peer_agree / self.peer_total if self.peer_total else None

    def add(self, other: "PortraitRow") -> None:
        self.labelled += other.labelled
        self.golden_total += other.golden_total
        self.golden_correct += other.golden_correct
        self.peer_total += other.peer_total
        self.peer_agree += other.peer_agree


@dataclass(frozen=True)
class Portrait:
    dimensions: list[PortraitRow]
    categories: list[PortraitRow]
    overall: PortraitRow


def _scope(qs: QuerySet, field: str, projects: Iterable[Project] | None) -> QuerySet:
    return qs if projects is None else qs.filter(**{f"{field}__in": projects})


def _work_labels(expert: User, projects) -> QuerySet[Label]:
    return _scope(Label.objects.filter(assignment__expert=expert, assignment__kind=Assignment.Kind.WORK),
                  "task__project", projects)


def _reference() -> Subquery:
    return Subquery(GoldenReference.objects.filter(task=OuterRef("task"), rubric_item=OuterRef("rubric_item"))
                    .values("value")[:1])


def _golden_sources(expert_ids: Iterable[int] | None, projects,
                    control_before: datetime | None = None) -> tuple[QuerySet, QuerySet]:
    """The golden evidence: control-task labels and answers of scored calibrations, each with a project key."""
    control = _scope(Label.objects.filter(assignment__kind=Assignment.Kind.WORK, task__is_golden=True),
                     "task__project", projects).annotate(expert_key=F("assignment__expert_id"),
                                                         project_key=F("task__project_id"))
    calibration = _scope(CalibrationAnswer.objects.filter(attempt__finished_at__isnull=False),
                         "attempt__project", projects).annotate(expert_key=F("attempt__expert_id"),
                                                                project_key=F("attempt__project_id"))
    if expert_ids is not None:
        control = control.filter(assignment__expert_id__in=expert_ids)
        calibration = calibration.filter(attempt__expert_id__in=expert_ids)
    if control_before is not None:
        control = control.filter(assignment__submitted_at__lt=control_before)
    return control, calibration


def golden_counts_grouped(expert_ids: Iterable[int] | None, projects, *keys: str,
                          control_before: datetime | None = None) -> dict[tuple, tuple[int, int]]:
    """{(key values..., dimension id): (golden items answered, answered right)}, grouped by `keys`
    ("expert_key", "project_key"), over control tasks and scored calibrations. Two queries."""
    counts: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for qs in _golden_sources(expert_ids, projects, control_before):
        rows = (qs.annotate(ref=_reference()).filter(ref__isnull=False).values(*keys, DIMENSION_KEY)
                .annotate(total=Count("pk"), correct=Count("pk", filter=Q(value=F("ref")))).order_by())
        for row in rows:
            key = (*(row[k] for k in keys), row[DIMENSION_KEY])
            counts[key][0] += row["total"]
            counts[key][1] += row["correct"]
    return {key: (total, correct) for key, (total, correct) in counts.items()}


def golden_counts_by_dimension(expert: User, projects=None,
                               control_before: datetime | None = None) -> dict[int, tuple[int, int]]:
    """{dimension id: (golden items answered, answered right)} over control tasks and scored calibrations."""
    grouped = golden_counts_grouped([expert.pk], projects, control_before=control_before)
    return {dim: counts for (dim,), counts in grouped.items()}


def _peer_counts_by_dimension(expert: User, projects) -> dict[int, tuple[int, int]]:
    others = (Label.objects.counted().filter(task=OuterRef("task"), rubric_item=OuterRef("rubric_item"))
              .exclude(assignment=OuterRef("assignment")).order_by().values("task"))
    rows = (_work_labels(expert, projects).filter(task__is_golden=False)
            .annotate(peer_hits=Coalesce(Subquery(others.annotate(s=Sum("value")).values("s")[:1]), 0),
                      peer_n=Coalesce(Subquery(others.annotate(n=Count("pk")).values("n")[:1]), 0))
            .filter(peer_n__gt=0)
            .annotate(twice_hits=F("peer_hits") * 2)
            .exclude(twice_hits=F("peer_n"))
            .annotate(peer_majority=Case(When(twice_hits__gt=F("peer_n"), then=Value(1)), default=Value(0),
                                         output_field=IntegerField()))
            .values(DIMENSION_KEY)
            .annotate(total=Count("pk"), agree=Count("pk", filter=Q(value=F("peer_majority")))).order_by())
    return {row[DIMENSION_KEY]: (row["total"], row["agree"]) for row in rows}


def portrait_for(expert: User, projects: Iterable[Project] | None = None,
                 control_before: datetime | None = None) -> Portrait:
    """The expert's portrait over `projects` (all projects when None)."""
    labelled = {row[DIMENSION_KEY]: row["n"] for row in _work_labels(expert, projects)
                .values(DIMENSION_KEY).annotate(n=Count("pk")).order_by()}
    golden = golden_counts_by_dimension(expert, projects, control_before)
    peers = _peer_counts_by_dimension(expert, projects)
    dimensions, by_category = [], {}
    overall = PortraitRow(key="all", label="", category="")
    for dim in Dimension.objects.order_by("sort_order", "code"):
        row = PortraitRow(key=dim.code, label=dim.display_name, category=dim.category,
                          labelled=labelled.get(dim.pk, 0))
        row.golden_total, row.golden_correct = golden.get(dim.pk, (0, 0))
        row.peer_total, row.peer_agree = peers.get(dim.pk, (0, 0))
        dimensions.append(row)
        category = by_category.setdefault(dim.category, PortraitRow(
            key=dim.category, label=str(Category(dim.category).label), category=dim.category))
        category.add(row)
        overall.add(row)
    return Portrait(dimensions=dimensions, categories=list(by_category.values()), overall=overall)


# After every submission (tier evaluation) and on every home page: compiled once per process.
_RECENT_CONTROLS: Prepared[Any] = Prepared(
    lambda *, expert_id: ControlResult.objects.filter(expert_id=expert_id).order_by("-scored_at", "-id")
    .values_list("items_correct", "items_total")[:MAX_CONTROL_WINDOW])


def expert_stats(expert: User, control_before: datetime | None = None) -> ExpertStats:
    """The numbers the tier rules read, across every project.

    Read from the stored tallies, whatever the length of the expert's history: golden
    evidence from `GoldenTally`, peer agreement from `PeerTally` (each equal to what
    :func:`portrait_for` computes from the labels, tests hold it). The expert's own view
    hides control results newer than `control_before`: it takes those few off the tally
    (scoring the whole golden history from the labels instead cost 9 ms of every home page
    at 4,000 labels).
    """
    golden_total, golden_correct, peer_total, peer_agree, completed, hidden_total, hidden_correct = _tallies(
        expert.pk, hidden_since=control_before)
    recent = tuple(_RECENT_CONTROLS.tuples(expert_id=expert.pk))
    return ExpertStats(completed=completed, golden_items=golden_total - hidden_total,
                       golden_correct=golden_correct - hidden_correct,
                       peer_items=peer_total, peer_agree=peer_agree, recent_controls=recent)


def _tallies(expert_id: int, *, hidden_since: datetime | None) -> tuple[int, int, int, int, int, int, int]:
    """Golden items and right answers, peer items and agreements, submitted work, and the golden items
    and right answers of control tasks submitted at or after `hidden_since` (0 and 0 when None): one
    round trip.

    Written as SQL because it runs after every submission and on every home page: the ORM
    aggregates it replaces spent more CPU compiling their queries than the database spent
    answering. The hidden controls are the ones `_golden_sources(..., control_before=hidden_since)`
    leaves out (a reference is unique per task and item, so the join is its reference subquery).
    """
    quote = connection.ops.quote_name
    golden, peers = quote(GoldenTally._meta.db_table), quote(PeerTally._meta.db_table)
    assignments, labels = quote(Assignment._meta.db_table), quote(Label._meta.db_table)
    tasks, references = quote(Task._meta.db_table), quote(GoldenReference._meta.db_table)
    work, submitted = Assignment.Kind.WORK.value, Assignment.Status.SUBMITTED.value
    hidden = "SELECT 0 AS total, 0 AS correct"
    params: list[int | str | datetime] = [*[expert_id] * 3, work, submitted]
    if hidden_since is not None:
        hidden = (f"SELECT COUNT(*) AS total, COUNT(*) FILTER (WHERE l.value = g.value) AS correct "
                  f"FROM {labels} l JOIN {assignments} a ON a.id = l.assignment_id "
                  f"JOIN {tasks} t ON t.id = l.task_id "
                  f"JOIN {references} g ON g.task_id = l.task_id AND g.rubric_item_id = l.rubric_item_id "
                  f"WHERE a.expert_id = %s AND a.kind = %s AND a.submitted_at >= %s AND t.is_golden")
        params += [expert_id, work, hidden_since]
    # Each tally is read once for both of its sums (one pass over the expert's rows, not two).
    sql = (f"SELECT golden.total, golden.correct, peers.total, peers.agree, work.n, hidden.total, hidden.correct "
           f"FROM (SELECT COALESCE(SUM(total), 0) AS total, COALESCE(SUM(correct), 0) AS correct "
           f"FROM {golden} WHERE expert_id = %s) golden, "
           f"(SELECT COALESCE(SUM(total), 0) AS total, COALESCE(SUM(agree), 0) AS agree "
           f"FROM {peers} WHERE expert_id = %s) peers, "
           f"(SELECT COUNT(*) AS n FROM {assignments} WHERE expert_id = %s AND kind = %s AND status = %s) work, "
           f"({hidden}) hidden")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return tuple(int(value) for value in row)  # type: ignore[return-value]
