"""Autosaved drafts and the atomic, idempotent submission of a task's labels."""
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from psycopg.types.json import Jsonb

from annotation.assignment.services import assignment_revive, lease_extend
from annotation.consultations.opening import consultations_open_auto
from annotation.labels import labels_clean
from annotation.labels import notes_clean as _clean_notes
from annotation.lock_objects import assignment_lock, task_lock
from annotation.models import Assignment, Draft, ItemConsensus, Label, Task, WebhookEndpoint, WebhookEvent
from annotation.projects.rules import project_check_writable
from annotation.quality.control import control_record
from annotation.quality.peer_tally import peer_tally_refresh
from annotation.selectors import assignment_get_for_expert, rubric_items_for_task
from annotation.submission.consensus import consensus_compute, tie_slot_add
from annotation.webhooks.services import webhook_emit_many
from core.after_commit import follow_ups_batched, task_send_on_commit
from core.errors import Conflict
from core.sql_insert import insert_rows
from experts.models import ExpertProfile, User

REJECTED_TEXT = "This submission was rejected; the task went to another expert."
LEASE_RELEASED_TEXT = ("This task was given back (released, skipped, or you left the project); your draft is "
                       "kept but cannot be submitted.")


@dataclass(frozen=True)
class SubmitResult:
    assignment: Assignment
    created: bool  # False when the same submission had already been recorded
    task_complete: bool


def draft_save(*, expert: User, assignment_id, labels, notes=None, now: datetime) -> Draft:
    """Autosave partial labels of a leased assignment; it also keeps the lease alive."""
    assignment = assignment_get_for_expert(expert, assignment_id)
    project_check_writable(assignment.task.project)
    if assignment.status == Assignment.Status.SUBMITTED:
        raise Conflict("This task is already submitted.", code="already_submitted")
    if assignment.status == Assignment.Status.RELEASED:
        raise Conflict(LEASE_RELEASED_TEXT, code="lease_released")
    if assignment.status == Assignment.Status.REJECTED:
        raise Conflict(REJECTED_TEXT, code="submission_rejected")
    keys = [i.item_key for i in rubric_items_for_task(assignment.task)]
    clean = labels_clean(labels or {}, keys, partial=True)
    clean_notes = _clean_notes(notes, keys)
    draft, _ = Draft.objects.update_or_create(assignment=assignment,
                                              defaults={"labels": clean, "notes": clean_notes})
    lease_extend(assignment=assignment, now=now)
    return draft


def _current_tier(expert: User) -> str:
    # The expert's profile comes with the assignment (`assignment_get_for_expert`) when it has one.
    try:
        return expert.expert_profile.tier
    except ExpertProfile.DoesNotExist:
        return ""


