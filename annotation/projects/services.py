"""Project setup writes: the one settings service, the lifecycle (pause, resume, close,
archive) and cloning.

Every change of a setting or of the lifecycle state is written to `ProjectSettingChange`
in the same transaction as the change itself. Locks follow `annotation.lock_objects`:
the project row first, then its tasks in ascending pk.
"""
import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Case, F, Value, When

from annotation.assignment.services import lease_end
from annotation.audit.services import audit_record
from annotation.calibration.golden_set import GOLDEN_OVERLAP
from annotation.lock_objects import project_lock, tasks_lock
from annotation.models import (
    AuditAction,
    GoldenReference,
    Project,
    ProjectSettingChange,
    ProjectState,
    Question,
    Response,
    Task,
)
from annotation.projects.fields import FIELDS, setting_text, settings_clean
from annotation.projects.rules import project_check_writable
from annotation.projects.selectors import open_leases, overlap_existing_tasks
from annotation.projects.signals import project_cloned
from annotation.selectors import project_experts, project_managers, rubric_version_current
from annotation.services import project_add_member, project_create
from core.after_commit import task_send_on_commit
from core.error_codes import ErrorCode
from core.errors import Conflict
from experts.models import User
from rubrics.models import RubricItem, RubricVersion

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SettingsResult:
    project: Project
    changes: list[ProjectSettingChange] = field(default_factory=list)
    tasks_extended: int = 0  # existing tasks that got the raised overlap


def _record(*, project: Project, setting: str, old: Any, new: Any, by: User | None,
            now: datetime) -> ProjectSettingChange:
    return ProjectSettingChange(project=project, setting=setting, old_value=setting_text(setting, old),
                                new_value=setting_text(setting, new), changed_by=by, changed_at=now)


def _overlap_apply_to_existing(*, project: Project, overlap: int) -> int:
    """Give the current work's open, full and complete tasks the raised overlap (the project row is locked).

    A full or complete task reopens: its counters stay exact (nothing is removed), and a
    completed task's consensus is written again when its extra experts have submitted.
    """
    return tasks_overlap_raise(task_ids=list(overlap_existing_tasks(project, overlap).values_list("pk", flat=True)),
                               overlap=overlap)


def tasks_overlap_raise(*, task_ids: list[int], overlap: int) -> int:
    """Give the regular tasks `task_ids` whose panel is smaller than `overlap` that panel; returns how many.

    Locks the tasks in pk order (after the project, when the caller holds it). A full or complete task
    reopens: its counters stay exact (nothing is removed), and a completed task's consensus is written
    again when its extra experts have submitted. Also the batch operation on a filtered set of tasks.
    """
    ids = tasks_lock(task_ids)
    # Extra experts drawn for ties stay on top of the raised panel.
    tasks = (Task.objects.filter(pk__in=ids, is_golden=False).alias(panel=F("overlap") - F("extra_slots"))
             .filter(panel__lt=overlap))
    return tasks.update(
        overlap=overlap + F("extra_slots"),
        status=Case(When(status__in=[Task.Status.FULL, Task.Status.COMPLETE], then=Value(Task.Status.OPEN)),
                    default=F("status")),
        completed_at=None,
    )


def project_settings_update(*, project: Project, values: Mapping[str, Any], changed_by: User | None,
                            now: datetime, apply_to_existing: bool = False,
                            allowed: tuple[str, ...] | None = None) -> SettingsResult:
    """Change some settings of `project`: every value is checked first and one bad value writes
    nothing (DomainError "invalid_settings" with one entry per field). A change applies to new
    leases and, for overlap, to new tasks; a raised overlap reaches existing tasks of the
    current rubric version only with `apply_to_existing`. Lowering never removes work.
    A closed project refuses ("project_closed")."""
    clean = settings_clean(values, allowed=allowed)
    with transaction.atomic():
        project = project_lock(project.pk)
        project_check_writable(project)
        changed = {name: value for name, value in clean.items() if getattr(project, name) != value}
        records = [_record(project=project, setting=name, old=getattr(project, name), new=value,
                           by=changed_by, now=now) for name, value in changed.items()]
        raised = "overlap" in changed and changed["overlap"] > project.overlap
        for name, value in changed.items():
            setattr(project, name, value)
        if changed:
            project.save(update_fields=list(changed))
        extended = 0
        if apply_to_existing and "overlap" in clean:
            # Also when the overlap was raised earlier without applying it: ticking the box
            # again brings the existing tasks up to the project's overlap.
            extended = _overlap_apply_to_existing(project=project, overlap=project.overlap)
        records = ProjectSettingChange.objects.bulk_create(records)
        if "consensus_labels" in changed:
            # Every task's consensus now reads the other labels: rewritten by a worker, task by task.
            task_send_on_commit("annotation.consensus_recompute_project", project_id=project.pk)
        if changed or extended:
            audit_record(actor=changed_by, action=AuditAction.SETTINGS_CHANGE, project_id=project.pk, now=now,
                         objects=[project], details={"changes": {r.setting: {"old": r.old_value, "new": r.new_value}
                                                                 for r in records}, "tasks_extended": extended})
    if changed or extended:
        logger.info("project settings changed", extra={"project_id": project.pk, "settings": sorted(changed),
                                                      "tasks_extended": extended, "overlap_raised": raised})
    return SettingsResult(project=project, changes=records, tasks_extended=extended)


