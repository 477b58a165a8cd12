"""Pulling work: an expert leases the next task; leases expire and their slot returns.

Rules (DESIGN step 4): a task reaches exactly `overlap` distinct experts, drawn at
random among eligible ones; an expert never holds two assignments on one task, and
never gets back a task whose lease they let expire. The database enforces both rules
(unique constraints and a trigger); this module keeps the counters on Task in step.

Eligibility (all of it, or no task): annotate permission in the project, an active
expert profile, a passing calibration once the project has a golden set
(`annotation.calibration.services.calibration_check`), a free lease under the
expert's limit; and per task, a tier that allows the question's difficulty
(`project.hard_min_tier`). Among eligible tasks the draw may lean toward the
expert's strengths (`annotation.assignment.matching`), and at `project.control_rate_pct`
a lease is a silent control task: a golden task, leased and shown like any other.

Fill order (`project.fill_order`): by default the draw looks first among the open tasks
that already have a submission or a live lease (`live_count > 0`, a ring of its own:
`task_started_ring_idx`), at random among them, and among all open tasks only when none
of those is left for the expert; "spread evenly" skips that first step. Either way the
expert never chooses, nobody chooses the panel, and the distinctness and overlap rules
above hold (the database enforces them).
"""
import json
import logging
import random
from datetime import datetime, timedelta
from functools import cached_property

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce

from annotation import permissions
from annotation.assignment import matching
from annotation.assignment.selectors import difficulties_for, week_start
from annotation.calibration.selectors import golden_task_ids_seen_in_calibration, golden_usable_tasks
from annotation.calibration.services import calibration_check
from annotation.lock_objects import assignment_lock, expert_profile_lock, task_lock, task_lock_or_skip
from annotation.models import (
    Assignment,
    CalibrationAttempt,
    Difficulty,
    FillOrder,
    Project,
    Question,
    Response,
    Task,
)
from annotation.models.work import LIVE_ASSIGNMENT_STATUSES
from annotation.projects.rules import project_check_leasing
from core.error_codes import ErrorCode
from core.errors import Conflict, Forbidden, NotFound
from core.prepared import Prepared
from core.sql_insert import insert_parts, saved_as
from experts.models import ExpertProfile, User
from rubrics.models import Dimension, RubricItem, RubricVersion

logger = logging.getLogger(__name__)

RING_SIZE = 2**62
# A draw takes the first unlocked open task past a random point of the ring; while open
# tasks exist but are all locked by concurrent claims, it draws again.
DRAW_ATTEMPTS = 25
EXPIRE_BATCH = 50


def free_slot(task: Task) -> int:
    """The lowest slot number without a live assignment (the task row must be locked)."""
    if task.live_count == 0:
        return 1  # live_count counts the live assignments (kept in step under the task's lock)
    taken = set(
        Assignment.objects.filter(task=task, status__in=[Assignment.Status.LEASED, Assignment.Status.SUBMITTED])
        .values_list("slot", flat=True)
    )
    return next(n for n in range(1, task.overlap + 1) if n not in taken)


def _open_tasks_for(*, project: Project, version_id: int, expert: User, difficulties: list[str]) -> QuerySet[Task]:
    """Regular open tasks of the version the expert never held, of a difficulty their tier takes."""
    held_before = Assignment.objects.filter(task=OuterRef("pk"), expert=expert)
    # Questions outside the project's blind-test sample are the judge's only (annotation.blind_test).
    qs = (Task.objects.filter(project=project, rubric_version_id=version_id, status=Task.Status.OPEN,
                              is_golden=False, response__question__judge_only=False)
          .exclude(Exists(held_before)))
    if len(difficulties) < len(Difficulty.values):
        qs = qs.filter(response__question__difficulty__in=difficulties)
    return qs


def _draw_candidate(*, tasks: QuerySet[Task], start: int) -> Task | None:
    """The first unlocked task past `start` on the ring, wrapping around; locked (FOR NO KEY UPDATE)."""
    for part in (tasks.filter(shuffle_key__gte=start), tasks.filter(shuffle_key__lt=start)):
        found = list(part.select_related("response__question").order_by("shuffle_key")
                     .select_for_update(no_key=True, skip_locked=True, of=("self",))[:1])
        if found:
            return found[0]
    return None


