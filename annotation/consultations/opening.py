"""Opening a consultation: by the project's rules when a task's consensus is written, or by hand.

Every opening locks the task first (the annotation lock order), then looks for an unresolved
consultation of the item, so racing openings (two submissions, two experts flagging the
item at once) make one; the partial unique constraint refuses a second one whatever the path.
"""
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import QuerySet
from django.urls import reverse
from psycopg.types.json import Jsonb

from annotation import permissions
from annotation.audit.services import audit_record
from annotation.lock_objects import task_lock
from annotation.models import Assignment, AuditAction, Consultation, ConsultationParticipant, ItemConsensus, Label, Task
from annotation.projects.rules import project_check_writable
from annotation.selectors import assignment_get_for_expert
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, NotFound
from core.prepared import Prepared
from core.sql_insert import insert_parts, insert_rows, saved_as
from experts.models import User
from experts.notifications import notification_send, notifications_send_many
from rubrics.models import RubricItem

Zone = ItemConsensus.Zone
Trigger = Consultation.Trigger
REASON_MAX = 1000
UNRESOLVED = (Consultation.Status.OPEN, Consultation.Status.REVEALED)


@dataclass(frozen=True)
class OpenResult:
    consultation: Consultation
    created: bool  # False: the item already had an unresolved consultation, returned unchanged


def reason_clean(text: object, *, required: bool, limit: int = REASON_MAX) -> str:
    """A stripped reason, or a DomainError (code "consultation_reason") when missing or too long."""
    clean = text.strip() if isinstance(text, str) else ""
    if (required and not clean) or len(clean) > limit:
        raise DomainError("Give a short reason.", code=ErrorCode.CONSULTATION_REASON, params={"max": limit},
                          errors=[{"field": "reason", "code": ErrorCode.CONSULTATION_REASON,
                                   "params": {"max": limit}, "message": "required"}])
    return clean


def expert_may_still_judge(*, user: User, question_id: int) -> bool:
    """Whether `user` holds, or may still be given, a task of the question (then they must not see its case).

    Held: a live lease on any task of the question. Eligible: an annotator of the project and a
    regular task of the question still open to new slots that they never held.
    """
    if not user.is_expert:
        return False
    if Assignment.objects.filter(expert=user, status=Assignment.Status.LEASED,
                                 task__response__question_id=question_id).exists():
        return True
    open_tasks = (Task.objects.filter(response__question_id=question_id, is_golden=False,
                                      status__in=[Task.Status.OPEN, Task.Status.FULL])
                  .exclude(assignments__expert=user).select_related("project"))
    task = open_tasks.first()
    return task is not None and permissions.can_annotate(user, task.project)


def _panel_rows_query(*, task_id: int) -> QuerySet[Any]:
    return (Label.objects.counted().filter(task_id=task_id, assignment__task_id=task_id,
                                           assignment__status=Assignment.Status.SUBMITTED)
            .order_by("assignment__submitted_at", "assignment_id")
            .values_list("rubric_item_id", "assignment__expert_id"))


# Compiled once per process (core.prepared): a submission that opens consultations reads it.
_PANEL_ROWS: Prepared[Any] = Prepared(_panel_rows_query)


def _panels(task: Task, rubric_item_ids: list[int]) -> dict[int, list[int]]:
    """{item id: the ids of the experts whose counted, submitted labels are on the item, in submission order}."""
    panels: dict[int, list[int]] = {i: [] for i in rubric_item_ids}
    for item_id, expert_id in _PANEL_ROWS.tuples(task_id=task.pk):
        if item_id in panels:
            panels[item_id].append(expert_id)
    return panels


def _vote_notice(consultation: Consultation, item: RubricItem) -> tuple[dict, str]:
    """The params and link of the notification asking a panel to vote on `consultation`."""
    return ({"item": item.item_key, "question": item.question_ref, "project": consultation.project.name,
             "deadline": consultation.deadline_at.strftime("%Y-%m-%d %H:%M UTC")},
            reverse("consultation_detail", args=[consultation.pk]))


def consultation_notify_vote(*, consultation: Consultation, users: list[User], now: datetime) -> None:
    """Ask `users` to cast their blind vote (kind `consultation_vote`)."""
    params, link = _vote_notice(consultation, consultation.rubric_item)
    notification_send(users=users, kind="consultation_vote", now=now, link=link, params=params)