def labels_submit(*, expert: User, assignment_id, labels, notes=None, now: datetime) -> SubmitResult:
    """Record all labels of the assignment at once, or nothing.

    Sending the same labels again returns the recorded submission unchanged; sending
    different labels for a submitted assignment is a conflict. The task's consensus is
    written in the same transaction when this is its last submission.
    """
    assignment = assignment_get_for_expert(expert, assignment_id)
    tier = _current_tier(assignment.expert)
    # A paused project still takes the submission of a lease it handed out; a closed one is read-only.
    project_check_writable(assignment.task.project)
    items = rubric_items_for_task(assignment.task)
    keys = [i.item_key for i in items]
    clean = labels_clean(labels, keys, partial=False)
    clean_notes = _clean_notes(notes, keys)
    # The follow-up work below goes out as one message, run once by the worker (core.after_commit).
    with transaction.atomic(), follow_ups_batched():
        task = task_lock(assignment.task_id)
        # Read with the assignment; the lock read the task alone.
        task.project, task.response = assignment.task.project, assignment.task.response
        if items and items[0].version_id != task.rubric_version_id:
            # A publish carried the task to a new version after the items were read (same keys, same
            # criteria: annotation.rubric_editing.carryover); label the items of the version it is on now.
            items = rubric_items_for_task(task)
        by_key = {i.item_key: i for i in items}
        rows = [(by_key[k].pk, v, clean_notes.get(k, "")) for k, v in clean.items()]
        # The usual case in one statement: the lease becomes a submission with its labels (see _mark_submitted).
        marked = _mark_submitted(task=task, assignment_id=assignment.pk, tier=tier, now=now, labels=rows)
        if marked is None:
            assignment = assignment_lock(assignment.pk)
            if assignment.status == Assignment.Status.SUBMITTED:
                recorded = dict(Label.objects.filter(assignment=assignment)
                                .values_list("rubric_item__item_key", "value"))
                if recorded != clean:
                    raise Conflict("This task was already submitted with other labels; a submission is final.",
                                   code="already_submitted")
                return SubmitResult(assignment=assignment, created=False, task_complete=_reported_complete(task))
            if assignment.status == Assignment.Status.RELEASED:
                raise Conflict(LEASE_RELEASED_TEXT, code="lease_released")
            if assignment.status == Assignment.Status.REJECTED:
                raise Conflict(REJECTED_TEXT, code="submission_rejected")
            if assignment.status == Assignment.Status.EXPIRED:
                # A late submission is accepted while the task still has room (an overdue
                # lease that was not swept yet still holds its slot).
                assignment_revive(assignment=assignment, task=task, now=now)
            marked = _mark_submitted(task=task, assignment_id=assignment.pk, tier=tier, now=now, labels=rows)
            if marked is None:
                raise Conflict(LEASE_RELEASED_TEXT, code="lease_released")
        has_consensus, endpoints_active = marked
        assignment.status = Assignment.Status.SUBMITTED
        assignment.submitted_at = now
        assignment.tier_at_submission = tier
        complete = task.status == Task.Status.COMPLETE
        events: list[tuple[WebhookEvent, dict]] = []  # webhook events of this submission, sent together
        if not task.is_golden:
            # Everyone on the task has one more peer now (their tier rules read it).
            peer_tally_refresh(task_id=task.pk)
        if task.is_golden:
            # A control task: scored against the golden references; its consensus is never written.
            control_record(assignment=assignment, task=task, values={by_key[k].pk: v for k, v in clean.items()},
                           now=now)
        elif complete or has_consensus:
            # Also a task reopened by a rejection keeps its consensus current with each label.
            records = consensus_compute(task=task, now=now, first=not has_consensus)
            # A tied item asks for one more expert (within the project's cap); the consensus is
            # written again when that submission lands.
            if complete and not tie_slot_add(task=task, records=records):
                # Final for now: the project's rules may ask the experts to consult on an item.
                consultations_open_auto(task=task, records=records, now=now,
                                        items={i.pk: i for i in by_key.values()})
                events.append((WebhookEvent.CONSENSUS_READY,
                               {"task_id": task.pk, "rubric_version_id": task.rubric_version_id,
                                "items": len(records), "tied": sum(r.zone == "tied" for r in records)}))
            # New consensus changes the quality figures: ask for a (debounced) recompute.
            task_send_on_commit("annotation.agreement_report_request", project_id=task.project_id)
        if complete and not task.is_golden:
            events.append((WebhookEvent.TASK_COMPLETED,
                              {"task_id": task.pk, "response_id": task.response_id,
                               "submissions": task.submitted_count, "completed_at": now.isoformat()}))
        if endpoints_active is not False:  # the statement above found no active endpoint: nothing to read
            webhook_emit_many(project_id=task.project_id, events=events, now=now)
        # Payments listens by task name; it decides what earns (calibration does not). Control
        # tasks earn like any task: an unpaid task would tell the expert it was a control.
        task_send_on_commit("payments.ledger_post_earning", assignment_id=assignment.pk)
        task_send_on_commit("annotation.expert_evaluate", user_id=expert.pk)
        # The review rules (too fast, straight-lining, repeated notes) run after the commit.
        task_send_on_commit("annotation.review_flags_check", assignment_id=assignment.pk)
    return SubmitResult(assignment=assignment, created=True, task_complete=_reported_complete(task))