# The open tasks of a version that the expert never held (`_open_tasks_for`), as SQL for the
# one-query draw; {extra} narrows them to a difficulty, a priority and the started tasks.
_POOL_SQL = """SELECT t.id FROM {task} t JOIN {response} r ON r.id = t.response_id
    JOIN {question} q ON q.id = r.question_id
    WHERE t.project_id = %s AND t.rubric_version_id = %s AND t.status = %s AND NOT t.is_golden
      AND NOT q.judge_only{extra}
      AND NOT EXISTS (SELECT 1 FROM {assignment} a WHERE a.task_id = t.id AND a.expert_id = %s)"""
_LOCK_SKIPPING = "FOR NO KEY UPDATE OF t SKIP LOCKED"
_DIMENSIONS_SQL = """ARRAY(SELECT i.dimension_id FROM {item} i JOIN {dimension} d ON d.id = i.dimension_id
    WHERE i.version_id = {task}.rubric_version_id AND i.question_ref = {question}.external_id AND NOT d.is_gate)"""


def _draw_candidates_at_once(*, project: Project, version_id: int, expert: User, difficulties: list[str],
                             priority: int | None, draws: int, rng: random.Random,
                             with_dimensions: bool) -> list[Task]:
    """Up to `draws` candidates in one query (PostgreSQL), each locked FOR NO KEY UPDATE SKIP LOCKED.

    Each candidate is the first task past its own uniformly random point of the ring of the
    first pool that has a task free (the started tasks first with the default fill order), wrapping
    round: the rule `_draw_candidate` walks one query at a time, on the same tasks as
    `_open_tasks_for` (`priority`: those of that priority only). A task that a concurrent claim
    or submission holds locked is walked past, as the walk does, so a pool comes back empty only
    when all its tasks are busy at that instant. With `with_dimensions` each task carries its
    non-gate dimension ids (`dimension_ids`) for matching. Written as SQL: built with the ORM, the
    dozen subqueries cost about 18 ms of CPU to compile, more than the three queries they replace;
    and compiled once per process and shape (`core.prepared`), as what is left cost 3.5 ms.
    """
    starts = {f"start_{n}": rng.randrange(RING_SIZE) for n in range(draws)}
    narrowed = len(difficulties) < len(Difficulty.values)
    shape = {"fill_order": project.fill_order, "difficulties": tuple(sorted(difficulties)) if narrowed else None,
             "by_priority": priority is not None, "draws": draws, "with_dimensions": with_dimensions}
    values = {"project_id": project.pk, "version_id": version_id, "expert_id": expert.pk, **starts}
    if priority is not None:
        values["priority"] = priority
    return _DRAW.all(shape=shape, **values)