def _create_many(*, task: Task, items: list[tuple[RubricItem, str]], by: User | None, reason: str,
                 now: datetime, panels: dict[int, list[int]] | None = None) -> list[Consultation]:
    """Open a consultation on each (item, trigger) of the task, with its panel, and ask the panels to vote:
    a fixed number of statements however many items (a submission may open several): on PostgreSQL one for
    the consultations and their panels, one for the notifications, built from the models' fields
    (`core.sql_insert`: the ORM's bulk_create spent more CPU preparing these rows than the database storing them)."""
    if not items:
        return []
    project = task.project
    deadline = now + timedelta(hours=project.consult_deadline_h)
    consultations = [Consultation(project=project, task=task, rubric_item=item, trigger=trigger, opened_by=by,
                                  opening_reason=reason, opened_at=now, deadline_at=deadline)
                     for item, trigger in items]
    if panels is None or any(item.pk not in panels for item, _trigger in items):
        panels = _panels(task, [item.pk for item, _trigger in items])
    if connection.vendor == "postgresql":
        _insert_with_panels(consultations, panels, now)
    else:
        insert_rows(consultations, returning=True)
        insert_rows([ConsultationParticipant(consultation=c, user_id=user_id,
                                             role=ConsultationParticipant.Role.PANEL, added_at=now)
                     for c in consultations for user_id in panels[c.rubric_item_id]])
    notices = [(panels[c.rubric_item_id], *_vote_notice(c, item)) for c, (item, _t) in zip(consultations, items,
                                                                                            strict=True)]
    notifications_send_many(kind="consultation_vote", now=now, batch=notices)
    return consultations


# The consultations and their panels in one statement on PostgreSQL: the panel rows come as one JSON
# parameter and join the new consultations by item (one consultation an item per call).
_WITH_PANELS_SQL = """WITH c AS (INSERT INTO {consultation} ({columns}) VALUES {rows} RETURNING id, rubric_item_id),
p AS (INSERT INTO {participant} ({panel_columns}) SELECT {panel_values}
      FROM c JOIN jsonb_to_recordset(%s) AS x(item bigint, user_id bigint) ON x.item = c.rubric_item_id)
SELECT id, rubric_item_id FROM c"""


def _insert_with_panels(consultations: list[Consultation], panels: dict[int, list[int]], now: datetime) -> None:
    """Write `consultations` (their ids set on them) and a panel participant for each voter of their item."""
    rows, params = [], []
    for consultation in consultations:
        columns, values, row_params = insert_parts(consultation)
        rows.append(f"({', '.join(values)})")
        params += row_params
    template = ConsultationParticipant(role=ConsultationParticipant.Role.PANEL, added_at=now)
    panel_columns, panel_values, panel_params = insert_parts(
        template, computed={"consultation_id": "c.id", "user_id": "x.user_id"})
    sql = _WITH_PANELS_SQL.format(
        consultation=Consultation._meta.db_table, columns=", ".join(columns), rows=", ".join(rows),
        participant=ConsultationParticipant._meta.db_table, panel_columns=", ".join(panel_columns),
        panel_values=", ".join(panel_values))
    voters = Jsonb([{"item": c.rubric_item_id, "user_id": user_id} for c in consultations
                    for user_id in panels[c.rubric_item_id]])
    with connection.cursor() as cursor:
        bound: list[Any] = [*params, *panel_params, voters]
        cursor.execute(sql, bound)
        ids = {item_id: pk for pk, item_id in cursor.fetchall()}
    for consultation in consultations:
        saved_as(consultation, ids[consultation.rubric_item_id])


def _create(*, task: Task, item: RubricItem, trigger: str, by: User | None, reason: str,
            now: datetime) -> Consultation:
    return _create_many(task=task, items=[(item, trigger)], by=by, reason=reason, now=now)[0]


def _open_locked(*, task: Task, item: RubricItem, trigger: str, by: User | None, reason: str,
                 now: datetime) -> OpenResult:
    existing = Consultation.objects.filter(task=task, rubric_item=item, status__in=UNRESOLVED).first()
    if existing is not None:
        return OpenResult(consultation=existing, created=False)
    return OpenResult(consultation=_create(task=task, item=item, trigger=trigger, by=by, reason=reason, now=now),
                      created=True)