# One statement for the usual submission on PostgreSQL: the leased assignment becomes submitted, its
# draft goes, its labels are written (from one JSON parameter: no model instances, no statement of their
# own; three array parameters cost psycopg half as much CPU again to adapt), the task counts one more
# submission (complete at its overlap), and whether the task already has consensus rows (a task reopened
# by a rejection) comes back. The caller holds the task's lock, and every writer of consensus rows holds
# it too, so this statement's snapshot (taken after the lock was granted) sees them all. A submission that
# completes its task also learns whether the project has an active webhook endpoint (its events go to
# them): usually none, and then they are not read.
_MARK_SUBMITTED_SQL = """
WITH lease AS (
    UPDATE {assignment} SET status = %(submitted)s, submitted_at = %(now)s, tier_at_submission = %(tier)s
    WHERE id = %(assignment_id)s AND status = %(leased)s RETURNING id
), draft AS (
    DELETE FROM {draft} WHERE assignment_id IN (SELECT id FROM lease)
), labels AS (
    INSERT INTO {label} (assignment_id, task_id, rubric_item_id, value, note, created_at)
    SELECT lease.id, %(task_id)s, x.item, x.value, x.note, %(now)s
    FROM lease, jsonb_to_recordset(%(labels)s) AS x(item bigint, value smallint, note text)
)
UPDATE {task} SET submitted_count = submitted_count + 1,
    status = CASE WHEN submitted_count + 1 >= overlap THEN %(complete)s ELSE status END,
    completed_at = CASE WHEN submitted_count + 1 >= overlap THEN %(now)s ELSE completed_at END
WHERE id = %(task_id)s AND EXISTS (SELECT 1 FROM lease)
RETURNING submitted_count, status, completed_at,
    EXISTS (SELECT 1 FROM {consensus} c WHERE c.task_id = %(task_id)s),
    CASE WHEN status = %(complete)s
        THEN EXISTS (SELECT 1 FROM {endpoint} w WHERE w.project_id = {task}.project_id AND w.is_active) END
"""


def _mark_submitted(*, task: Task, assignment_id: int, tier: str, now: datetime,
                    labels: list[tuple[int, int, str]]) -> tuple[bool, bool | None] | None:
    """Turn the leased assignment into a submission with its `labels` ((rubric item id, value, note)) and
    count it on the (locked) task.

    Returns whether the task has consensus rows already and, when the task is complete now, whether the
    project has an active webhook endpoint (None: not asked, or not known); or None (nothing written)
    when the assignment is not leased: the caller then reads it and answers for its state. `task` is
    updated in place. One statement on PostgreSQL, five elsewhere (the embedded SQLite).
    """
    if connection.vendor == "postgresql":
        sql = _MARK_SUBMITTED_SQL.format(assignment=Assignment._meta.db_table, draft=Draft._meta.db_table,
                                         label=Label._meta.db_table, task=Task._meta.db_table,
                                         consensus=ItemConsensus._meta.db_table,
                                         endpoint=WebhookEndpoint._meta.db_table)
        rows = Jsonb([{"item": item, "value": value, "note": note} for item, value, note in labels])
        params: dict[str, Any] = {"submitted": Assignment.Status.SUBMITTED.value,
                                  "leased": Assignment.Status.LEASED.value, "complete": Task.Status.COMPLETE.value,
                                  "now": now, "tier": tier, "assignment_id": assignment_id, "task_id": task.pk,
                                  "labels": rows}
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is None:
            return None
        task.submitted_count, task.status, task.completed_at, has_consensus, endpoints_active = row
        return bool(has_consensus), endpoints_active
    changed = Assignment.objects.filter(pk=assignment_id, status=Assignment.Status.LEASED).update(
        status=Assignment.Status.SUBMITTED, submitted_at=now, tier_at_submission=tier)
    if not changed:
        return None
    Draft.objects.filter(assignment_id=assignment_id).delete()
    insert_rows([Label(assignment_id=assignment_id, task_id=task.pk, rubric_item_id=item_id, value=value, note=note)
                 for item_id, value, note in labels])
    task.submitted_count += 1
    if task.submitted_count >= task.overlap:
        task.status = Task.Status.COMPLETE
        task.completed_at = now
    task.save(update_fields=["submitted_count", "status", "completed_at"])
    return ItemConsensus.objects.filter(task=task).exists(), None


def _reported_complete(task: Task) -> bool:
    """Whether the submission completed its task, as the expert is told.

    A golden task has thousands of slots and never completes; reporting that would mark
    it as a control task. It reports what a regular panel of the project's overlap
    would: complete on every overlap-th submission.
    """
    if task.is_golden:
        return task.submitted_count % task.project.overlap == 0
    return task.status == Task.Status.COMPLETE
