"""Batch operations of a PM on a project: a filtered set of tasks, or a set of experts, in one transaction.

Each operation either completes or changes nothing: it runs in one transaction, and the first
refusal (a task with regular work marked golden, an expert who is not in the project) rolls
back what the operation did before it. The pages ask first (`core.confirm`) with the counts
`tasks_preview` gives, and report what was done after; `annotation.workload.jobs` applies each
confirmation once, in the request or, for a large set, in a worker that follows the `progress`
callback the task operations call after each slice of CHUNK tasks. Each operation writes one
audit entry with the ids it touched, in its own transaction.

Rejecting the submissions of a filtered set (`batch_reject`) moves money too: each one goes
through payments' `submission_reject` (the labels leave the consensus and the earning is
reversed), reached through the hook of `annotation.review.rejecting` since annotation may not
import payments.
"""
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from annotation.assignment.manual import assignments_create_by_hand, tasks_set_priority
from annotation.audit.services import audit_record
from annotation.lock_objects import expert_profile_lock, project_lock, tasks_lock
from annotation.models import Assignment, AuditAction, Difficulty, ItemConsensus, Project, Task
from annotation.models.project import OVERLAP
from annotation.projects.rules import project_check_writable
from annotation.projects.services import tasks_overlap_raise
from annotation.quality.control import expert_resume
from annotation.review.rejecting import rejection_earnings, review_rejecter
from annotation.selectors import project_experts
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, NotFound
from experts.models import ExpertProfile, User
from rubrics.models import Dimension

logger = logging.getLogger(__name__)

TASK_STATUSES = (Task.Status.OPEN, Task.Status.FULL, Task.Status.COMPLETE)
# Tasks locked and changed per statement; a worker reports its progress after each slice.
CHUNK = 200


@dataclass(frozen=True)
class TaskFilter:
    """Which tasks of the project a batch touches. Blank fields do not filter.

    `split_dimension` keeps the tasks with at least one split item (the panel disagreed) of that
    dimension code, the usual set whose overlap a PM raises.
    """

    status: str = ""
    difficulty: str = ""
    split_dimension: str = ""
    golden: str = ""  # "yes", "no" or blank
    task: str = ""  # one task id (an urgent task assigned by hand)

    @classmethod
    def from_data(cls, data) -> "TaskFilter":
        def pick(name: str, allowed) -> str:
            value = str(data.get(name, "") or "").strip()
            return value if value in allowed else ""

        return cls(status=pick("status", TASK_STATUSES), difficulty=pick("difficulty", Difficulty.values),
                   split_dimension=pick("split_dimension", set(Dimension.objects.values_list("code", flat=True))),
                   golden=pick("golden", ("yes", "no")),
                   task=task if (task := str(data.get("task", "") or "").strip()).isdigit() else "")

    def as_fields(self) -> dict[str, str]:
        return {"status": self.status, "difficulty": self.difficulty, "split_dimension": self.split_dimension,
                "golden": self.golden, "task": self.task}


def tasks_filtered(project: Project, task_filter: TaskFilter) -> QuerySet[Task]:
    """The project's tasks (superseded ones left out) the filter keeps, in pk order."""
    qs = Task.objects.filter(project=project).exclude(status=Task.Status.SUPERSEDED)
    if task_filter.status:
        qs = qs.filter(status=task_filter.status)
    if task_filter.difficulty:
        qs = qs.filter(response__question__difficulty=task_filter.difficulty)
    if task_filter.golden:
        qs = qs.filter(is_golden=task_filter.golden == "yes")
    if task_filter.task:
        qs = qs.filter(pk=int(task_filter.task))
    if task_filter.split_dimension:
        split = ItemConsensus.objects.filter(task=OuterRef("pk"), zone=ItemConsensus.Zone.SPLIT,
                                             rubric_item__dimension__code=task_filter.split_dimension)
        qs = qs.filter(Exists(split))
    return qs.order_by("pk")


