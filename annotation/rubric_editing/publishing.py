"""Rubric versions as the work sees them: drafts, publishing, and tasks per version.

This spans `rubrics` (versions, items), `experts` (notifications) and `annotation`
(tasks, golden set, calibration), so it lives here, in the highest app it touches.
"""
import random
from datetime import datetime

from django.db import transaction
from django.db.models import Exists, Max, OuterRef
from django.urls import reverse
from django.utils import timezone

from annotation.calibration.golden_set import golden_carry_forward
from annotation.calibration.selectors import experts_with_live_calibration, project_has_golden_set
from annotation.calibration.services import calibrations_mark_stale
from annotation.exchange.bulk import rows_insert
from annotation.lock_objects import rubric_version_lock
from annotation.models import Project, Response, Task
from annotation.rubric_editing.carryover import judge_runs_carry_over, work_carry_over
from annotation.rubric_editing.diff import rubric_version_diff
from annotation.selectors import project_experts
from core.error_codes import ErrorCode
from core.errors import DomainError
from experts.models import User
from experts.notifications import notification_send
from rubrics.models import RubricItem, RubricVersion


def rubric_draft_get_or_create(*, project: Project) -> RubricVersion:
    """The project's draft version; a new one starts as a copy of the newest published version
    (its items and its guidelines)."""
    draft = RubricVersion.objects.filter(rubric_id=project.rubric_id, status=RubricVersion.Status.DRAFT).first()
    if draft is not None:
        return draft
    last = RubricVersion.objects.filter(rubric_id=project.rubric_id).aggregate(n=Max("number"))["n"] or 0
    published = (RubricVersion.objects.filter(rubric_id=project.rubric_id, status=RubricVersion.Status.PUBLISHED)
                 .order_by("-number").first())
    draft = RubricVersion.objects.create(rubric_id=project.rubric_id, number=last + 1,
                                         guidelines=published.guidelines if published is not None else "")
    if published is not None:
        RubricItem.objects.bulk_create(
            RubricItem(version=draft, question_ref=i.question_ref, position=i.position, item_key=i.item_key,
                       dimension_id=i.dimension_id, score=i.score, content=i.content, tags=i.tags)
            for i in published.items.all()
        )
    return draft


@transaction.atomic
def rubric_version_publish(*, project: Project, version: RubricVersion, reason: str, now: datetime,
                           by: User | None = None) -> RubricVersion:
    """Publish a draft: it becomes immutable and new leases use it.

    Questions whose items did not change carry their work over (tasks, labels, consensus,
    and so their pay: see `annotation.rubric_editing.carryover`); only questions with a
    changed item, and new questions, get tasks on the new version. Partly worked tasks of
    changed questions are closed as superseded, their open leases ended and the experts
    told. The changelog records `reason` and `by`.

    Against the previously published version: the golden set carries over (references
    only for questions whose items did not change). Calibration goes stale only when the
    standard changed on the questions experts are calibrated on: an item of a golden
    question edited or removed, or added to it (`RubricDiff.changes_standard`, restricted
    to the golden set's questions). Then every calibration of the project goes stale and
    its experts are notified to calibrate again. A version that only changes regular
    questions, only adds new questions (a question import) or only changes the guidelines
    keeps calibrations valid; the guidelines are published with the items and frozen with
    them. A draft identical to the published version (items and guidelines) is refused.
    """
    version = rubric_version_lock(version.pk)
    if version.rubric_id != project.rubric_id:
        raise DomainError("That rubric version belongs to another project.", status=404, code="not_found")
    if version.is_published:
        raise DomainError(f"Version {version.number} is already published.", code="already_published")
    if not reason.strip():
        raise DomainError("Publishing needs a reason for the changelog.", code=ErrorCode.REASON_REQUIRED,
                          errors=[{"field": "reason", "message": "required"}])
    if not version.items.exists():
        raise DomainError("A version without rubric items cannot be published.", code=ErrorCode.EMPTY_VERSION)
    previous = (RubricVersion.objects.filter(rubric_id=project.rubric_id, status=RubricVersion.Status.PUBLISHED)
                .order_by("-number").first())
    diff = rubric_version_diff(old=previous, new=version) if previous is not None else None
    if diff is not None and diff.is_empty:
        raise DomainError(f"The draft is identical to version {previous.number}; there is nothing to publish.",
                          code="no_changes")
    version.status = RubricVersion.Status.PUBLISHED
    version.published_at = now
    version.changelog = reason.strip()
    version.published_by = by
    version.save(update_fields=["status", "published_at", "changelog", "published_by"])
    golden_questions: set[str] = set()
    if diff is not None and previous is not None:
        unchanged = set(diff.old_questions - diff.touched_questions)
        changed = diff.touched_questions & diff.old_questions
        golden_questions = set(Task.objects.filter(project=project, rubric_version=previous, is_golden=True)
                               .values_list("response__question__external_id", flat=True))
        work_carry_over(project=project, previous=previous, version=version, unchanged_questions=unchanged,
                        changed_questions=changed, now=now)
    tasks_ensure_for_version(project=project, version=version)
    if diff is not None and previous is not None:
        judge_runs_carry_over(project=project, previous=previous, version=version,
                              unchanged_questions=unchanged)
        golden_carry_forward(project=project, previous=previous, version=version, unchanged_questions=unchanged,
                             now=now)
        if diff.changes_standard and diff.standard_questions & golden_questions:
            # Only experts who had calibrated (or begun to) must calibrate again; one whose attempt
            # was already stale was told then, and a newcomer was never calibrated.
            recalibrate = experts_with_live_calibration(project)
            calibrations_mark_stale(project=project, now=now)
            if project_has_golden_set(project) and recalibrate:
                notification_send(users=project_experts(project).filter(pk__in=recalibrate), kind="rubric_published",
                                  now=now,
                                  params={"version": version.number, "project": project.name,
                                          "reason": version.changelog},
                                  link=reverse("calibration", args=[project.pk]))
    return version


def tasks_ensure_for_version(*, project: Project, version: RubricVersion) -> int:
    """Give every response whose question has items in `version` a task on it; returns how many were added."""
    has_items = RubricItem.objects.filter(version=version, question_ref=OuterRef("question__external_id"))
    has_task = Task.objects.filter(response=OuterRef("pk"), rubric_version=version)
    pending = Response.objects.filter(project=project).filter(Exists(has_items)).exclude(Exists(has_task))
    # Subqueries, not lists of ids: a 100,000-response import bound 100,000 ids twice here.
    moved = (Task.objects.filter(project=project, response__in=pending.values("pk"), live_count=0,
                                 submitted_count=0, status=Task.Status.OPEN, is_golden=False)
             .exclude(rubric_version=version).update(rubric_version=version))
    responses = list(pending.values_list("pk", flat=True))  # those a moved task now covers are gone
    # COPY (annotation.exchange.bulk): a responses import of 10,000 rows gives 10,000 tasks, and
    # bulk_create spent about 1 s of client time binding them.
    now = timezone.now()
    rows_insert(
        model=Task,
        fields=["project_id", "response_id", "rubric_version_id", "overlap", "live_count", "submitted_count", "status",
                "shuffle_key", "is_golden", "extra_slots", "priority", "created_at"],
        rows=((project.pk, rid, version.pk, project.overlap, 0, 0, Task.Status.OPEN.value, random.getrandbits(62),
               False, 0, 0, now) for rid in responses),
    )
    return moved + len(responses)
