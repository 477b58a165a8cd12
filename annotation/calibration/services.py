"""Calibration: an expert answers a drawn set of golden tasks and passes at the project's threshold.

Rules (DESIGN step 3, issue 3):

* Calibration gates real work once the project has a golden set (any reference
  labels). Before that, a project runs without calibration, and its PM sees why.
* An attempt draws `project.calibration_size` (10–20) tasks at random from the usable
  golden tasks of the current rubric version; when fewer exist, calibration is "not
  ready" and experts who need it are told so (the PM must import references).
* Each item is scored against its reference; the attempt passes when the share of
  items right reaches `project.calibration_threshold_pct` (the threshold in force when
  the attempt started is kept on it).
* A failed attempt may be retried `project.calibration_retry_delay_s` seconds after it
  finished. A pass stays valid until a publish that changes the standard marks every
  attempt of the project stale (`calibrations_mark_stale`).
* Calibration answers are not labels: no assignment, no consensus, no pay.

Locks: the attempt row before its answers (`annotation.lock_objects`).
"""
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from functools import cache

from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef, Window
from django.db.models.functions import RowNumber

from annotation import permissions
from annotation.calibration.selectors import attempt_get_for_expert, golden_usable_tasks, project_has_golden_set
from annotation.labels import labels_clean, notes_clean
from annotation.lock_objects import calibration_attempt_lock
from annotation.models import (
    CalibrationAnswer,
    CalibrationAttempt,
    CalibrationDraft,
    CalibrationTask,
    GoldenReference,
    Project,
)
from annotation.projects.rules import project_check_leasing
from annotation.quality.golden_tally import golden_tally_add
from annotation.selectors import rubric_items_for_task, rubric_version_current
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, Forbidden, NotFound
from experts.models import User
from rubrics.models import RubricVersion

Status = CalibrationAttempt.Status


# The standing reads an expert's newest attempts only: an open or passed attempt is always
# among them (no attempt starts while one is open or passed), and the newest decides the rest.
ATTEMPTS_READ = 20
# Statuses from which the expert may start an attempt, once calibration is ready and no retry delay runs.
STARTABLE = ("needed", "stale", "failed")


@dataclass(frozen=True)
class CalibrationState:
    """Where an expert stands on calibration in one project."""

    required: bool
    size: int
    version: RubricVersion | None
    passed: CalibrationAttempt | None
    open: CalibrationAttempt | None
    last: CalibrationAttempt | None
    retry_at: datetime | None
    available_count: Callable[[], int] = field(repr=False, compare=False)

    @property
    def available(self) -> int:
        """Usable golden tasks of the current version. Counted on first use: a calibrated expert's
        standing never needs it (7 ms of a 100,000-task project's home page), and the states of one
        call share the count."""
        return self.available_count()

    @property
    def ready(self) -> bool:
        return self.version is not None and self.available >= self.size

    @property
    def status(self) -> str:
        """One word for pages and the API: not_required, calibrated, in_progress, failed, stale, not_ready, needed."""
        if not self.required:
            return "not_required"
        if self.passed is not None:
            return "calibrated"
        if self.open is not None:
            return "in_progress"
        if self.last is not None and self.last.status == Status.FAILED:
            return "failed"
        if not self.ready:
            return "not_ready"
        if self.last is not None and self.last.status == Status.STALE:
            return "stale"
        return "needed"

    @property
    def can_start(self) -> bool:
        """Whether `calibration_start` would draw a new attempt now (the page offers the button, the API says so)."""
        return self.status in STARTABLE and self.ready and self.retry_at is None


def calibration_states_for_experts(*, project: Project, experts: Iterable[User],
                                   now: datetime) -> dict[int, CalibrationState]:
    """Each expert's calibration standing in `project` at `now`, by user id, in three queries (a
    fourth counts the usable golden tasks if a state's `available` is read).

    The project's current version, golden set and usable golden tasks are read once for
    every expert, and every expert's newest attempts in one query, so a page listing the
    project's experts costs the same for two experts as for two hundred.
    """
    experts = list(experts)
    version = rubric_version_current(project)
    newest: Iterable[CalibrationAttempt]
    if len(experts) == 1:
        # One expert (their home card, their calibration page): a plain LIMIT, the same rows; the
        # window query's compilation alone cost 2 ms of CPU on every home page.
        newest = (CalibrationAttempt.objects.filter(project=project, expert=experts[0])
                  .order_by("-started_at", "-id")[:ATTEMPTS_READ])
    else:
        newest = (CalibrationAttempt.objects.filter(project=project, expert__in=experts)
                  .annotate(rank=Window(RowNumber(), partition_by=[F("expert_id")],
                                        order_by=[F("started_at").desc(), F("id").desc()]))
                  .filter(rank__lte=ATTEMPTS_READ).order_by("expert_id", "-started_at", "-id"))
    attempts: dict[int, list[CalibrationAttempt]] = {e.pk: [] for e in experts}
    for attempt in newest:
        attempts[attempt.expert_id].append(attempt)
    available = cache(lambda: golden_usable_tasks(project=project, version=version).count()
                      if version is not None else 0)
    required = project_has_golden_set(project)
    return {expert_id: _state(project=project, attempts=rows, version=version, available=available,
                              required=required, now=now)
            for expert_id, rows in attempts.items()}