def _with_work(task_ids: list[int]) -> QuerySet[Task]:
    work = Assignment.objects.filter(task=OuterRef("pk"), kind=Assignment.Kind.WORK)
    return Task.objects.filter(pk__in=task_ids).filter(Exists(work)).order_by("pk")


@dataclass(frozen=True)
class TaskPreview:
    """What an operation on the filtered tasks would touch."""

    tasks: int
    with_work: int  # tasks holding regular work: marking golden refuses them
    golden: int


def tasks_preview(project: Project, task_filter: TaskFilter) -> TaskPreview:
    ids = list(tasks_filtered(project, task_filter).values_list("pk", flat=True))
    return TaskPreview(tasks=len(ids), with_work=_with_work(ids).count(),
                       golden=Task.objects.filter(pk__in=ids, is_golden=True).count())


Progress = Callable[[int, int], None]


def _chunks(ids: list[int]) -> Iterator[tuple[int, list[int]]]:
    """`ids` in slices of CHUNK, each with how many ids the slices so far cover."""
    for start in range(0, len(ids), CHUNK):
        part = ids[start:start + CHUNK]
        yield start + len(part), part


def _report(progress: Progress | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)


def _audit_tasks(*, by: User | None, action: AuditAction, project: Project, ids: list[int],
                 task_filter: TaskFilter, **details) -> None:
    audit_record(actor=by, action=action, project_id=project.pk, object_type="annotation.task", object_ids=ids,
                 details={"filter": {k: v for k, v in task_filter.as_fields().items() if v}, **details})


def batch_mark_golden(*, project: Project, task_filter: TaskFilter, by: User | None,
                      progress: Progress | None = None) -> int:
    """Mark the filtered tasks golden; returns how many changed.

    Refused, changing nothing, when any of them holds regular work (a lease or a submission by
    an expert): golden tasks are for calibration and silent controls, whose references must not
    mix with work an expert did as regular work.
    """
    with transaction.atomic():
        project = project_lock(project.pk)
        project_check_writable(project)
        ids = list(tasks_filtered(project, task_filter).values_list("pk", flat=True))
        if not ids:
            raise DomainError("No task matches.", code=ErrorCode.ASSIGN_NO_TASKS)
        changed = 0
        for done, part in _chunks(ids):
            tasks_lock(part)
            busy = _with_work(part).values_list("pk", flat=True).first()
            if busy is not None:
                raise Conflict(f"Task {busy} holds regular work.", code=ErrorCode.BATCH_GOLDEN_HAS_WORK,
                               params={"task": busy})
            changed += Task.objects.filter(pk__in=part, is_golden=False).update(is_golden=True)
            _report(progress, done, len(ids))
        _audit_tasks(by=by, action=AuditAction.BATCH_GOLDEN, project=project, ids=ids, task_filter=task_filter,
                     changed=changed)
    logger.info("batch mark golden", extra={"project_id": project.pk, "by": by.pk if by else None, "tasks": changed})
    return changed


def batch_raise_overlap(*, project: Project, task_filter: TaskFilter, overlap, by: User | None,
                        progress: Progress | None = None) -> int:
    """Raise the panel of the filtered regular tasks to `overlap` (1..9), reopening full or complete
    ones, through the same mechanism as the project's settings; returns how many tasks changed."""
    try:
        value = int(str(overlap).strip())
    except (TypeError, ValueError):
        value = 0
    if not OVERLAP.contains(value):
        params = {"low": OVERLAP.low, "high": OVERLAP.high}
        raise DomainError("Overlap out of range.", code=ErrorCode.BATCH_OVERLAP_RANGE, params=params)
    with transaction.atomic():
        project = project_lock(project.pk)
        project_check_writable(project)
        ids = list(tasks_filtered(project, task_filter).values_list("pk", flat=True))
        if not ids:
            raise DomainError("No task matches.", code=ErrorCode.ASSIGN_NO_TASKS)
        changed = 0
        for done, part in _chunks(ids):
            changed += tasks_overlap_raise(task_ids=part, overlap=value)
            _report(progress, done, len(ids))
        _audit_tasks(by=by, action=AuditAction.BATCH_OVERLAP, project=project, ids=ids, task_filter=task_filter,
                     overlap=value, changed=changed)
    logger.info("batch raise overlap", extra={"project_id": project.pk, "by": by.pk if by else None,
                                              "tasks": changed, "overlap": value})
    return changed


