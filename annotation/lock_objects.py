"""Row locks of the annotation app, always taken in one order so concurrent work never deadlocks.

This is the one list of the annotation lock order; every `select_for_update` of the app
goes through a helper here. A function that needs several locks takes them top to
bottom; rows of one kind in ascending pk. No function holds a row lock while it waits
for the network (judge requests run between two short transactions).

1. `rubrics.Rubric` of the project (`project_imports_lock`): imports and publishing.
   Imports into one project run one after another, so two uploads of the same file
   cannot both see a question as new and collide on a unique constraint halfway.
2. `rubrics.RubricVersion` (`rubric_version_lock`): the version being published.
3. `Project` (`project_lock`): a settings change, a request for an agreement report.
4. `Task` (`task_lock`, `task_lock_or_skip`, `tasks_lock` for many in pk order after the
   project when raising overlap for existing tasks; the claim draws its task FOR NO KEY UPDATE
   SKIP LOCKED in `annotation.assignment.services`, which is the same row kind).
5. `Assignment` of that task (`assignment_lock`).
6. `experts.ExpertProfile` (`expert_profile_lock`): pausing or resuming an expert, also
   inside a submission after its task and assignment, and in an assignment by hand after
   its tasks, experts in pk order; `experts.tiers` locks the same row last, on its own.
   The claim is the one exception to the order: it takes the expert's row first (so one
   expert's concurrent claims run one at a time and count their lease limit exactly),
   and under it only task rows SKIP LOCKED, which never wait, so it cannot
   close a cycle with a submission that holds a task and waits for the same expert.
7. `Consultation` (`consultation_lock`): after its Task when resolving (the resolution
   rewrites the task's consensus); on its own for a vote, an invitation or a reveal.

A follow-up drain (core.outbox) runs several submissions' follow-ups in one transaction; the
ones that may lock a row of this chain (a recompute request: the project; a tier evaluation: an
expert's profile) run last, once each, ranked by the task's `lock_order` (3, then 6) and experts
in pk order.

Apart from that chain, each on its own and never inside it:

* `CalibrationAttempt` (`calibration_attempt_lock`) before writing its answers;
* `JudgeRun` (`judge_run_lock`), then `JudgeTaskResult` rows (`judge_result_lock`);
* `Invitation` (`invitation_lock`) while a use is counted and the member added (no other
  lock is held then; ending a removed member's leases runs after, through the chain above).

* `BatchJob` (`batch_job_lock`): a worker applying a queued batch holds it for the whole
  batch, then takes the chain above inside it (a second delivery of the same job waits
  here, then finds it done). Nothing else locks it.

Money has its own list in `payments.lock_objects`; ledger posting holds no lock of this app.

Every lock here is FOR NO KEY UPDATE, not FOR UPDATE: the two exclude each other and every
other row lock alike, so the order above serializes exactly as before, but FOR NO KEY UPDATE
lets through the FOR KEY SHARE lock a foreign-key check takes. No locker here deletes its row
or changes its key, so nothing relied on holding those checks back. With FOR UPDATE, a commit
that wrote a row naming a locked task (an assignment, a consensus record) waited, at its deferred
foreign-key check, for whichever transaction held the task: another request, or a follow-up task
in the worker.
"""
from django.db.models import QuerySet

from annotation.models import (
    Assignment,
    BatchJob,
    CalibrationAttempt,
    Consultation,
    Invitation,
    JudgeRun,
    JudgeTaskResult,
    Project,
    Task,
)
from core.prepared import Prepared
from experts.models import ExpertProfile
from rubrics.models import Rubric, RubricVersion


def project_imports_lock(*, project: Project) -> None:
    """Hold the project's rubric row until the surrounding transaction ends."""
    list(Rubric.objects.select_for_update(no_key=True).filter(pk=project.rubric_id).values_list("pk", flat=True))


def rubric_version_lock(version_id: int) -> RubricVersion:
    return RubricVersion.objects.select_for_update(no_key=True).get(pk=version_id)


def project_lock(project_id: int) -> Project:
    return Project.objects.select_for_update(no_key=True, of=("self",)).get(pk=project_id)


def _task_lock_query(*, task_id: int) -> QuerySet[Task]:
    return Task.objects.select_for_update(no_key=True, of=("self",)).filter(pk=task_id)


_TASK_LOCK = Prepared(_task_lock_query)  # on every submission: compiled once per process


def task_lock(task_id: int) -> Task:
    task = _TASK_LOCK.first(task_id=task_id)
    if task is None:
        raise Task.DoesNotExist(f"no task {task_id}")
    return task


def task_lock_or_skip(task_id: int) -> Task | None:
    """The locked task, or None when another transaction holds it (SKIP LOCKED)."""
    return Task.objects.select_for_update(no_key=True, skip_locked=True, of=("self",)).filter(pk=task_id).first()


def assignment_lock(assignment_id: int) -> Assignment:
    return Assignment.objects.select_for_update(no_key=True, of=("self",)).get(pk=assignment_id)


def _expert_profile_lock_query(*, user_id: int) -> QuerySet[ExpertProfile]:
    return (ExpertProfile.objects.select_for_update(no_key=True, of=("self",)).select_related("user")
            .filter(user_id=user_id))


_EXPERT_PROFILE_LOCK = Prepared(_expert_profile_lock_query)  # on every claim: compiled once per process


def expert_profile_lock(user_id: int) -> ExpertProfile | None:
    return _EXPERT_PROFILE_LOCK.first(user_id=user_id)


def consultation_lock(consultation_id: int) -> Consultation:
    return Consultation.objects.select_for_update(no_key=True, of=("self",)).get(pk=consultation_id)


def calibration_attempt_lock(attempt_id: int) -> CalibrationAttempt:
    return CalibrationAttempt.objects.select_for_update(no_key=True).get(pk=attempt_id)


def judge_run_lock(run_id: int) -> JudgeRun | None:
    return JudgeRun.objects.select_for_update(no_key=True).filter(pk=run_id).first()


def judge_result_lock(result_id: int) -> JudgeTaskResult | None:
    return (JudgeTaskResult.objects.select_for_update(no_key=True, of=("self",))
            .select_related("run", "task__response__question").filter(pk=result_id).first())


def invitation_lock(invitation_id: int) -> Invitation:
    return (Invitation.objects.select_for_update(no_key=True, of=("self",)).select_related("project")
            .get(pk=invitation_id))


def tasks_lock(task_ids: list[int]) -> list[int]:
    """Lock many tasks of one project in ascending pk (a settings change that gives them slots)."""
    return list(Task.objects.select_for_update(no_key=True, of=("self",)).filter(pk__in=task_ids).order_by("pk")
                .values_list("pk", flat=True))


def batch_job_lock(job_id: int) -> BatchJob | None:
    return (BatchJob.objects.select_for_update(no_key=True, of=("self",)).select_related("project", "created_by")
            .filter(pk=job_id).first())