def consultations_open_auto(*, task: Task, records: list[ItemConsensus], now: datetime,
                            items: dict[int, RubricItem] | None = None) -> list[Consultation]:
    """Open the consultations the project's rules ask for on a complete task, in the caller's transaction.

    `records` are the task's consensus as `consensus_compute` just wrote it: each carries its item's
    voters (`panel`) and whether the item ever had a consultation of the task (`consulted`). `items`
    ({id: item}) are rubric items the caller has read already (a submission's, of the task's version);
    the others the rules need are read here.

    The caller holds the task's lock (a submission). Rules: a tie left after the extra experts
    (no slot was added, so the task is complete); a split on an item whose |score| reaches the
    threshold; each split or tied item of a task whose share of such items is above the
    percentage. An item that ever had a consultation of this task is not opened again by a rule.
    """
    project = task.project
    if task.is_golden or task.status != Task.Status.COMPLETE or not records:
        return []
    undecided = [r for r in records if r.provenance != ItemConsensus.Provenance.ADJUDICATED]
    wanted: dict[int, str] = {}
    if project.consult_on_unbroken_tie:
        wanted |= {r.rubric_item_id: Trigger.TIE_UNBROKEN for r in undecided
                   if r.zone == Zone.TIED and r.majority is None}
    known = dict(items or {})
    if project.consult_on_score_split:
        split = [r.rubric_item_id for r in undecided if r.zone == Zone.SPLIT]
        _items_read(known, split)
        for item_id in split:
            score = known[item_id].score if item_id in known else None
            if score is not None and abs(score) >= project.consult_split_min_score:
                wanted.setdefault(item_id, Trigger.SCORE_SPLIT)
    if project.consult_on_many_splits:
        disputed = [r.rubric_item_id for r in undecided if r.zone in (Zone.SPLIT, Zone.TIED)]
        if (100 * len(disputed)) // len(records) > project.consult_split_share_pct:
            for item_id in disputed:
                wanted.setdefault(item_id, Trigger.MANY_SPLITS)
    if not wanted:
        return []
    seen = {r.rubric_item_id for r in records if r.consulted}
    opening = [i for i in wanted if i not in seen]
    _items_read(known, opening)
    opening = sorted(i for i in opening if i in known)
    if not opening:
        return []
    # The panels come with the records that `consensus_compute` just wrote (one read less).
    panels = {r.rubric_item_id: r.panel for r in records if r.panel is not None}
    return _create_many(task=task, items=[(known[i], wanted[i]) for i in opening], by=None, reason="", now=now,
                        panels=panels)


def _items_read(known: dict[int, RubricItem], ids: list[int]) -> None:
    """Add to `known` the items of `ids` it lacks (one query, none when it has them all)."""
    missing = [i for i in ids if i not in known]
    if missing:
        known.update(RubricItem.objects.in_bulk(missing))


def _item_of_task(task: Task, rubric_item_id: object) -> RubricItem:
    try:
        item = RubricItem.objects.get(pk=int(str(rubric_item_id)), version_id=task.rubric_version_id)
    except (RubricItem.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such rubric item.") from None
    if not Label.objects.counted().filter(task=task, rubric_item=item,
                                          assignment__status=Assignment.Status.SUBMITTED).exists():
        raise Conflict("This task has no votes on that item yet.", code=ErrorCode.CONSULTATION_ITEM)
    return item


def consultation_open_by_pm(*, pm: User, task_id: object, rubric_item_id: object, reason: object,
                            now: datetime, project_id: int | None = None) -> OpenResult:
    """A PM (or admin) opens a consultation on any item of a task of a project they manage.

    `project_id` narrows the task to that project (the page's). Returns the unresolved
    consultation of the item unchanged when there is one already.
    """
    clean = reason_clean(reason, required=False)
    tasks = Task.objects.select_related("project").filter(is_golden=False)
    if project_id is not None:
        tasks = tasks.filter(project_id=project_id)
    try:
        task = tasks.get(pk=int(str(task_id)))
    except (Task.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such task.") from None
    if not permissions.can_manage(pm, task.project):
        raise NotFound("No such task.")
    project_check_writable(task.project)
    with transaction.atomic():
        task = task_lock(task.pk)
        item = _item_of_task(task, rubric_item_id)
        opened = _open_locked(task=task, item=item, trigger=Trigger.PM, by=pm, reason=clean, now=now)
        if opened.created:
            audit_record(actor=pm, action=AuditAction.CONSULTATION_OPEN, project_id=task.project_id,
                         objects=[opened.consultation], now=now,
                         details={"task": task.pk, "item_key": item.item_key, "reason": clean})
        return opened


def consultation_open_by_expert(*, expert: User, assignment_id: object, rubric_item_id: object, reason: object,
                                now: datetime) -> OpenResult:
    """An expert asks for a consultation on an item of a task they submitted ("I think this item is ambiguous").

    The reason is required. Returns the unresolved consultation of the item unchanged when there
    is one already (the expert is a panel participant of it either way).
    """
    assignment = assignment_get_for_expert(expert, assignment_id)
    if assignment.status != Assignment.Status.SUBMITTED or assignment.kind != Assignment.Kind.WORK \
            or assignment.task.is_golden:
        raise Conflict("Only an item of a task you submitted.", code=ErrorCode.CONSULTATION_NOT_SUBMITTED)
    clean = reason_clean(reason, required=True)
    project_check_writable(assignment.task.project)
    with transaction.atomic():
        task = task_lock(assignment.task_id)
        item = _item_of_task(task, rubric_item_id)
        return _open_locked(task=task, item=item, trigger=Trigger.EXPERT, by=expert, reason=clean, now=now)