def _draw_query(*, fill_order: str, difficulties: tuple[str, ...] | None, by_priority: bool, draws: int,
                with_dimensions: bool, project_id: int, version_id: int, expert_id: int, priority: int = 0,
                **starts: int) -> QuerySet[Task]:
    """The query of `_draw_candidates_at_once`, with every value it reads as an argument (`core.prepared`)."""
    tables = {"task": Task._meta.db_table, "response": Response._meta.db_table,
              "question": Question._meta.db_table, "assignment": Assignment._meta.db_table}
    extra, extra_params = "", list[object]()
    if difficulties is not None:
        extra, extra_params = " AND q.difficulty = ANY(%s)", [list(difficulties)]
    if by_priority:
        extra, extra_params = extra + " AND t.priority = %s", [*extra_params, priority]
    pools = [extra + " AND t.live_count > 0", extra] if fill_order == FillOrder.FINISH_STARTED else [extra]
    # The pool's parameters in the order of its placeholders.
    head = [project_id, version_id, Task.Status.OPEN.value]
    pool_params = [*head, *extra_params, expert_id]
    firsts, params = [], []
    for pool in pools:
        ring = _POOL_SQL.format(extra=pool, **tables)
        # Each subquery locks what it finds and walks past the tasks that concurrent claims and submissions
        # hold locked (SKIP LOCKED), as `_draw_candidate` does: on the few started tasks, a lock at the
        # outer query alone left a point whose first task was busy without a candidate, and a busy
        # instant without any, for the walk to find one at several statements more.
        firsts += [f"({ring} AND t.shuffle_key >= p.start ORDER BY t.shuffle_key LIMIT 1 {_LOCK_SKIPPING})",
                   f"({ring} ORDER BY t.shuffle_key LIMIT 1 {_LOCK_SKIPPING})"]
        params += [*pool_params, *pool_params]
    # One row per random point: the subqueries are planned once, whatever the number of draws.
    points = [starts[f"start_{n}"] for n in range(draws)]
    picks = (f"SELECT COALESCE({', '.join(firsts)}) FROM unnest(ARRAY[{', '.join(['%s'] * draws)}]::bigint[])"
             " AS p(start)")
    # `status` again on the outer query: the lock rechecks it on the row's latest version (a concurrent
    # claim may have filled the task since the subqueries' snapshot), as the walk's WHERE does.
    # The picks as an array, computed once: as `IN (picks)` the planner joined on the COALESCE expression
    # and ran every point's subqueries twice (0.76 against 0.43 ms, at 100,000 tasks).
    found = (Task.objects.filter(pk__in=RawSQL(f"SELECT unnest(ARRAY({picks}))", [*params, *points]),
                                 status=Task.Status.OPEN)
             .select_related("response__question").order_by("shuffle_key")
             .select_for_update(no_key=True, skip_locked=True, of=("self",)))
    if with_dimensions:
        found = found.annotate(dimension_ids=RawSQL(_DIMENSIONS_SQL.format(
            item=RubricItem._meta.db_table, dimension=Dimension._meta.db_table, **tables), ()))
    return found


_DRAW = Prepared(_draw_query)


def _draw_control(*, project: Project, version: RubricVersion, expert: User, difficulties: list[str],
                  rng: random.Random) -> Task | None:
    """A golden task to lease as a silent control task, or None.

    Golden tasks the expert met in calibration are left out: they saw those references.
    """
    held_before = Assignment.objects.filter(task=OuterRef("pk"), expert=expert)
    qs = (golden_usable_tasks(project=project, version=version).filter(status=Task.Status.OPEN)
          .exclude(Exists(held_before))
          .exclude(pk__in=golden_task_ids_seen_in_calibration(project=project, expert=expert))
          .filter(response__question__difficulty__in=difficulties))
    ids = sorted(qs.values_list("pk", flat=True))
    rng.shuffle(ids)
    for task_id in ids:
        task = task_lock_or_skip(task_id)
        if task is not None and task.status == Task.Status.OPEN:
            return task
    return None


def assignment_claim_next(*, project: Project, expert: User, now: datetime,
                          rng: random.Random | None = None) -> Assignment | None:
    """Lease the next task in `project` to `expert`, or return None when no task is left for them.

    An unexpired lease the expert already holds in the project is returned again, so
    "next task" never hoards work (and a lease taken before a rubric change may still
    be finished). Otherwise the expert must be eligible: a member ("not_member"), with
    an active profile ("no_profile", "paused"), in an active project ("project_paused",
    "project_closed": an open lease is still returned) and calibrated
    ("calibration_required"). The draw takes candidates past random points of the task
    ring among tasks the expert may take and never held, and picks one by matching
    weight; SKIP LOCKED lets concurrent experts pass each other instead of queueing on
    one row. With `project.fill_order` "finish_started" (the default) the candidates
    come from the tasks someone already started while any is left for the expert, so
    panels complete one after another; "spread_evenly" draws from every open task alike.
    With probability `project.control_rate_pct` % the lease is a control task instead,
    when one is left for the expert; a control task is only handed out while regular
    work is left, so the end of a project looks the same to everyone.
    """
    return _claim(project_id=project.pk, expert=expert, now=now, rng=rng or random, member_only=False)[1]


def assignment_claim_next_in(*, project_id: int, expert: User, now: datetime,
                             rng: random.Random | None = None) -> tuple[Project, Assignment | None]:
    """The expert's "next task" in the project with this id (the web page and the API): the
    project and `assignment_claim_next`'s answer, read together. A project that does not
    exist or where the expert is not a member is NotFound, as every page of it answers them."""
    return _claim(project_id=project_id, expert=expert, now=now, rng=rng or random, member_only=True)


