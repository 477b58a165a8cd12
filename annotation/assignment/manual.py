"""Assignment by a PM, besides the random pull: by hand for urgent work, priority, hand-over.

Every rule of the pull still holds (DESIGN step 4): a task reaches at most `overlap`
distinct experts (the database's unique constraints, check constraint and slot trigger
refuse anything else, whoever writes), a named expert must be eligible exactly as for a
claim (a member, active, calibrated, under their lease limit and weekly capacity, of a tier
that takes the task's difficulty, never held the task), and the task must be an open
regular task of the current rubric version. A refusal names the expert and the task and
writes nothing: a set is assigned whole or not at all.

Locks follow `annotation.lock_objects`: the tasks in ascending pk (waiting, unlike the
claim's SKIP LOCKED draw, so a claim racing a hand assignment either took the slot first,
and the hand assignment sees it, or finds the task locked and draws another), then the
assignments of those tasks. The lease limit and weekly capacity are counted, as in the
claim, without a lock on the expert.
"""
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction

from annotation import permissions
from annotation.assignment.selectors import difficulties_for
from annotation.assignment.services import _slot_return, expert_check_room, free_slot
from annotation.audit.services import audit_record
from annotation.calibration.services import calibration_check
from annotation.lock_objects import assignment_lock, expert_profile_lock, project_lock, tasks_lock
from annotation.models import Assignment, AuditAction, Draft, Project, Task
from annotation.models.work import PRIORITY_MAX
from annotation.projects.rules import project_check_leasing, project_check_writable
from annotation.selectors import rubric_version_current
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, Forbidden, NotFound
from experts.models import ExpertProfile, User

logger = logging.getLogger(__name__)

# A filtered set larger than this is refused rather than locked row by row in one request.
SET_MAX = 5000


def _name(expert: User) -> str:
    return expert.username


def expert_check_eligible(*, project: Project, expert: User, now: datetime, adding: int = 1) -> ExpertProfile:
    """The expert's profile when they may take `adding` more leases in `project`; else a DomainError
    whose message names them (assign_not_member, assign_no_profile, assign_paused, assign_not_calibrated,
    assign_lease_limit, assign_weekly_capacity)."""
    name = _name(expert)
    if not expert.is_expert or not permissions.can_annotate(expert, project):
        raise Forbidden(f"{name} is not an annotator in this project.", code=ErrorCode.ASSIGN_NOT_MEMBER,
                        params={"name": name})
    profile = ExpertProfile.objects.filter(user=expert).first()
    if profile is None:
        raise Forbidden(f"{name} has no expert profile.", code=ErrorCode.ASSIGN_NO_PROFILE, params={"name": name})
    if not profile.is_active:
        raise Conflict(f"{name} is paused.", code=ErrorCode.ASSIGN_PAUSED, params={"name": name})
    try:
        calibration_check(project=project, expert=expert)
    except DomainError:
        raise Conflict(f"{name} is not calibrated.", code=ErrorCode.ASSIGN_NOT_CALIBRATED,
                       params={"name": name}) from None
    expert_check_room(profile=profile, expert=expert, now=now, adding=adding, name=name)
    return profile


def _task_refusal(*, task: Task, expert: User, profile: ExpertProfile, version_id: int | None,
                  held: set[tuple[int, int]]) -> DomainError | None:
    """Why `expert` may not take `task` (the task row locked), or None."""
    params = {"name": _name(expert), "task": task.pk}
    if task.is_golden or task.rubric_version_id != version_id or task.status == Task.Status.COMPLETE \
            or task.status == Task.Status.SUPERSEDED:
        return Conflict(f"Task {task.pk} takes no assignment.", code=ErrorCode.ASSIGN_TASK_NOT_OPEN, params=params)
    if (task.pk, expert.pk) in held:
        return Conflict(f"{params['name']} already held task {task.pk}.", code=ErrorCode.ASSIGN_HELD_BEFORE,
                        params=params)
    if task.response.question.difficulty not in difficulties_for(project=task.project, tier=profile.tier):
        return Conflict(f"{params['name']}'s tier does not take task {task.pk}.", code=ErrorCode.ASSIGN_TIER,
                        params=params)
    if task.live_count >= task.overlap:
        return Conflict(f"Task {task.pk} has no free slot.", code=ErrorCode.ASSIGN_TASK_FULL, params=params)
    return None


def _lease_locked(*, task: Task, expert: User, now: datetime) -> Assignment:
    """A new lease of the locked `task` for `expert`, the task's counters kept in step."""
    assignment = Assignment.objects.create(
        task=task, expert=expert, slot=free_slot(task), status=Assignment.Status.LEASED, leased_at=now,
        expires_at=now + timedelta(seconds=task.project.lease_timeout_s))
    task.live_count += 1
    if task.live_count >= task.overlap:
        task.status = Task.Status.FULL
    task.save(update_fields=["live_count", "status"])
    return assignment


