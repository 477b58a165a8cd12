"""The PM's board: a project's tasks by state, filtered, searched and paged; one task's history.

Every read here is scoped to a project the caller already reached through
`project_get_for_user(..., manage=True)`. The board answers in a constant number of
queries whatever the number of tasks: one for the counts by state, two for the page
(its ids by keyset paging on the task id, `task_project_id_idx`, then their rows), a few
small ones for the filter choices. The state filter is written as conditions on the task's
columns and the small lists (`state_condition`), so that the planner walks the id index
instead of computing every task's state and sorting the matches. Text search matches
substrings of the dialogue and the final user turn (a stored upper-cased copy, through the
trigram index of migration 0032: Chinese has no word breaks).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)

from annotation.models import (
    Assignment,
    Consultation,
    ItemConsensus,
    Label,
    Project,
    Question,
    Response,
    Task,
    TaskSkip,
)
from annotation.models.project import Difficulty
from annotation.selectors import project_experts
from core.errors import NotFound
from rubrics.models import Dimension, RubricItem, RubricVersion

PAGE_SIZE = 50
STATES = ("open", "in_progress", "tied", "complete", "golden", "skipped")
FILTERS = ("state", "scene", "difficulty", "dimension", "model", "version", "expert", "zone", "q")
SEARCH_MAX = 200


def _tied_lists(project: Project) -> tuple[QuerySet[Any], QuerySet[Any]]:
    """The ids of the tasks with a tied item, and of those awaiting a consultation."""
    # No join to the task for the project: the outer query already holds only the project's tasks
    # (the join cost an index probe per tied item, twice a request).
    tied = ItemConsensus.objects.filter(zone=ItemConsensus.Zone.TIED, majority__isnull=True)
    consulting = Consultation.objects.filter(project=project).exclude(status=Consultation.Status.RESOLVED)
    return tied.values("task_id"), consulting.values("task_id")


def _tied_or_consulted(project: Project) -> Q:
    tied, consulting = _tied_lists(project)
    return Q(pk__in=tied) | Q(pk__in=consulting)


def _skipped(project: Project) -> QuerySet[Any]:
    return TaskSkip.objects.filter(project=project).values("task_id")


def board_state(project: Project) -> Case:
    """One state per task, first match wins: golden, tied or awaiting a consultation, complete,
    skipped by someone (not complete), someone on it, else open.

    `pk IN (subquery)`, not EXISTS: inside a CASE PostgreSQL runs an EXISTS once per task
    (an index probe each, 1.3 s over 100,000 tasks) but hashes an IN list once per query.
    The lists are small (tied items, open consultations, skips), read through partial indexes.
    """
    return Case(
        When(is_golden=True, then=Value("golden")),
        When(_tied_or_consulted(project), then=Value("tied")),
        When(status=Task.Status.COMPLETE, then=Value("complete")),
        When(pk__in=_skipped(project), then=Value("skipped")),
        When(Q(status=Task.Status.FULL) | Q(live_count__gt=0), then=Value("in_progress")),
        default=Value("open"),
        output_field=CharField(),
    )


def row_state(project: Project) -> Case:
    """`board_state` for a few rows (a page, one task): an index probe per row and list, where
    `board_state` first reads the whole lists (tens of milliseconds at 100,000 tasks)."""
    tied = ItemConsensus.objects.filter(task=OuterRef("pk"), zone=ItemConsensus.Zone.TIED, majority__isnull=True)
    consulting = Consultation.objects.filter(task=OuterRef("pk")).exclude(status=Consultation.Status.RESOLVED)
    return Case(
        When(is_golden=True, then=Value("golden")),
        When(Exists(tied) | Exists(consulting), then=Value("tied")),
        When(status=Task.Status.COMPLETE, then=Value("complete")),
        When(Exists(TaskSkip.objects.filter(task=OuterRef("pk"))), then=Value("skipped")),
        When(_HELD, then=Value("in_progress")),
        default=Value("open"),
        output_field=CharField(),
    )


_HELD = Q(status=Task.Status.FULL) | Q(live_count__gt=0)


def state_condition(project: Project, state: str) -> Q:
    """The tasks `board_state` puts in `state`, as plain conditions the planner can drive from
    an index or a small list (a filter on the CASE is evaluated for every task instead)."""
    tied = _tied_or_consulted(project)
    skipped = Q(pk__in=_skipped(project))
    complete = Q(status=Task.Status.COMPLETE)
    before = {
        "golden": Q(is_golden=True),
        "tied": Q(is_golden=False) & tied,
        "complete": Q(is_golden=False) & ~tied & complete,
        "skipped": Q(is_golden=False) & ~tied & ~complete & skipped,
        "in_progress": Q(is_golden=False) & ~tied & ~complete & ~skipped & _HELD,
        "open": Q(is_golden=False) & ~tied & ~complete & ~skipped & ~_HELD,
    }
    return before.get(state, Q(pk__in=[]))


def _int(raw: Any) -> int | None:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


@dataclass
class BoardFilters:
    """The board's filters as the query string gives them; unknown values match nothing."""

    values: dict[str, str] = field(default_factory=dict)
    # The rubric versions the project's tasks are under (set by `board_page`; the dimension filter needs them).
    version_ids: list[int] = field(default_factory=list)
    # The project whose questions the search reads (set by `board_page`).
    project_id: int | None = None

    @classmethod
    def from_query(cls, query: Any) -> BoardFilters:
        values = {key: str(query.get(key, "")).strip() for key in FILTERS}
        values["q"] = values["q"][:SEARCH_MAX]
        return cls({k: v for k, v in values.items() if v})

    def get(self, key: str) -> str:
        return self.values.get(key, "")

    def apply(self, tasks: QuerySet[Task]) -> QuerySet[Task]:
        """Every filter but the state (the counts by state are read under the other filters)."""
        v = self.values
        if "scene" in v:
            tasks = tasks.filter(Q(response__question__primary_scene=v["scene"])
                                 | Q(response__question__secondary_scene=v["scene"]))
        if "difficulty" in v:
            tasks = tasks.filter(response__question__difficulty=v["difficulty"])
        if "model" in v:
            tasks = tasks.filter(response__model_name=v["model"])
        if "version" in v:
            tasks = tasks.filter(rubric_version__number=_int(v["version"]) or 0)
        if "dimension" in v:
            # Per rubric version, the responses to the questions holding an item of the dimension:
            # one-column IN lists the planner estimates well and hashes once (a two-column EXISTS
            # was estimated at 3 rows of 56,000 and walked the whole task index for the first
            # page: 10 s at 100,000 tasks; a join through the questions sorted 56,000 of them).
            items = RubricItem.objects.filter(dimension__code=v["dimension"])
            by_version = Q(pk__in=[])
            for version_id in self.version_ids:
                questions = Question.objects.filter(project_id=self.project_id or 0, external_id__in=items.filter(
                    version_id=version_id).values("question_ref"))
                responses = Response.objects.filter(project_id=self.project_id or 0, question__in=questions)
                by_version |= Q(rubric_version_id=version_id, response_id__in=responses.values("pk"))
            tasks = tasks.filter(by_version)
        if "expert" in v:
            tasks = tasks.filter(Exists(Assignment.objects.filter(task=OuterRef("pk"),
                                                                  expert_id=_int(v["expert"]) or 0)))
        if "zone" in v:
            tasks = tasks.filter(Exists(ItemConsensus.objects.filter(task=OuterRef("pk"), zone=v["zone"])))
        if "q" in v:
            tasks = _search(tasks, v["q"], self.project_id)
        return tasks