def _claim(*, project_id: int, expert: User, now: datetime, rng: random.Random,
           member_only: bool) -> tuple[Project, Assignment | None]:
    # One transaction for the whole claim, under the expert's lock (taken first): one expert's
    # claims (a double click, two tabs) run one after another, so the held lease, the lease limit
    # and the weekly capacity read next are exact until the lease is written. Holding it, the
    # claim never waits for another row: its tasks are drawn SKIP LOCKED.
    with transaction.atomic():
        profile = expert_profile_lock(expert.pk)
        project, lease, expired_stood_in_the_way = _claim_locked(
            project_id=project_id, expert=expert, profile=profile, now=now, rng=rng, member_only=member_only)
    if lease is None and expired_stood_in_the_way and leases_expire(project=project, now=now):
        # Overdue leases hold their slots until the beat's sweep (every minute); when they were
        # all that stood between the expert and a task, the claim returns them itself and draws again.
        with transaction.atomic():
            profile = expert_profile_lock(expert.pk)
            project, lease, _ = _claim_locked(project_id=project_id, expert=expert, profile=profile, now=now,
                                              rng=rng, member_only=member_only)
    return project, lease


def _claim_locked(*, project_id: int, expert: User, profile: ExpertProfile | None, now: datetime,
                  rng: random.Random, member_only: bool) -> tuple[Project, Assignment | None, bool]:
    """The claim under the expert's lock: (the project, the lease or None, whether a draw found nothing)."""
    context = _claim_context(project_id=project_id, expert=expert, now=now)
    if context is None or (member_only and not context.annotates):  # type: ignore[attr-defined]
        raise NotFound("No such project.")
    project = context
    if not project.annotates:  # type: ignore[attr-defined]
        raise Forbidden("You are not an annotator in this project.", code="not_member")
    if profile is None:
        raise Forbidden("Your account has no expert profile.", code="no_profile")
    if not profile.is_active:
        raise Forbidden("Your expert account is paused; contact the project manager.", code="paused")
    if project.held_id is not None:  # type: ignore[attr-defined]
        # A lease a PM assigned by hand for urgent work, of a higher priority, comes back first.
        return project, Assignment.objects.get(pk=project.held_id), False  # type: ignore[attr-defined]
    project_check_leasing(project)
    if not project.calibrated:  # type: ignore[attr-defined]
        calibration_check(project=project, expert=expert)  # raises unless the project has no golden set
    version_id = project.version_id  # type: ignore[attr-defined]
    if version_id is None:
        return project, None, False
    counts = {"live": project.live_leases, "week": project.week_work}  # type: ignore[attr-defined]
    expert_check_room(profile=profile, expert=expert, now=now, counts=counts)
    if connection.vendor == "postgresql":
        strengths = matching.strengths_from_rows(json.loads(project.strength_rows))  # type: ignore[attr-defined]
    else:
        strengths = matching.expert_strengths(profile, expert)
    lease = _claim_draw(project=project, version_id=version_id, expert=expert, profile=profile, now=now, rng=rng,
                        strengths=strengths)
    return project, lease, lease is None


def _claim_context_query(*, role: str, is_active: bool, is_superuser: bool, project_id: int, expert_id: int,
                         now: datetime, week: datetime, content_type_id: int) -> QuerySet[Project]:
    """The query of `_claim_context`, with every value it reads as an argument (`core.prepared`)."""
    expert = User(pk=expert_id, role=role, is_active=is_active, is_superuser=is_superuser)
    mine = Assignment.objects.filter(expert_id=expert_id).order_by()
    live = mine.filter(status=Assignment.Status.LEASED, expires_at__gt=now)
    this_week = mine.filter(kind=Assignment.Kind.WORK, submitted_at__gte=week,
                            status__in=[Assignment.Status.SUBMITTED, Assignment.Status.REJECTED])

    def count(rows: QuerySet[Assignment]) -> Coalesce:
        return Coalesce(Subquery(rows.values("expert_id").annotate(n=Count("pk")).values("n")[:1]), 0)

    found = (Project.objects.select_related("rubric").filter(pk=project_id)
             .annotate(annotates=permissions.can_annotate_expression(expert, content_type_id),
                       held_id=Subquery(live.filter(task__project_id=OuterRef("pk"))
                                        .order_by("-task__priority", "leased_at").values("pk")[:1]),
                       calibrated=Exists(CalibrationAttempt.objects.filter(
                           project=OuterRef("pk"), expert_id=expert_id, status=CalibrationAttempt.Status.PASSED)),
                       version_id=Subquery(RubricVersion.objects.filter(
                           rubric_id=OuterRef("rubric_id"), status=RubricVersion.Status.PUBLISHED)
                           .order_by("-number").values("pk")[:1]),
                       live_leases=count(live), week_work=count(this_week)))
    if connection.vendor == "postgresql":
        found = found.annotate(strength_rows=RawSQL(*matching.strengths_sql(expert_id)))
    return found