def _state(*, project: Project, attempts: list[CalibrationAttempt], version: RubricVersion | None,
           available: Callable[[], int], required: bool, now: datetime) -> CalibrationState:
    passed = next((a for a in attempts if a.status == Status.PASSED), None)
    open_attempt = next((a for a in attempts if a.status == Status.IN_PROGRESS), None)
    last = attempts[0] if attempts else None
    retry_at = None
    if last is not None and last.status == Status.FAILED:
        retry_at = last.finished_at + timedelta(seconds=project.calibration_retry_delay_s)
        if retry_at <= now:
            retry_at = None
    return CalibrationState(required=required, available_count=available, size=project.calibration_size,
                            version=version, passed=passed, open=open_attempt, last=last, retry_at=retry_at)


def calibration_state(*, project: Project, expert: User, now: datetime) -> CalibrationState:
    """The expert's calibration standing in `project` at `now` (see `calibration_states_for_experts`)."""
    return calibration_states_for_experts(project=project, experts=[expert], now=now)[expert.pk]


def calibration_check(*, project: Project, expert: User) -> None:
    """Raise Forbidden (code "calibration_required") unless the expert may lease real work in `project`.

    Calibration gates work once the project has a golden set; from then on the expert
    needs a passed attempt that no rubric change has made stale.
    """
    # The passed attempt first: a calibrated expert (the claim's common case) is through in one query.
    if CalibrationAttempt.objects.filter(project=project, expert=expert,
                                         status=CalibrationAttempt.Status.PASSED).exists():
        return
    if not project_has_golden_set(project):
        return
    raise Forbidden("Pass the calibration on the project's current rubric version before taking real tasks.",
                    code=ErrorCode.CALIBRATION_REQUIRED)


def calibration_start(*, project: Project, expert: User, now: datetime,
                      rng: random.Random | None = None) -> CalibrationAttempt:
    """Start a calibration attempt (or return the one in progress) with a fresh random draw of golden tasks.

    Raises Forbidden for non-members, Conflict when the expert already passed
    ("already_calibrated"), must wait after a failure ("retry_later"), or the golden
    set of the current version is too small ("calibration_not_ready"), or the project is
    paused or closed ("project_paused", "project_closed"; an attempt in progress is returned).
    """
    if not permissions.can_annotate(expert, project):
        raise Forbidden("You are not an annotator in this project.", code="not_member")
    state = calibration_state(project=project, expert=expert, now=now)
    if state.open is None:
        # A new attempt is new work: refused while the project is paused or closed.
        project_check_leasing(project)
    if state.open is not None:
        return state.open
    if state.passed is not None:
        raise Conflict("You have already passed calibration on this rubric version.", code="already_calibrated")
    if state.retry_at is not None:
        retry_at = f"{state.retry_at:%Y-%m-%d %H:%M} UTC"
        raise Conflict(f"You can retry calibration after {retry_at}.", code=ErrorCode.RETRY_LATER,
                       params={"retry_at": retry_at})
    if not state.ready:
        raise Conflict("Calibration for the current rubric version is not ready yet: the project manager has to "
                       "import more golden reference labels.", code="calibration_not_ready")
    pool = list(golden_usable_tasks(project=project, version=state.version).values_list("pk", flat=True))
    drawn = (rng or random).sample(sorted(pool), state.size)
    try:
        with transaction.atomic():
            attempt = CalibrationAttempt.objects.create(
                expert=expert, project=project, rubric_version=state.version,
                threshold_pct=project.calibration_threshold_pct, started_at=now)
            CalibrationTask.objects.bulk_create(
                CalibrationTask(attempt=attempt, task_id=task_id, position=n) for n, task_id in enumerate(drawn, 1))
    except IntegrityError:
        # A concurrent request of the same expert started one first: hand back that one.
        return CalibrationAttempt.objects.get(project=project, expert=expert, status=Status.IN_PROGRESS)
    return attempt