def _search(tasks: QuerySet[Task], term: str, project_id: int | None = None) -> QuerySet[Task]:
    """Tasks whose question's dialogue or final user turn holds `term`, case-insensitively.

    Questions keep an upper-cased plain-text copy of their turns (`QuestionSearch.text`, written
    on save and bulk create, and for an import by its follow-up task: `search_unindexed_count`
    says how many the search does not cover yet), so the match is `text LIKE '%TERM%'` with the
    term upper-cased the same way: on PostgreSQL the trigram index of migration 0042 serves terms of
    3+ characters, and a shorter term scans the plain text, with no JSON cast per question (the
    cast was half the cost of a short search at 100,000 tasks). The same query serves SQLite.
    (A GIN index over characters and character pairs was tried for 1- and 2-character terms:
    the questions were found in 70 ms, but the join of their tasks and the counts cost as much
    as before, and the index made each imported question 8 ms dearer; not kept.)
    """
    matching = Response.objects.filter(question__search__text__contains=term.upper())
    if project_id is not None:
        matching = matching.filter(project_id=project_id)
    # As a set of responses: the text is matched once per question, not once per task joined to it
    # (a search under two filters at 100,000 tasks: 317 to 136 ms).
    return tasks.filter(response_id__in=matching.values("pk"))


def search_unindexed_count(project: Project) -> int:
    """How many of the project's questions the board's search does not cover yet: an import's,
    until its follow-up task has written their search rows (seconds for 10,000 questions)."""
    return Question.objects.filter(project=project, search__isnull=True).count()


@dataclass(frozen=True)
class BoardPage:
    counts: dict[str, int]
    total: int
    rows: Sequence[Task]
    next_after: int | None


def _board_tasks(project: Project) -> QuerySet[Task]:
    # Superseded tasks were left behind by a rubric version that changed their items: not work any more.
    return Task.objects.filter(project=project).exclude(status=Task.Status.SUPERSEDED)