_CLAIM_CONTEXT = Prepared(_claim_context_query)


def _claim_context(*, project_id: int, expert: User, now: datetime) -> Project | None:
    """The project with all the claim must know first, in one query (read under the expert's lock):
    whether the expert may annotate in it (`annotates`), a lease they hold there (`held_id`: a
    higher priority first, then the oldest), whether they passed a calibration (`calibrated`), the
    version new leases use (`version_id`), their live leases and their work submitted this week
    (`live_leases`, `week_work`: only those rows are read, by `assignment_expert_status_idx` and
    `assignment_expert_week_idx`, never the whole history) and, on PostgreSQL, their matching
    strengths (`strength_rows`, `matching.strengths_sql`). Compiled once per process (`core.prepared`):
    building and compiling it cost eight times what running it does."""
    return _CLAIM_CONTEXT.first(
        shape={"role": expert.role, "is_active": expert.is_active, "is_superuser": expert.is_superuser},
        project_id=project_id, expert_id=expert.pk, now=now, week=week_start(now),
        content_type_id=permissions.project_content_type_id())


def _claim_draw(*, project: Project, version_id: int, expert: User, profile: ExpertProfile, now: datetime,
                rng: random.Random, strengths: dict[int, float]) -> Assignment | None:
    """Draw and lease a task of `version_id` for the (eligible) expert, or None when none is left for them.

    Runs under the expert's lock, in the claim's transaction."""
    difficulties = difficulties_for(project=project, tier=profile.tier)
    rings = _Rings(project=project, version_id=version_id, expert=expert, difficulties=difficulties)
    if project.has_priorities:
        # The highest priority among the tasks left for the expert: the top entries of
        # task_open_priority_ring_idx, one short index scan; the draw then walks the ring within it.
        found = rings.tasks.order_by("-priority").values_list("priority", flat=True).first()
        if found is None:
            return None
        rings.top = found
    draws = matching.CANDIDATES if strengths else 1
    want_control = rng.random() * 100 < project.control_rate_pct
    for _attempt in range(DRAW_ATTEMPTS):
        lease = _draw_and_lease(project=project, version_id=version_id, expert=expert, profile=profile,
                                rings=rings, draws=draws, strengths=strengths,
                                want_control=want_control, difficulties=difficulties, now=now, rng=rng)
        if lease is not None:
            return lease
        if not rings.tasks.exists():
            return None
        # Every open task was locked by a concurrent claim at that instant (or the drawn one was
        # taken in between): draw again.
    return None


class _Rings:
    """The open tasks the expert may take (`tasks`) and the pools the ring walk tries in turn (`pools`),
    as querysets built when first used: the one-query draw (PostgreSQL) needs neither unless it comes
    back empty, and building them cost more CPU than the draw itself."""

    def __init__(self, *, project: Project, version_id: int, expert: User, difficulties: list[str]) -> None:
        self.project, self.version_id, self.expert, self.difficulties = project, version_id, expert, difficulties
        self.top = 0  # the highest priority left, in a project with priorities

    @cached_property
    def tasks(self) -> QuerySet[Task]:
        return _open_tasks_for(project=self.project, version_id=self.version_id, expert=self.expert,
                               difficulties=self.difficulties)

    @cached_property
    def pools(self) -> list[QuerySet[Task]]:
        first = self.tasks.filter(priority=self.top) if self.project.has_priorities else self.tasks
        # Finish started tasks first: the open tasks someone started (a submission or a live lease)
        # are drawn from first, by the same ring walk, and the rest only when none is left.
        if self.project.fill_order == FillOrder.FINISH_STARTED:
            return [first.filter(live_count__gt=0), first]
        return [first]