def _tasks_of_project(*, project: Project, task_ids: list[int]) -> list[Task]:
    """The project's tasks among `task_ids`, locked in pk order; an id of another project is NotFound."""
    ids = sorted({int(t) for t in task_ids})
    if not ids:
        raise DomainError("Choose at least one task.", code=ErrorCode.ASSIGN_NO_TASKS)
    if len(ids) > SET_MAX:
        raise DomainError(f"At most {SET_MAX} tasks at once.", code=ErrorCode.INVALID)
    if Task.objects.filter(pk__in=ids, project=project).count() != len(ids):
        raise NotFound("No such task.")
    tasks_lock(ids)
    return list(Task.objects.filter(pk__in=ids).select_related("response__question", "project").order_by("pk"))


@dataclass(frozen=True)
class ByHand:
    """The leases an assignment by hand created, in task then expert order."""

    assignments: list[Assignment] = field(default_factory=list)


def assignments_create_by_hand(*, project: Project, task_ids: list[int], experts: list[User], by: User | None,
                               now: datetime, audited: bool = True) -> ByHand:
    """Lease each of `task_ids` (tasks of `project`) to each of `experts`, or nothing at all.

    For urgent work: the leases run the project's lease timeout from `now`, and the expert's
    "next task" returns them first. Raises DomainError naming the first expert or task that
    breaks a rule (see the module docstring); NotFound for a task of another project.
    The audit log gets one entry (unless `audited` is False: a batch writes its own).
    """
    experts = list({e.pk: e for e in experts}.values())
    if not experts:
        raise DomainError("Name at least one expert.", code=ErrorCode.ASSIGN_NO_EXPERTS)
    project_check_leasing(project)
    with transaction.atomic():
        tasks = _tasks_of_project(project=project, task_ids=task_ids)
        # After the tasks, the experts' profiles in pk order (the lock order): their lease
        # limit and capacity are counted while no claim of theirs can slip in between.
        for expert in sorted(experts, key=lambda e: e.pk):
            expert_profile_lock(expert.pk)
        profiles = {e.pk: expert_check_eligible(project=project, expert=e, now=now, adding=len(tasks))
                    for e in experts}
        version = rubric_version_current(project)
        held = set(Assignment.objects.filter(task__in=tasks, expert__in=experts).values_list("task_id", "expert_id"))
        created: list[Assignment] = []
        for task in tasks:
            for expert in experts:
                refusal = _task_refusal(task=task, expert=expert, profile=profiles[expert.pk],
                                        version_id=version.pk if version else None, held=held)
                if refusal is not None:
                    raise refusal
                created.append(_lease_locked(task=task, expert=expert, now=now))
        if audited:
            audit_record(actor=by, action=AuditAction.ASSIGN_BY_HAND, project_id=project.pk, now=now,
                         object_type="annotation.task", object_ids=[t.pk for t in tasks],
                         details={"experts": [e.pk for e in experts], "assignments": [a.pk for a in created]})
    logger.info("assigned by hand", extra={"project_id": project.pk, "by": by.pk if by else None,
                                           "tasks": len(tasks), "experts": len(experts)})
    return ByHand(assignments=created)


def tasks_set_priority(*, project: Project, task_ids: list[int], priority, by: User | None,
                       audited: bool = True) -> int:
    """Give the project's tasks `task_ids` the priority (0 to PRIORITY_MAX; higher is drawn first).

    Returns how many tasks changed. One statement: all of them or none; one audit entry when any
    changed (unless `audited` is False: a batch writes its own).
    """
    try:
        value = int(str(priority).strip())
    except (TypeError, ValueError):
        value = -1
    if not 0 <= value <= PRIORITY_MAX:
        params = {"low": 0, "high": PRIORITY_MAX}
        raise DomainError("Priority out of range.", code=ErrorCode.PRIORITY_RANGE, params=params,
                          errors=[{"field": "priority", "message": "out of range", "code": ErrorCode.PRIORITY_RANGE,
                                   "params": params}])
    project_check_writable(project)
    ids = sorted({int(t) for t in task_ids})
    if not ids:
        raise DomainError("Choose at least one task.", code=ErrorCode.ASSIGN_NO_TASKS)
    with transaction.atomic():
        # The project row first (the lock order): two PMs setting priorities keep its flag right.
        locked = project_lock(project.pk)
        if Task.objects.filter(pk__in=ids, project=project).count() != len(ids):
            raise NotFound("No such task.")
        changed = Task.objects.filter(pk__in=ids, project=project).exclude(priority=value).update(priority=value)
        flag = Task.objects.filter(project=project, priority__gt=0).exists()
        if flag != locked.has_priorities:
            Project.objects.filter(pk=project.pk).update(has_priorities=flag)
        project.has_priorities = flag
        if audited and changed:
            audit_record(actor=by, action=AuditAction.TASK_PRIORITY, project_id=project.pk,
                         object_type="annotation.task", object_ids=ids,
                         details={"priority": value, "changed": changed})
    logger.info("task priority set", extra={"project_id": project.pk, "by": by.pk if by else None,
                                            "tasks": changed, "priority": value})
    return changed