def calibration_task_get(*, attempt: CalibrationAttempt, position) -> CalibrationTask:
    try:
        return (CalibrationTask.objects.select_related("task__response__question")
                .get(attempt=attempt, position=int(position)))
    except (CalibrationTask.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such calibration task.") from None


def calibration_attempt_passed(attempt: CalibrationAttempt) -> bool:
    """Whether the attempt reached its threshold: a pass, or a scored attempt that a later rubric change made stale.

    The result page and the API both say "passed" from here, so an expert whose pass
    went stale still reads that they passed at the time (and that the rubric changed since).
    """
    if attempt.status == Status.PASSED:
        return True
    return (attempt.status == Status.STALE and attempt.score_pct is not None
            and attempt.score_pct >= attempt.threshold_pct)


@dataclass(frozen=True)
class CalibrationProgress:
    """An attempt's tasks in order and which of them have answers: the counts and the next task
    the pages show and the API returns."""

    attempt: CalibrationAttempt
    positions: tuple[int, ...]
    answered: frozenset[int]

    @property
    def total(self) -> int:
        return len(self.positions)

    @property
    def answered_count(self) -> int:
        return len(self.answered)

    @property
    def passed(self) -> bool:
        return calibration_attempt_passed(self.attempt)

    @property
    def next_position(self) -> int | None:
        """The first task without answers; None unless the attempt is still in progress."""
        return self.next_after(0)

    def next_after(self, position: int) -> int | None:
        """The first task without answers after `position`, else the first one before it (None when none is left
        or the attempt is no longer in progress)."""
        if self.attempt.status != Status.IN_PROGRESS:
            return None
        remaining = [p for p in self.positions if p not in self.answered]
        later = [p for p in remaining if p > position]
        if later:
            return later[0]
        return remaining[0] if remaining else None


def calibration_progress(attempt: CalibrationAttempt) -> CalibrationProgress:
    """The attempt's positions and which are answered, in one query."""
    has_answers = CalibrationAnswer.objects.filter(attempt_id=attempt.pk, task_id=OuterRef("task_id"))
    rows = list(CalibrationTask.objects.filter(attempt=attempt).annotate(answered=Exists(has_answers))
                .order_by("position").values_list("position", "answered"))
    return CalibrationProgress(attempt=attempt, positions=tuple(p for p, _a in rows),
                               answered=frozenset(p for p, answered in rows if answered))


@dataclass(frozen=True)
class AnswerResult:
    attempt: CalibrationAttempt
    next_position: int | None  # the next unanswered task; None once the attempt is scored


def calibration_draft_save(*, expert: User, attempt_id, position, labels, notes=None) -> CalibrationDraft:
    """Autosave the marks and notes of one calibration task so far (any subset of its items).

    The draft is what the page shows on a reload; only `calibration_answer` counts for the score.
    """
    attempt = attempt_get_for_expert(expert, attempt_id)
    calibration_task = calibration_task_get(attempt=attempt, position=position)
    keys = [i.item_key for i in rubric_items_for_task(calibration_task.task)]
    clean = labels_clean(labels or {}, keys, partial=True)
    clean_notes = notes_clean(notes, keys)
    with transaction.atomic():
        attempt = calibration_attempt_lock(attempt.pk)
        _require_open(attempt)
        draft, _created = CalibrationDraft.objects.update_or_create(
            attempt=attempt, task_id=calibration_task.task_id, defaults={"labels": clean, "notes": clean_notes})
    return draft


def calibration_answer(*, expert: User, attempt_id, position, labels, now: datetime,
                       notes=None) -> AnswerResult:
    """Record the expert's 0/1 for every rubric item of one calibration task (answers may be changed
    until the last task is answered); answering the last open task scores the attempt. The
    notes, which do not score, are kept with the task's draft.
    """
    attempt = attempt_get_for_expert(expert, attempt_id)
    calibration_task = calibration_task_get(attempt=attempt, position=position)
    items = rubric_items_for_task(calibration_task.task)
    clean = labels_clean(labels, [i.item_key for i in items], partial=False)
    clean_notes = notes_clean(notes, [i.item_key for i in items])
    with transaction.atomic():
        attempt = calibration_attempt_lock(attempt.pk)
        _require_open(attempt)
        CalibrationDraft.objects.update_or_create(attempt=attempt, task_id=calibration_task.task_id,
                                                  defaults={"labels": clean, "notes": clean_notes})
        CalibrationAnswer.objects.filter(attempt=attempt, task_id=calibration_task.task_id).delete()
        CalibrationAnswer.objects.bulk_create(
            CalibrationAnswer(attempt=attempt, task_id=calibration_task.task_id, rubric_item=item,
                              value=clean[item.item_key], answered_at=now)
            for item in items
        )
        next_position = calibration_progress(attempt).next_after(calibration_task.position)
        if next_position is not None:
            return AnswerResult(attempt=attempt, next_position=next_position)
        _score(attempt=attempt, now=now)
    return AnswerResult(attempt=attempt, next_position=None)


def _require_open(attempt: CalibrationAttempt) -> None:
    if attempt.status == Status.STALE:
        raise Conflict("The rubric changed while you were calibrating; start a new calibration.",
                       code="calibration_stale")
    if attempt.status != Status.IN_PROGRESS:
        raise Conflict("This calibration attempt is finished.", code="calibration_finished")


def _score(*, attempt: CalibrationAttempt, now: datetime) -> None:
    references = {(r.task_id, r.rubric_item_id): r.value
                  for r in GoldenReference.objects.filter(task__in=attempt.tasks.values("task_id"))}
    total = correct = 0
    by_dimension: dict[int, tuple[int, int]] = {}
    for task_id, item_id, value, dim_id in CalibrationAnswer.objects.filter(attempt=attempt).values_list(
            "task_id", "rubric_item_id", "value", "rubric_item__dimension_id"):
        reference = references.get((task_id, item_id))
        if reference is None:
            continue
        total += 1
        correct += int(value == reference)
        dim_total, dim_correct = by_dimension.get(dim_id, (0, 0))
        by_dimension[dim_id] = (dim_total + 1, dim_correct + int(value == reference))
    if total == 0:
        raise DomainError("This calibration has no reference labels to score against.", code="no_references")
    score = (Decimal(100 * correct) / Decimal(total)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    attempt.items_total = total
    attempt.items_correct = correct
    attempt.score_pct = score
    attempt.finished_at = now
    attempt.status = Status.PASSED if score >= attempt.threshold_pct else Status.FAILED
    attempt.save(update_fields=["items_total", "items_correct", "score_pct", "finished_at", "status"])
    # A finished attempt is never scored again (`_require_open`), so its answers count once.
    golden_tally_add(expert_id=attempt.expert_id, project_id=attempt.project_id, counts=by_dimension)


def calibrations_mark_stale(*, project: Project, now: datetime) -> int:
    """Mark every live attempt of the project stale (passed, failed and in progress); returns how many."""
    return (CalibrationAttempt.objects.filter(project=project).exclude(status=Status.STALE)
            .update(status=Status.STALE, stale_at=now))


@dataclass(frozen=True)
class WrongItem:
    position: int
    dimension: str
    score: int | None
    content: str
    answer: int
    reference: int
    rationale: str


@dataclass(frozen=True)
class FeedbackTask:
    position: int
    question_id: str
    final_user_turn: str
    response: str
    wrong: list[WrongItem]


def calibration_feedback(attempt: CalibrationAttempt) -> list[FeedbackTask]:
    """Every item the expert got wrong, task by task, with the reference answer and its rationale.

    Only for a scored attempt; an attempt in progress shows nothing (it would give the answers away).
    """
    if attempt.finished_at is None:
        return []
    references = {(r.task_id, r.rubric_item_id): r
                  for r in GoldenReference.objects.filter(task__in=attempt.tasks.values("task_id"))}
    answers = {(a.task_id, a.rubric_item_id): a.value for a in CalibrationAnswer.objects.filter(attempt=attempt)}
    feedback = []
    for ct in attempt.tasks.select_related("task__response__question").order_by("position"):
        wrong = []
        for item in rubric_items_for_task(ct.task):
            ref = references.get((ct.task_id, item.pk))
            answer = answers.get((ct.task_id, item.pk))
            if ref is not None and answer is not None and answer != ref.value:
                wrong.append(WrongItem(position=item.position, dimension=item.dimension.display_name,
                                       score=item.score, content=item.content, answer=answer,
                                       reference=ref.value, rationale=ref.rationale))
        if wrong:
            question = ct.task.response.question
            feedback.append(FeedbackTask(position=ct.position, question_id=question.external_id,
                                         final_user_turn=question.final_user_turn,
                                         response=ct.task.response.text, wrong=wrong))
    return feedback