def _draw_and_lease(*, project: Project, version_id: int, expert: User, profile: ExpertProfile,
                    rings: _Rings, draws: int,
                    strengths: dict[int, float], want_control: bool, difficulties: list[str], now: datetime,
                    rng: random.Random) -> Assignment | None:
    """One attempt of the claim: draw candidates, pick one, lease it (None: all locked, or lost)."""
    dims: dict[int, set[int]] | None = None
    candidates: list[Task] = []
    if connection.vendor == "postgresql":
        # Twice before the walk: the draw comes back empty only when every task left for the expert
        # was locked by concurrent claims and submissions at that instant, and a second draw (one
        # prepared query) nearly always finds one free, where the walk builds and compiles its queries
        # each time.
        for _draw_at_once in range(2):
            candidates = _draw_candidates_at_once(project=project, version_id=version_id, expert=expert,
                                                  difficulties=difficulties, priority=rings.top if
                                                  project.has_priorities else None, draws=draws, rng=rng,
                                                  with_dimensions=bool(strengths))
            if candidates:
                break
        if candidates and strengths:
            dims = {t.pk: set(t.dimension_ids) for t in candidates}  # type: ignore[attr-defined]
    if not candidates:
        # Elsewhere, or when each candidate above was locked by a concurrent claim (or no pool had
        # any task): walk the rings one candidate at a time, past the locked tasks.
        for pool in rings.pools:
            for _draw in range(draws):
                task = _draw_candidate(tasks=pool, start=rng.randrange(RING_SIZE))
                if task is None:
                    break  # the walk went round the whole pool: nothing in it is free
                if all(task.pk != c.pk for c in candidates):
                    candidates.append(task)
            if candidates:
                break
    if not candidates and rings.top > 0:
        # Every task of the top priority is locked by concurrent claims right now (they
        # are being leased): the expert takes one of the rest rather than waiting.
        task = _draw_candidate(tasks=rings.tasks, start=rng.randrange(RING_SIZE))
        candidates = [task] if task is not None else []
    if not candidates:
        return None
    chosen = None
    if want_control:
        version = RubricVersion.objects.get(pk=version_id)
        chosen = _draw_control(project=project, version=version, expert=expert, difficulties=difficulties, rng=rng)
    if chosen is None:
        chosen = matching.candidate_pick(candidates, strengths, rng, dims=dims)
    return _lease(task=chosen, expert=expert, now=now, timeout_s=project.lease_timeout_s)


def _room_counts(*, expert: User, now: datetime) -> dict[str, int]:
    """The expert's live leases and their work submitted this week, in one query.

    Only those rows are read (indexes `assignment_expert_status_idx` and
    `assignment_expert_week_idx`), never the expert's whole history.
    """
    start = week_start(now)
    live = Q(status=Assignment.Status.LEASED, expires_at__gt=now)
    week = Q(kind=Assignment.Kind.WORK, submitted_at__gte=start,
             status__in=[Assignment.Status.SUBMITTED, Assignment.Status.REJECTED])
    counts = (Assignment.objects.filter(expert=expert).filter(Q(status=Assignment.Status.LEASED)
                                                             | Q(submitted_at__gte=start))
              .aggregate(live=Count("pk", filter=live), week=Count("pk", filter=week)))
    return {name: counts[name] or 0 for name in ("live", "week")}