# --- Lifecycle ------------------------------------------------------------------------

@dataclass(frozen=True)
class LifecycleResult:
    project: Project
    changed: bool  # False when the project already was in that state (a repeated request)
    leases_ended: int = 0


def _state_set(*, project: Project, to: str, allowed_from: tuple[str, ...], by: User | None,
               now: datetime) -> LifecycleResult:
    with transaction.atomic():
        project = project_lock(project.pk)
        if project.state == to:
            return LifecycleResult(project=project, changed=False)
        if project.state not in allowed_from:
            project_check_writable(project)
        ProjectSettingChange.objects.create(project=project, setting="state", old_value=project.state,
                                            new_value=to, changed_by=by, changed_at=now)
        audit_record(actor=by, action=AuditAction.PROJECT_STATE, project_id=project.pk, objects=[project], now=now,
                     details={"old": project.state, "new": to})
        project.state = to
        project.save(update_fields=["state"])
    logger.info("project state changed", extra={"project_id": project.pk, "state": to})
    return LifecycleResult(project=project, changed=True)


def project_pause(*, project: Project, by: User | None, now: datetime) -> LifecycleResult:
    """No new leases until resumed; open leases can still be finished and submitted."""
    return _state_set(project=project, to=ProjectState.PAUSED, allowed_from=(ProjectState.ACTIVE,), by=by, now=now)


def project_resume(*, project: Project, by: User | None, now: datetime) -> LifecycleResult:
    return _state_set(project=project, to=ProjectState.ACTIVE, allowed_from=(ProjectState.PAUSED,), by=by, now=now)


def project_close(*, project: Project, by: User | None, now: datetime) -> LifecycleResult:
    """Make the project read-only and end its open leases.

    Decision: open leases end at close (their slots return, drafts are kept), because a
    closed project accepts no submission; an expert holding one is told so when they try.
    Each lease ends in its own short transaction after the state change, in task order.
    A repeated close ends any lease left over and changes nothing else.
    """
    result = _state_set(project=project, to=ProjectState.CLOSED,
                        allowed_from=(ProjectState.ACTIVE, ProjectState.PAUSED), by=by, now=now)
    ended = sum(lease_end(assignment=a) for a in open_leases(result.project).order_by("task_id", "pk"))
    return LifecycleResult(project=result.project, changed=result.changed, leases_ended=ended)


def project_archive(*, project: Project, by: User | None, now: datetime) -> LifecycleResult:
    """Hide a closed project from the project lists ("project_not_closed" otherwise)."""
    with transaction.atomic():
        project = project_lock(project.pk)
        if project.archived_at is not None:
            return LifecycleResult(project=project, changed=False)
        if project.state != ProjectState.CLOSED:
            raise Conflict("Only a closed project can be archived.", code=ErrorCode.PROJECT_NOT_CLOSED)
        project.archived_at = now
        project.save(update_fields=["archived_at"])
        ProjectSettingChange.objects.create(project=project, setting="archived", old_value="", new_value="yes",
                                            changed_by=by, changed_at=now)
    return LifecycleResult(project=project, changed=True)


# --- Cloning ----------------------------------------------------------------------------