@dataclass(frozen=True)
class HandOver:
    """What a hand-over did: leases moved (with their drafts) and leases returned to the pool."""

    moved: list[Assignment] = field(default_factory=list)
    returned: list[Assignment] = field(default_factory=list)


def _open_leases(*, project: Project, expert: User, now: datetime):
    return (Assignment.objects.filter(expert=expert, task__project=project, kind=Assignment.Kind.WORK,
                                      status=Assignment.Status.LEASED, expires_at__gt=now).order_by("task_id"))


def hand_over_preview(*, project: Project, expert: User, now: datetime) -> int:
    """How many open work leases `expert` holds in `project` (what a hand-over would move)."""
    return _open_leases(project=project, expert=expert, now=now).count()


def leases_hand_over(*, project: Project, expert: User, to: list[User], by: User | None, now: datetime) -> HandOver:
    """Move `expert`'s open work leases in `project` to the experts `to`, in one transaction.

    Each lease, in task order, goes to the first of `to` (taken in turn, so the leases spread)
    who may take that task under every rule of a claim; the new lease runs a full timeout and
    gets a copy of the draft (marks and notes). A lease nobody in `to` may take returns to the
    pool. Either way the old lease ends as "released" (never revived for the old expert, whose
    draft stays). Raises DomainError when `to` is empty or names `expert`. One audit entry names
    the old leases, the experts and what moved where.
    """
    targets = [t for t in {u.pk: u for u in to}.values()]
    if not targets:
        raise DomainError("Name at least one expert.", code=ErrorCode.ASSIGN_NO_EXPERTS)
    if any(t.pk == expert.pk for t in targets):
        raise DomainError("An expert cannot hand work over to themselves.", code=ErrorCode.INVALID)
    project_check_writable(project)
    moved: list[Assignment] = []
    returned: list[Assignment] = []
    with transaction.atomic():
        lease_ids = list(_open_leases(project=project, expert=expert, now=now).values_list("pk", "task_id"))
        tasks = {t.pk: t for t in
                 (Task.objects.filter(pk__in=tasks_lock([task_id for _pk, task_id in lease_ids]))
                  .select_related("response__question", "project"))}
        version = rubric_version_current(project)
        held = set(Assignment.objects.filter(task__in=list(tasks), expert__in=targets)
                   .values_list("task_id", "expert_id"))
        taken = {t.pk: 0 for t in targets}
        turn = 0
        for lease_id, task_id in lease_ids:
            task = tasks[task_id]
            old = assignment_lock(lease_id)
            if old.status != Assignment.Status.LEASED:
                continue
            Assignment.objects.filter(pk=old.pk).update(status=Assignment.Status.RELEASED)
            _slot_return(task)
            new = None
            for offset in range(len(targets)):
                target = targets[(turn + offset) % len(targets)]
                try:
                    profile = expert_check_eligible(project=project, expert=target, now=now)
                except DomainError:
                    continue
                if _task_refusal(task=task, expert=target, profile=profile,
                                 version_id=version.pk if version else None, held=held) is None:
                    new = _lease_locked(task=task, expert=target, now=now)
                    held.add((task.pk, target.pk))
                    taken[target.pk] += 1
                    turn = (turn + offset + 1) % len(targets)
                    break
            if new is None:
                returned.append(old)
                continue
            draft = Draft.objects.filter(assignment_id=old.pk).first()
            if draft is not None:
                Draft.objects.create(assignment=new, labels=dict(draft.labels), notes=dict(draft.notes))
            moved.append(new)
        if moved or returned:
            audit_record(actor=by, action=AuditAction.LEASES_HAND_OVER, project_id=project.pk, now=now,
                         object_type="annotation.assignment", object_ids=[pk for pk, _task in lease_ids],
                         details={"from": expert.pk, "to": [t.pk for t in targets],
                                  "moved": [a.pk for a in moved], "returned": [a.pk for a in returned]})
    logger.info("leases handed over", extra={"project_id": project.pk, "from": expert.pk, "by": by.pk if by else None,
                                             "moved": len(moved), "returned": len(returned)})
    return HandOver(moved=moved, returned=returned)


def experts_named(names: list[str]) -> list[User]:
    """The active accounts with these usernames, in the given order; an unknown name is refused
    (user_unknown) before anything is written. Whether each may take work is the services' check."""
    wanted = [str(n).strip() for n in names if str(n).strip()]
    found = {u.username: u for u in User.objects.filter(username__in=wanted, is_active=True)}
    for name in wanted:
        if name not in found:
            raise DomainError(f"No account {name}.", code=ErrorCode.USER_UNKNOWN, params={"name": name})
    return [found[n] for n in dict.fromkeys(wanted)]