def batch_set_priority(*, project: Project, task_filter: TaskFilter, priority, by: User | None,
                       progress: Progress | None = None) -> int:
    """Give the filtered tasks one priority (`tasks_set_priority`); returns how many changed."""
    with transaction.atomic():
        ids = list(tasks_filtered(project, task_filter).values_list("pk", flat=True))
        if not ids:
            raise DomainError("Choose at least one task.", code=ErrorCode.ASSIGN_NO_TASKS)
        changed = 0
        for done, part in _chunks(ids):
            changed += tasks_set_priority(project=project, task_ids=part, priority=priority, by=by, audited=False)
            _report(progress, done, len(ids))
        _audit_tasks(by=by, action=AuditAction.TASK_PRIORITY, project=project, ids=ids, task_filter=task_filter,
                     priority=int(str(priority).strip()), changed=changed)
    return changed


def batch_assign(*, project: Project, task_filter: TaskFilter, experts: list[User], by: User | None,
                 now: datetime, progress: Progress | None = None) -> int:
    """Lease every filtered task to each of `experts` by hand (`assignments_create_by_hand`), whole
    or not at all; returns how many leases were created."""
    with transaction.atomic():
        ids = list(tasks_filtered(project, task_filter).values_list("pk", flat=True))
        if not ids:
            raise DomainError("Choose at least one task.", code=ErrorCode.ASSIGN_NO_TASKS)
        created: list[int] = []
        for done, part in _chunks(ids):
            result = assignments_create_by_hand(project=project, task_ids=part, experts=experts, by=by, now=now,
                                                audited=False)
            created += [a.pk for a in result.assignments]
            _report(progress, done, len(ids))
        _audit_tasks(by=by, action=AuditAction.ASSIGN_BY_HAND, project=project, ids=ids, task_filter=task_filter,
                     experts=[e.pk for e in experts], assignments=created)
    return len(created)


def experts_of_project(project: Project, user_ids) -> list[User]:
    """The project's experts among `user_ids`, in id order; NotFound when any id is not one of them."""
    try:
        ids = sorted({int(u) for u in user_ids})
    except (TypeError, ValueError):
        raise NotFound("No such expert in this project.") from None
    if not ids:
        raise DomainError("Name at least one expert.", code=ErrorCode.ASSIGN_NO_EXPERTS)
    experts = list(project_experts(project).filter(pk__in=ids).order_by("pk"))
    if len(experts) != len(ids):
        raise NotFound("No such expert in this project.")
    return experts


def batch_experts_pause(*, project: Project, user_ids, pause: bool, by: User, now: datetime) -> int:
    """Pause (no new leases anywhere; open leases stay theirs until handed over) or resume the
    project's experts `user_ids`; returns how many changed. Profiles are locked in user-id order;
    one audit entry names the experts whose state changed."""
    with transaction.atomic():
        experts = experts_of_project(project, user_ids)
        changed: list[int] = []
        for expert in experts:
            if not pause:
                before = ExpertProfile.objects.filter(user=expert).values_list("status", flat=True).first()
                expert_resume(project=project, expert_id=expert.pk, now=now, by=by, audited=False)
                if before == ExpertProfile.Status.PAUSED:
                    changed.append(expert.pk)
                continue
            profile = expert_profile_lock(expert.pk)
            if profile is None:
                raise NotFound("No such expert in this project.")
            if profile.status != ExpertProfile.Status.PAUSED:
                profile.status = ExpertProfile.Status.PAUSED
                profile.status_reason = f"Paused by {by.username} in project {project.pk}."
                profile.status_changed_at = now
                profile.save(update_fields=["status", "status_reason", "status_changed_at"])
                changed.append(expert.pk)
        if changed:
            audit_record(actor=by, action=AuditAction.EXPERT_PAUSE if pause else AuditAction.EXPERT_RESUME,
                         project_id=project.pk, now=now, object_type="experts.user", object_ids=changed)
    logger.info("batch experts pause", extra={"project_id": project.pk, "by": by.pk, "pause": pause,
                                              "changed": len(changed)})
    return len(changed)