def expert_check_room(*, profile: ExpertProfile, expert: User, now: datetime, adding: int = 1,
                      name: str | None = None, counts: dict[str, int] | None = None) -> None:
    """Raise Conflict unless the expert may take `adding` more leases now: under their concurrent-lease
    limit ("lease_limit") and under their weekly capacity ("weekly_capacity"), counting the work
    submitted since the week began (Monday, local time) and the leases running now.

    With `name` (a PM assigning by hand), the refusal names the expert instead of addressing them.
    One query, or none with `counts` (from `_room_counts`) already read.
    """
    start = week_start(now)
    counts = counts if counts is not None else _room_counts(expert=expert, now=now)
    if counts["live"] + adding > profile.max_concurrent_leases:
        if name is not None:
            raise Conflict(f"{name} holds as many leases as they may.", code=ErrorCode.ASSIGN_LEASE_LIMIT,
                           params={"name": name, "max": profile.max_concurrent_leases})
        raise Conflict("You already hold as many leases as you may; finish one first.", code=ErrorCode.LEASE_LIMIT)
    if counts["week"] + counts["live"] + adding > profile.weekly_capacity:
        next_week = (start + timedelta(days=7)).strftime("%Y-%m-%d")
        if name is not None:
            raise Conflict(f"{name} reached their weekly capacity.", code=ErrorCode.ASSIGN_WEEKLY_CAPACITY,
                           params={"name": name, "max": profile.weekly_capacity})
        raise Conflict("You reached your weekly capacity.", code=ErrorCode.AT_WEEKLY_CAPACITY,
                       params={"max": profile.weekly_capacity, "retry_at": next_week})


def _lease(*, task: Task, expert: User, now: datetime, timeout_s: int) -> Assignment | None:
    """Lease the (locked) task to the expert: the assignment in the lowest free slot, and the task's
    live count (and "full") in step. None when the expert holds an assignment of the task already (a
    concurrent request of theirs won it, or a lease of theirs that was committed since the draw's
    snapshot): the caller draws again."""
    assignment = Assignment(task=task, expert=expert, slot=1, status=Assignment.Status.LEASED,
                            leased_at=now, expires_at=now + timedelta(seconds=timeout_s))
    if connection.vendor != "postgresql":
        assignment.slot = free_slot(task)
        try:
            with transaction.atomic():
                assignment.save(force_insert=True)
        except IntegrityError:
            return None
        task.live_count += 1
        if task.live_count >= task.overlap:
            task.status = Task.Status.FULL
        task.save(update_fields=["live_count", "status"])
        return assignment
    row = _lease_insert(assignment)
    if row is None:
        return None
    pk, assignment.slot, task.live_count, task.status = row
    saved_as(assignment, pk)
    return assignment


# The lease as one statement (PostgreSQL): the assignment goes in the lowest slot that no live
# assignment of the task holds (what `free_slot` reads), and the task's live count and status follow
# it, only when the row went in. The task is locked by the claim, so nothing else changes its
# assignments meanwhile; ON CONFLICT DO NOTHING answers "the expert has this task already" with no
# row instead of an error that would end the claim's transaction.
_LEASE_SQL = """WITH slot AS (
        SELECT min(n) AS n FROM {task} t, generate_series(1, t.overlap) AS n
        WHERE t.id = %s AND n NOT IN (SELECT a.slot FROM {assignment} a WHERE a.task_id = t.id
                                      AND a.status IN ({live}))),
    ins AS (INSERT INTO {assignment} ({columns}) SELECT {values} FROM slot WHERE slot.n IS NOT NULL
            ON CONFLICT DO NOTHING RETURNING id, task_id, slot)
    UPDATE {task} t SET live_count = t.live_count + 1,
        status = CASE WHEN t.live_count + 1 >= t.overlap THEN %s ELSE t.status END
    FROM ins WHERE t.id = ins.task_id
    RETURNING ins.id, ins.slot, t.live_count, t.status"""


# The live statuses are constants of the code, written into the text (a list parameter cost psycopg more
# to adapt than the rest of the statement's values together).
_LIVE_STATUSES_SQL = ", ".join(f"'{status}'" for status in LIVE_ASSIGNMENT_STATUSES)


def _lease_insert(assignment: Assignment) -> tuple[int, int, int, str] | None:
    columns, values, params = insert_parts(assignment, computed={"slot": "slot.n"})
    sql = _LEASE_SQL.format(task=Task._meta.db_table, assignment=Assignment._meta.db_table,
                            columns=", ".join(columns), values=", ".join(values), live=_LIVE_STATUSES_SQL)
    with connection.cursor() as cursor:
        cursor.execute(sql, [assignment.task_id, *params, Task.Status.FULL.value])
        return cursor.fetchone()


def lease_extend(*, assignment: Assignment, now: datetime) -> None:
    """Push a live lease's expiry forward: an expert who is still working keeps the task."""
    if assignment.status == Assignment.Status.LEASED and assignment.expires_at > now:
        timeout = assignment.task.project.lease_timeout_s
        Assignment.objects.filter(pk=assignment.pk, status=Assignment.Status.LEASED).update(
            expires_at=now + timedelta(seconds=timeout))


