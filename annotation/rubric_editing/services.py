"""PM edits to the project's draft rubric version.

Items are edited only in the draft (`rubric_draft_get_or_create` copies the newest
published version). An item of a published version is refused with a Conflict (the
database trigger refuses it too, whatever the path). A new item takes the next
position of its question across every version of the rubric, so its `item_key`
never reuses the key of an item that was removed: the diff then shows a removal and
an addition, not a change.
"""
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max

from annotation.audit.services import audit_record
from annotation.lock_objects import project_imports_lock
from annotation.models import AuditAction, Label, Project, Question
from annotation.projects.rules import project_check_writable
from annotation.rubric_editing.diff import RubricDiff, rubric_version_diff
from annotation.rubric_editing.publishing import rubric_draft_get_or_create, rubric_version_publish
from annotation.selectors import rubric_version_current
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, NotFound
from experts.models import User
from rubrics.guidelines import GUIDELINES_MAX
from rubrics.models import Dimension, RubricItem, RubricVersion

CONTENT_MAX = 4000
SCORE_RANGE = (-100, 100)


@dataclass(frozen=True)
class ItemInput:
    content: str
    score: int | None
    dimension: Dimension


def _clean_item(*, content, score, dimension) -> ItemInput:
    errors = []
    text = content.strip() if isinstance(content, str) else ""
    if not text:
        errors.append({"field": "content", "message": "required"})
    elif len(text) > CONTENT_MAX:
        errors.append({"field": "content", "message": f"at most {CONTENT_MAX} characters"})
    if isinstance(score, str):
        score = score.strip()
        score = None if score == "" else (int(score) if score.lstrip("-").isdigit() else score)
    if score is not None and (isinstance(score, bool) or not isinstance(score, int)
                              or not SCORE_RANGE[0] <= score <= SCORE_RANGE[1]):
        errors.append({"field": "score",
                       "message": f"expected a whole number from {SCORE_RANGE[0]} to {SCORE_RANGE[1]}, or empty"})
    found = Dimension.objects.filter(code=dimension).first() if isinstance(dimension, str) else None
    if found is None:
        errors.append({"field": "dimension", "message": f"unknown dimension {dimension!r}"})
    elif found.is_gate and score is not None:
        errors.append({"field": "score", "message": "a gate item carries no score"})
    elif not found.is_gate and score is None:
        errors.append({"field": "score", "message": "required for a scored dimension"})
    if errors:
        raise DomainError("The rubric item needs attention; nothing was saved.", code="invalid_item", errors=errors)
    return ItemInput(content=text, score=score, dimension=found)