# --- Rejecting the submissions of a filtered set ---------------------------------------------------

def submissions_filtered(project: Project, task_filter: TaskFilter, expert_ids=()) -> QuerySet[Assignment]:
    """The submitted regular work on the filtered tasks (of `expert_ids` only, when given), in task order:
    what `batch_reject` rejects. Work on golden tasks (silent controls) is never part of it."""
    qs = Assignment.objects.filter(task__in=tasks_filtered(project, task_filter).values("pk"),
                                   task__is_golden=False, kind=Assignment.Kind.WORK,
                                   status=Assignment.Status.SUBMITTED)
    if expert_ids:
        qs = qs.filter(expert_id__in=list(expert_ids))
    return qs.order_by("task_id", "pk")


@dataclass(frozen=True)
class RejectPreview:
    """What rejecting the filtered set would touch."""

    submissions: int
    tasks: int
    experts: list[tuple[str, int]]  # username and how many of their submissions, by username
    earnings: dict[str, Decimal]  # the earnings reversed, per currency


def rejections_preview(project: Project, task_filter: TaskFilter, expert_ids=()) -> RejectPreview:
    rows = list(submissions_filtered(project, task_filter, expert_ids).values_list("pk", "task_id",
                                                                                   "expert__username"))
    per_expert: dict[str, int] = {}
    for _pk, _task, username in rows:
        per_expert[username] = per_expert.get(username, 0) + 1
    return RejectPreview(submissions=len(rows), tasks=len({task for _pk, task, _u in rows}),
                         experts=sorted(per_expert.items()),
                         earnings=rejection_earnings([pk for pk, _task, _u in rows]))


def batch_reject(*, project: Project, task_filter: TaskFilter, expert_ids=(), reason_code: str, reason: str,
                 by: User, now: datetime, progress: Progress | None = None) -> int:
    """Reject every submitted regular assignment of the filtered tasks (of `expert_ids` only, when
    given) with one reason; returns how many. Each goes through the one rejection of a submission
    (payments' `submission_reject`: out of the consensus, the slot reopened, the earning reversed,
    the expert told); the first refusal undoes the ones before it, so the set is rejected whole
    or not at all. One audit entry names the set, beside each rejection's own entry."""
    rejecter = review_rejecter()
    if rejecter is None:
        raise DomainError("Rejecting needs the payments app.", code=ErrorCode.INVALID)
    text = (reason or "").strip()
    if not text:
        raise DomainError("Give the reason for the rejection; the expert sees it on their statement.",
                          code="reason_required", errors=[{"field": "reason", "message": "required"}])
    if reason_code not in Assignment.RejectReason.values:
        raise DomainError(str(ErrorCode.REJECT_REASON_UNKNOWN.label), code=ErrorCode.REJECT_REASON_UNKNOWN)
    with transaction.atomic():
        project = project_lock(project.pk)
        project_check_writable(project)
        ids = list(submissions_filtered(project, task_filter, expert_ids).values_list("pk", flat=True))
        if not ids:
            raise DomainError("No submission matches.", code=ErrorCode.BATCH_REJECT_NONE)
        for done, part in _chunks(ids):
            for assignment_id in part:
                rejecter(by, assignment_id, reason_code, text, now)
            _report(progress, done, len(ids))
        audit_record(actor=by, action=AuditAction.BATCH_REJECT, project_id=project.pk, now=now,
                     object_type="annotation.assignment", object_ids=ids,
                     details={"filter": {k: v for k, v in task_filter.as_fields().items() if v},
                              "experts": sorted(int(e) for e in expert_ids), "reason_code": reason_code,
                              "reason": text, "rejected": len(ids)})
    logger.info("batch reject", extra={"project_id": project.pk, "by": by.pk, "submissions": len(ids)})
    return len(ids)