def _slot_return(task: Task) -> None:
    """One live lease of the (locked) task has ended: its slot is free again."""
    task.live_count -= 1
    if task.status == Task.Status.FULL:
        task.status = Task.Status.OPEN
    task.save(update_fields=["live_count", "status"])


def leases_expire(*, now: datetime, project: Project | None = None, limit: int = EXPIRE_BATCH) -> int:
    """Expire overdue leases and return their slots to the pool; returns how many expired."""
    # A returned submission's lease is not expired here: when it runs out unsubmitted the first
    # submission is put back (annotation.review.services.submission_returns_lapse).
    overdue = (Assignment.objects.filter(status=Assignment.Status.LEASED, expires_at__lte=now)
               .filter(Q(submission_return__isnull=True) | Q(submission_return__resubmitted_at__isnull=False)
                       | Q(submission_return__lapsed_at__isnull=False)))
    if project is not None:
        overdue = overdue.filter(task__project=project)
    expired = 0
    for assignment_id, task_id in overdue.order_by("task_id").values_list("pk", "task_id")[:limit]:
        with transaction.atomic():
            task = task_lock_or_skip(task_id)
            if task is None:
                continue
            changed = Assignment.objects.filter(pk=assignment_id, status=Assignment.Status.LEASED,
                                                expires_at__lte=now).update(status=Assignment.Status.EXPIRED)
            if not changed:
                continue
            _slot_return(task)
            expired += 1
    if expired:
        logger.info("leases expired", extra={"count": expired})
    return expired


def lease_end(*, assignment: Assignment) -> bool:
    """End a lease before its expiry: the slot returns to the pool at once and the assignment
    becomes "released", which is never revived (the expert gave the task back, skipped it, or
    left the project; the one-assignment-per-expert-and-task rule keeps the task from being
    offered to them again). A lease that already expired is marked released too (its slot
    was returned by the sweep, or is returned now). Their draft is kept.

    Returns False when there was nothing to end (submitted, or already released). Waits
    for the task's lock, so a concurrent submission of the same lease either lands first
    (and this returns False) or finds the lease released.
    """
    with transaction.atomic():
        task = task_lock(assignment.task_id)
        current = assignment_lock(assignment.pk).status
        if current not in (Assignment.Status.LEASED, Assignment.Status.EXPIRED):
            return False
        Assignment.objects.filter(pk=assignment.pk).update(status=Assignment.Status.RELEASED)
        if current == Assignment.Status.LEASED:
            _slot_return(task)
        assignment.status = Assignment.Status.RELEASED
    logger.info("lease ended", extra={"assignment_id": assignment.pk, "task_id": assignment.task_id})
    return True


def leases_end_for_expert(*, project: Project, expert: User) -> int:
    """End every open lease (work and calibration) `expert` holds in `project`, as when they
    leave it; returns how many ended. Each lease ends in its own transaction, in task order
    (the lock order of `annotation.lock_objects`)."""
    open_leases = (Assignment.objects.filter(expert=expert, task__project=project, status=Assignment.Status.LEASED)
                   .order_by("task_id"))
    return sum(lease_end(assignment=assignment) for assignment in open_leases)


def assignment_revive(*, assignment: Assignment, task: Task, now: datetime) -> None:
    """Take an expired lease back for a late submission, if its task still has a free slot.

    The task row must be locked by the caller.
    """
    if task.live_count >= task.overlap:
        raise Conflict("Your lease expired and the task went to another expert; your draft is kept "
                       "but cannot be submitted.", code="lease_lost")
    assignment.slot = free_slot(task)
    assignment.status = Assignment.Status.LEASED
    assignment.expires_at = now + timedelta(seconds=task.project.lease_timeout_s)
    assignment.save(update_fields=["slot", "status", "expires_at"])
    task.live_count += 1
    if task.live_count >= task.overlap:
        task.status = Task.Status.FULL
    task.save(update_fields=["live_count", "status"])


__all__ = ["assignment_claim_next", "assignment_revive", "lease_end", "lease_extend", "leases_end_for_expert",
           "leases_expire", "task_lock"]