def _draft_item(*, project: Project, item_id) -> RubricItem:
    try:
        item = RubricItem.objects.select_related("version").get(pk=int(item_id),
                                                                version__rubric_id=project.rubric_id)
    except (RubricItem.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such rubric item.") from None
    if item.version.is_published:
        raise Conflict(f"Version {item.version.number} is published and never changes; edit the draft instead.",
                       code="published_version")
    return item


def _audit_item(*, action: AuditAction, project: Project, item: RubricItem, by: User | None, **details) -> None:
    audit_record(actor=by, action=action, project_id=project.pk, object_type="rubrics.rubricitem",
                 object_ids=[item.pk], details={"item_key": item.item_key, "version": item.version.number, **details})


def rubric_draft_item_update(*, project: Project, item_id, content, score, dimension,
                             by: User | None = None) -> RubricItem:
    """Change an item of the draft: wording, score and dimension (audited with the old and new values)."""
    clean = _clean_item(content=content, score=score, dimension=dimension)
    project_check_writable(project)
    with transaction.atomic():
        item = _draft_item(project=project, item_id=item_id)
        old = {"content": item.content, "score": item.score, "dimension": item.dimension.code}
        item.content, item.score, item.dimension = clean.content, clean.score, clean.dimension
        item.save(update_fields=["content", "score", "dimension"])
        new = {"content": item.content, "score": item.score, "dimension": item.dimension.code}
        changes = {k: {"old": old[k], "new": new[k]} for k in old if old[k] != new[k]}
        if changes:
            _audit_item(action=AuditAction.RUBRIC_ITEM_EDIT, project=project, item=item, by=by, changes=changes)
    return item


def rubric_draft_item_add(*, project: Project, question_ref: str, content, score, dimension,
                          by: User | None = None) -> RubricItem:
    """Add an item to a question in the draft (created from the published version when missing)."""
    clean = _clean_item(content=content, score=score, dimension=dimension)
    if not Question.objects.filter(project=project, external_id=question_ref).exists():
        raise NotFound("No such question.")
    with transaction.atomic():
        project_imports_lock(project=project)
        project_check_writable(project)
        draft = rubric_draft_get_or_create(project=project)
        last = (RubricItem.objects.filter(version__rubric_id=project.rubric_id, question_ref=question_ref)
                .aggregate(n=Max("position"))["n"] or 0)
        item = RubricItem.objects.create(
            version=draft, question_ref=question_ref, position=last + 1, item_key=f"{question_ref}:{last + 1}",
            dimension=clean.dimension, score=clean.score, content=clean.content)
        _audit_item(action=AuditAction.RUBRIC_ITEM_ADD, project=project, item=item, by=by,
                    content=item.content, score=item.score, dimension=item.dimension.code)
        return item


@dataclass(frozen=True)
class ItemRemoval:
    item: RubricItem
    published_version: int | None
    published_labels: int


def rubric_draft_item_removal(*, project: Project, item_id) -> ItemRemoval:
    """What removing a draft item touches: the same item in the published version and its labels.

    Labels point at the published version's item, never at the draft's, so removing the draft
    item deletes no label; publishing then re-queues the question's tasks on the new version.
    """
    item = _draft_item(project=project, item_id=item_id)
    published = (RubricItem.objects.filter(version__rubric_id=project.rubric_id,
                                           version__status=RubricVersion.Status.PUBLISHED, item_key=item.item_key)
                 .select_related("version").order_by("-version__number").first())
    if published is None:
        return ItemRemoval(item=item, published_version=None, published_labels=0)
    return ItemRemoval(item=item, published_version=published.version.number,
                       published_labels=Label.objects.filter(rubric_item=published).count())


def rubric_draft_item_delete(*, project: Project, item_id, by: User | None = None) -> None:
    """Remove an item from the draft."""
    project_check_writable(project)
    with transaction.atomic():
        item = _draft_item(project=project, item_id=item_id)
        _audit_item(action=AuditAction.RUBRIC_ITEM_DELETE, project=project, item=item, by=by,
                    content=item.content, score=item.score, dimension=item.dimension.code)
        item.delete()  # the draft's item carries no label


def rubric_draft_guidelines_update(*, project: Project, guidelines: str, by: User | None = None) -> RubricVersion:
    """Replace the draft's guidelines (Markdown); the draft is started from the published version when missing.

    Published versions keep theirs: only the draft is ever written (the database refuses the rest).
    """
    text = guidelines.replace("\r\n", "\n").strip("\n")
    if len(text) > GUIDELINES_MAX:
        raise DomainError(f"The guidelines are longer than {GUIDELINES_MAX} characters; nothing was saved.",
                          code=ErrorCode.GUIDELINES_TOO_LONG, params={"max": GUIDELINES_MAX},
                          errors=[{"field": "guidelines", "message": f"at most {GUIDELINES_MAX} characters",
                                   "code": ErrorCode.TOO_LONG}])
    with transaction.atomic():
        project_imports_lock(project=project)
        draft = rubric_draft_get_or_create(project=project)
        if draft.guidelines != text:
            old = draft.guidelines
            draft.guidelines = text
            draft.save(update_fields=["guidelines"])
            audit_record(actor=by, action=AuditAction.RUBRIC_GUIDELINES_EDIT, project_id=project.pk,
                         objects=[draft], details={"version": draft.number, "old": old, "new": text})
    return draft


@dataclass(frozen=True)
class DraftView:
    draft: RubricVersion | None
    published: RubricVersion | None
    diff: RubricDiff | None


def rubric_draft_view(project: Project) -> DraftView:
    """The draft, if one exists, and its diff against the newest published version (a read: no draft is made)."""
    draft = RubricVersion.objects.filter(rubric_id=project.rubric_id, status=RubricVersion.Status.DRAFT).first()
    published = rubric_version_current(project)
    diff = rubric_version_diff(old=published, new=draft) if draft is not None else None
    return DraftView(draft=draft, published=published, diff=diff)


def rubric_draft_start(*, project: Project) -> RubricVersion:
    """The project's draft version, copied from the newest published version when there is none."""
    with transaction.atomic():
        project_imports_lock(project=project)
        project_check_writable(project)
        return rubric_draft_get_or_create(project=project)


def rubric_version_publish_by_number(*, project: Project, number, reason: str, now,
                                     by: User | None = None) -> RubricVersion:
    """Publish the project's version `number` (its draft) with `reason` as the changelog, by `by`."""
    with transaction.atomic():
        project_imports_lock(project=project)
        project_check_writable(project)
        version = rubric_version_get(project=project, number=number)
        was_draft = version.status == RubricVersion.Status.DRAFT
        published = rubric_version_publish(project=project, version=version, reason=reason or "", now=now, by=by)
        if was_draft:
            audit_record(actor=by, action=AuditAction.RUBRIC_PUBLISH, project_id=project.pk, objects=[published],
                         details={"version": published.number, "reason": reason or ""}, now=now)
        return published


def rubric_version_get(*, project: Project, number) -> RubricVersion:
    """A version of the project's rubric by number, or NotFound."""
    try:
        return RubricVersion.objects.get(rubric_id=project.rubric_id, number=int(number))
    except (RubricVersion.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such rubric version.") from None