def board_page(project: Project, *, filters: BoardFilters, after: Any = None) -> BoardPage:
    """Counts by state under the filters, and the page of up to 50 tasks after the task id `after`."""
    if "dimension" in filters.values:
        filters.version_ids = list(RubricVersion.objects.filter(rubric_id=project.rubric_id)
                                   .values_list("pk", flat=True))
    filters.project_id = project.pk
    tasks = filters.apply(_board_tasks(project))
    counted = {row["state"]: row["n"] for row in
               tasks.annotate(state=board_state(project)).values("state").annotate(n=Count("pk")).order_by()}
    counts = {state: counted.get(state, 0) for state in STATES}
    state = filters.get("state")
    if state:
        tasks = tasks.filter(state_condition(project, state))
    after_id = _int(after)
    if after_id:
        tasks = tasks.filter(pk__gt=after_id)
    # The page's ids first, then their rows: when the planner joins every match and sorts (the dimension
    # filter, 56,000 tasks), it sorts ids, not the questions' text (which spilled to disk: 550 ms).
    ids = list(tasks.order_by("pk").values_list("pk", flat=True)[:PAGE_SIZE + 1])
    rows = list(Task.objects.filter(pk__in=ids[:PAGE_SIZE]).annotate(state=row_state(project))
                .select_related("response__question", "rubric_version")
                .only("id", "status", "is_golden", "live_count", "submitted_count", "overlap", "created_at",
                      "completed_at", "response__model_name", "response__question__external_id",
                      "response__question__final_user_turn", "response__question__primary_scene",
                      "response__question__difficulty", "rubric_version__number")
                .order_by("pk"))
    next_after = ids[PAGE_SIZE - 1] if len(ids) > PAGE_SIZE else None
    total = counts.get(state, 0) if state else sum(counts.values())
    return BoardPage(counts=counts, total=total, rows=rows, next_after=next_after)


# Scenes and model names change only on import; reading them means a DISTINCT over every question
# and response (150 ms of the board's 260 ms at 100,000 tasks), so they are cached for a while.
CHOICES_CACHE_S = 300
# A project compares a handful of models; past this many names the model filter is a text field
# (a select of 100,000 options made the page 5.7 MB and 3.5 s).
MODEL_CHOICES_MAX = 200


def _scenes_and_models(project: Project) -> tuple[list[str], list[str]]:
    questions = Question.objects.filter(project=project)
    scenes = sorted(set(questions.exclude(primary_scene="").values_list("primary_scene", flat=True).distinct())
                    | set(questions.exclude(secondary_scene="").values_list("secondary_scene", flat=True)
                          .distinct()))
    models = list(Response.objects.filter(project=project).values_list("model_name", flat=True)
                  .distinct().order_by("model_name")[:MODEL_CHOICES_MAX + 1])
    return scenes, models


def board_choices(project: Project) -> dict[str, Any]:
    """What the filter selects offer: a few small queries, none over the tasks."""
    key = f"board-choices:{project.pk}"
    cached = cache.get(key)
    if cached is None:
        cached = _scenes_and_models(project)
        cache.set(key, cached, CHOICES_CACHE_S)
    scenes, models = cached
    versions = list(RubricVersion.objects.filter(rubric_id=project.rubric_id).exclude(status="draft")
                    .values_list("number", flat=True).order_by("number"))
    experts = list(project_experts(project).values_list("pk", "expert_profile__pseudonym"))
    return {
        "scenes": scenes, "models": models[:MODEL_CHOICES_MAX], "models_overflow": len(models) > MODEL_CHOICES_MAX,
        "versions": versions,
        "dimensions": list(Dimension.objects.order_by("sort_order", "code")),
        "difficulties": Difficulty.choices, "zones": ItemConsensus.Zone.choices,
        "experts": sorted(({"id": pk, "pseudonym": name or f"#{pk}"} for pk, name in experts),
                          key=lambda e: e["pseudonym"]),
    }


@dataclass(frozen=True)
class TaskHistory:
    task: Task
    state: str
    assignments: list[Assignment]
    items: list[RubricItem]
    labels: dict[int, dict[int, Label]]  # assignment id -> rubric item id -> label
    consensus: dict[int, ItemConsensus]  # rubric item id -> verdict
    consultations: Sequence[Consultation]

    @property
    def submissions(self) -> list[Assignment]:
        """Assignments that left labels (submitted, or submitted then rejected), in lease order."""
        return [a for a in self.assignments if a.status in (Assignment.Status.SUBMITTED, Assignment.Status.REJECTED)]


def task_history(project: Project, task_id: Any) -> TaskHistory:
    """Everything that happened to one task of `project`: NotFound for a task of another project."""
    task_pk = _int(task_id)
    task = (Task.objects.filter(project=project, pk=task_pk).annotate(state=row_state(project))
            .select_related("response__question", "rubric_version").first() if task_pk else None)
    if task is None:
        raise NotFound("No such task.")
    assignments = list(task.assignments.select_related("expert__expert_profile", "skip").order_by("leased_at", "pk"))
    labels: dict[int, dict[int, Label]] = {}
    for label in Label.objects.filter(task=task):
        labels.setdefault(label.assignment_id, {})[label.rubric_item_id] = label
    items = list(RubricItem.objects.filter(version_id=task.rubric_version_id,
                                           question_ref=task.response.question.external_id)
                 .select_related("dimension").order_by("position"))
    consensus = {c.rubric_item_id: c for c in ItemConsensus.objects.filter(task=task)}
    consultations = list(Consultation.objects.filter(task=task).select_related("rubric_item")
                         .annotate(vote_count=Count("votes")).order_by("pk"))
    return TaskHistory(task=task, state=task.state, assignments=assignments, items=items, labels=labels,
                       consensus=consensus, consultations=consultations)