def _clone_rubric(*, source: Project, clone: Project, now: datetime) -> RubricVersion | None:
    """Version 1 of the clone's rubric: the items and guidelines of the source's current version, published."""
    version = rubric_version_current(source)
    if version is None:
        return None
    new_version = RubricVersion.objects.create(rubric_id=clone.rubric_id, number=1, guidelines=version.guidelines,
                                               changelog=f"Copied from project {source.pk}, v{version.number}")
    RubricItem.objects.bulk_create(
        RubricItem(version=new_version, question_ref=i.question_ref, position=i.position, item_key=i.item_key,
                   dimension_id=i.dimension_id, score=i.score, content=i.content, tags=i.tags)
        for i in RubricItem.objects.filter(version=version).order_by("pk"))
    # Items go in while the version is a draft; the database refuses them once it is published.
    RubricVersion.objects.filter(pk=new_version.pk).update(status=RubricVersion.Status.PUBLISHED, published_at=now)
    return version


def _clone_material(*, source: Project, clone: Project, version: RubricVersion) -> int:
    """The questions the rubric is about, and the golden set: its responses, tasks and references."""
    refs = set(RubricItem.objects.filter(version=version).values_list("question_ref", flat=True))
    questions = {q.pk: q for q in Question.objects.filter(project=source, external_id__in=refs)}
    copies = {pk: Question(project=clone, external_id=q.external_id, dialogue=q.dialogue,
                           final_user_turn=q.final_user_turn, difficulty=q.difficulty,
                           primary_scene=q.primary_scene, secondary_scene=q.secondary_scene,
                           source_format=q.source_format) for pk, q in questions.items()}
    Question.objects.bulk_create(copies.values())
    golden = list(Task.objects.filter(project=source, rubric_version=version, is_golden=True)
                  .select_related("response").order_by("pk"))
    new_version = RubricVersion.objects.get(rubric_id=clone.rubric_id, number=1)
    items = {i.item_key: i for i in RubricItem.objects.filter(version=new_version)}
    references = list(GoldenReference.objects.filter(task__in=golden).select_related("rubric_item"))
    for task in golden:
        old = task.response
        response = Response.objects.create(project=clone, question=copies[old.question_id],
                                           model_name=old.model_name, text=old.text)
        new_task = Task.objects.create(project=clone, response=response, rubric_version=new_version,
                                       overlap=GOLDEN_OVERLAP, is_golden=True, shuffle_key=random.getrandbits(62))
        GoldenReference.objects.bulk_create(
            GoldenReference(task=new_task, rubric_item=items[r.rubric_item.item_key], value=r.value,
                            rationale=r.rationale, created_at=r.created_at)
            for r in references if r.task_id == task.pk)
    return len(golden)


@transaction.atomic
def project_clone(*, source: Project, by: User | None, name: str = "", copy_members: bool = False,
                  now: datetime) -> Project:
    """A new project with the source's current rubric version (as its v1), golden set, settings
    and prices (copied by payments on the `project_cloned` signal); no work, and no members but
    its creator unless `copy_members`. The source may be in any state; the clone starts active."""
    clone = project_create(name=name.strip() or f"{source.name} (copy)", created_by=by, overlap=source.overlap,
                           lease_timeout_s=source.lease_timeout_s, description=source.description, audited=False)
    copied = {f.name: getattr(source, f.name) for f in FIELDS if f.name not in ("name", "description", "overlap",
                                                                                "lease_timeout_s")}
    for key, value in copied.items():
        setattr(clone, key, value)
    clone.save(update_fields=list(copied))
    version = _clone_rubric(source=source, clone=clone, now=now)
    golden = _clone_material(source=source, clone=clone, version=version) if version is not None else 0
    if copy_members:
        for user in [*project_managers(source), *project_experts(source)]:
            if user != by:
                project_add_member(project=clone, user=user)
    project_cloned.send(sender=Project, source=source, clone=clone, created_by=by)
    audit_record(actor=by, action=AuditAction.PROJECT_CLONE, project_id=clone.pk, objects=[clone], now=now,
                 details={"source": source.pk, "name": clone.name, "copy_members": copy_members,
                          "rubric_version": version.number if version is not None else None, "golden_tasks": golden})
    logger.info("project cloned", extra={"source_id": source.pk, "project_id": clone.pk, "golden_tasks": golden})
    return clone
