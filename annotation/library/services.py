"""Writes of the case library and the FAQ. Permission is the caller's (annotation.library.selectors).

Every write validates all of its input first and writes nothing when any field is
refused; the error names each refused field (`errors`), so a form marks them all.
"""
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.urls import reverse
from django.utils.text import Truncator
from django.utils.translation import gettext

from annotation.audit.services import audit_record
from annotation.consultations.selectors import consultation_case_material
from annotation.models import (
    AuditAction,
    Case,
    CaseItem,
    CaseOutcome,
    CaseRead,
    CaseStatus,
    Consultation,
    FaqEntry,
    Outcome,
    Project,
    Question,
)
from annotation.models.library import FAQ_ANSWER_MAX, FAQ_QUESTION_MAX, SCENE_MAX, TEXT_MAX, TITLE_MAX
from annotation.selectors import project_managers
from core.error_codes import ErrorCode
from core.errors import DomainError
from experts.models import User
from experts.notifications import notification_send
from rubrics.models import Dimension, RubricItem

SCENES_MAX = 10
ITEMS_MAX = 50
QUOTE_MAX = 60  # characters of a question quoted in a notification


def _texts_clean(fields: Sequence[tuple[str, str | None, int, bool]]) -> dict[str, str]:
    """Each (name, value, max length, required) stripped; one DomainError naming every refused field."""
    cleaned: dict[str, str] = {}
    missing: list[dict[str, Any]] = []
    too_long: list[dict[str, Any]] = []
    for name, value, limit, required in fields:
        text = (value or "").replace("\r\n", "\n").strip()
        if required and not text:
            missing.append({"field": name, "code": ErrorCode.REQUIRED, "message": "required"})
        elif len(text) > limit:
            too_long.append({"field": name, "code": ErrorCode.FIELD_TOO_LONG, "message": f"at most {limit} characters",
                             "params": {"max": limit, "length": len(text)}})
        cleaned[name] = text
    if missing:
        raise DomainError("Required fields are empty; nothing was saved.", code=ErrorCode.LIBRARY_FIELD_REQUIRED,
                          errors=missing + too_long)
    if too_long:
        raise DomainError("A field is too long; nothing was saved.", code=ErrorCode.LIBRARY_FIELD_TOO_LONG,
                          params={"max": too_long[0]["params"]["max"]}, errors=too_long)
    return cleaned


def _scenes_clean(scenes: Iterable[str]) -> list[str]:
    cleaned = list(dict.fromkeys(s.strip() for s in scenes if s and s.strip()))
    for scene in cleaned:
        if len(scene) > SCENE_MAX:
            raise DomainError("A scene is too long.", code=ErrorCode.LIBRARY_FIELD_TOO_LONG, params={"max": SCENE_MAX},
                              errors=[{"field": "scenes", "code": ErrorCode.TOO_LONG, "message": "too long"}])
    return cleaned[:SCENES_MAX]


def _dimensions_get(codes: Iterable[str]) -> list[Dimension]:
    wanted = list(dict.fromkeys(c.strip() for c in codes if c and c.strip()))
    found = {d.code: d for d in Dimension.objects.filter(code__in=wanted)}
    for code in wanted:
        if code not in found:
            raise DomainError(f"Unknown dimension {code!r}.", code=ErrorCode.LIBRARY_DIMENSION_UNKNOWN,
                              params={"name": code},
                              errors=[{"field": "dimensions", "code": ErrorCode.LIBRARY_DIMENSION_UNKNOWN,
                                       "message": "unknown", "params": {"name": code}}])
    return [found[c] for c in wanted]


def _question_get(project: Project, question: Question | str | None) -> Question | None:
    if question is None or question == "":
        return None
    if isinstance(question, Question):
        if question.project_id != project.pk:
            raise DomainError("The question is not in this project.", code=ErrorCode.LIBRARY_QUESTION_UNKNOWN,
                              params={"name": question.external_id})
        return question
    try:
        return Question.objects.get(project=project, external_id=question.strip())
    except Question.DoesNotExist:
        raise DomainError(f"No question {question!r} in this project.", code=ErrorCode.LIBRARY_QUESTION_UNKNOWN,
                          params={"name": question},
                          errors=[{"field": "question", "code": ErrorCode.LIBRARY_QUESTION_UNKNOWN,
                                   "message": "unknown", "params": {"name": question}}]) from None


def _items_get(project: Project, item_keys: Iterable[str]) -> list[RubricItem]:
    """One rubric item row per key (its newest version's), from any version of the project's rubric."""
    wanted = list(dict.fromkeys(k.strip() for k in item_keys if k and k.strip()))[:ITEMS_MAX]
    rows: dict[str, RubricItem] = {}
    for item in (RubricItem.objects.filter(version__rubric_id=project.rubric_id, item_key__in=wanted)
                 .select_related("dimension").order_by("version__number")):
        rows[item.item_key] = item
    for key in wanted:
        if key not in rows:
            raise DomainError(f"No rubric item {key!r} in this project.", code=ErrorCode.LIBRARY_ITEM_UNKNOWN,
                              params={"name": key},
                              errors=[{"field": "item_keys", "code": ErrorCode.LIBRARY_ITEM_UNKNOWN,
                                       "message": "unknown", "params": {"name": key}}])
    return [rows[k] for k in wanted]


def _outcome_clean(outcome: str | None) -> str:
    value = (outcome or "").strip()
    if value and value not in CaseOutcome.values:
        raise DomainError(f"Unknown outcome {value!r}.", code=ErrorCode.LIBRARY_OUTCOME_UNKNOWN, params={"name": value},
                          errors=[{"field": "outcome", "code": ErrorCode.LIBRARY_OUTCOME_UNKNOWN,
                                   "message": "unknown", "params": {"name": value}}])
    return value


def _case_fields(*, project: Project, title: str, problem: str, disagreement: str, discussion: str, reading: str,
                 outcome: str | None, item_keys: Iterable[str], question: Question | str | None,
                 scenes: Iterable[str], dimension_codes: Iterable[str]) -> tuple[dict[str, Any], list[RubricItem],
                                                                               list[Dimension]]:
    """Every case field validated, with what the links imply filled in.

    Without a question, the one question all linked items belong to is taken; without
    dimensions, the linked items' dimensions; without scenes, the question's scenes.
    """
    texts = _texts_clean([("title", title, TITLE_MAX, True), ("problem", problem, TEXT_MAX, True),
                          ("disagreement", disagreement, TEXT_MAX, False),
                          ("discussion", discussion, TEXT_MAX, False), ("reading", reading, TEXT_MAX, True)])
    outcome_value = _outcome_clean(outcome)
    items = _items_get(project, item_keys)
    the_question = _question_get(project, question)
    if the_question is None and items and len({i.question_ref for i in items}) == 1:
        the_question = Question.objects.filter(project=project, external_id=items[0].question_ref).first()
    dimensions = _dimensions_get(dimension_codes)
    if not dimensions:
        dimensions = list({i.dimension.code: i.dimension for i in items}.values())
    scene_list = _scenes_clean(scenes)
    if not scene_list and the_question is not None:
        scene_list = _scenes_clean([the_question.primary_scene, the_question.secondary_scene])
    fields = {**texts, "outcome": outcome_value, "question": the_question, "scenes": scene_list}
    return fields, items, dimensions


def case_create(*, project: Project, by: User, now: datetime, title: str, problem: str, disagreement: str,
                discussion: str, reading: str, outcome: str | None = None, item_keys: Iterable[str] = (),
                question: Question | str | None = None, scenes: Iterable[str] = (),
                dimension_codes: Iterable[str] = (), publish: bool = False,
                consultation: Consultation | None = None) -> Case:
    """Write a case of `project` (a draft, or published at once with `publish`); all or nothing.

    `item_keys` are stable rubric item keys of any version of the project's rubric;
    `question` is a Question of the project or its external id. `consultation`, a resolved
    consultation of the project, is the case's source: one case per consultation.
    """
    fields, items, dimensions = _case_fields(
        project=project, title=title, problem=problem, disagreement=disagreement, discussion=discussion,
        reading=reading, outcome=outcome, item_keys=item_keys, question=question, scenes=scenes,
        dimension_codes=dimension_codes)
    published = {"status": CaseStatus.PUBLISHED, "published_by": by, "published_at": now} if publish else {}
    with transaction.atomic():
        if consultation is not None:
            _consultation_check(project=project, consultation=consultation)
        try:
            with transaction.atomic():
                case = Case.objects.create(project=project, created_by=by, created_at=now, updated_at=now,
                                           consultation=consultation, **fields, **published)
        except IntegrityError:
            raise _consultation_has_case(consultation) from None
        CaseItem.objects.bulk_create([CaseItem(case=case, item_key=i.item_key, question_ref=i.question_ref)
                                      for i in items])
        case.dimensions.set(dimensions)
        if publish:
            _audit_publish(case=case, action=AuditAction.CASE_PUBLISH, by=by, now=now)
    return case


def _audit_publish(*, case: Case, action: AuditAction, by: User, now: datetime) -> None:
    audit_record(actor=by, action=action, project_id=case.project_id, objects=[case], now=now,
                 details={"title": case.title, "consultation": case.consultation_id})


def _consultation_check(*, project: Project, consultation: Consultation) -> None:
    if consultation.project_id != project.pk:
        raise DomainError("No such consultation in this project.", code=ErrorCode.NOT_FOUND, status=404)
    if consultation.status != Consultation.Status.RESOLVED:
        raise DomainError("Only a resolved consultation can become a case: resolve it first.",
                          code=ErrorCode.CASE_CONSULTATION_UNRESOLVED, status=409)
    if Case.objects.filter(consultation=consultation).exists():
        raise _consultation_has_case(consultation)


def _consultation_has_case(consultation: Consultation | None) -> DomainError:
    return DomainError("This consultation is already a case in the library.",
                       code=ErrorCode.CASE_CONSULTATION_TAKEN, status=409)


def case_prefill_from_consultation(consultation: Consultation) -> dict[str, str]:
    """The new-case form's text, written from a resolved consultation in the PM's language.

    The PM reads and edits it before saving: it is a first draft of the case, made of the
    item and why it was disputed, the votes and their reasons, the discussion in order and
    the agreed reading (see `consultation_case_material`).
    """
    material = consultation_case_material(consultation)
    choices = dict(Outcome.choices)
    problem = material["problem"]
    lines = [str(problem["item_text"])]
    if problem["opening_reason"]:
        lines.append(gettext("Why it was opened: %(reason)s") % {"reason": problem["opening_reason"]})
    disagreement = []
    for round_name, label in (("blind", gettext("Blind vote")), ("final", gettext("Final vote"))):
        tally = material["disagreement"][round_name]
        if tally:
            counts = ", ".join(f"{choices.get(choice, choice)} {n}" for choice, n in sorted(tally.items()))
            disagreement.append(f"{label}: {counts}")
    disagreement += [f"{r['by']} ({choices.get(r['choice'], r['choice'])}): {r['reason']}"
                     for r in material["disagreement"]["reasons"] if r["round"] == "blind" and r["reason"]]
    discussion = [f"{post['by']}: {post['text']}" for post in material["discussion"]]
    reading = material["agreed_reading"]
    return {
        "title": f"{material['question_id']} · {Truncator(str(problem['item_text'])).chars(60)}",
        "problem": "\n".join(lines)[:TEXT_MAX],
        "disagreement": "\n".join(disagreement)[:TEXT_MAX],
        "discussion": "\n".join(discussion)[:TEXT_MAX],
        "reading": str(reading["text"] or "")[:TEXT_MAX],
        "outcome": reading["outcome"] or "",
        "question": material["question_id"],
        "item_keys": material["item_key"],
        "scenes": ", ".join(material["scenes"]),
        "dimensions": material["dimension"],
        "consultation": str(consultation.pk),
    }


def case_update(*, case: Case, by: User, now: datetime, title: str, problem: str, disagreement: str,
                discussion: str, reading: str, outcome: str | None = None, item_keys: Iterable[str] = (),
                question: Question | str | None = None, scenes: Iterable[str] = (),
                dimension_codes: Iterable[str] = ()) -> Case:
    """Replace a case's text, outcome and links (its status and read count stay); all or nothing."""
    fields, items, dimensions = _case_fields(
        project=case.project, title=title, problem=problem, disagreement=disagreement, discussion=discussion,
        reading=reading, outcome=outcome, item_keys=item_keys, question=question, scenes=scenes,
        dimension_codes=dimension_codes)
    with transaction.atomic():
        for name, value in fields.items():
            setattr(case, name, value)
        case.updated_at = now
        case.save(update_fields=[*fields, "updated_at"])
        CaseItem.objects.filter(case=case).delete()
        CaseItem.objects.bulk_create([CaseItem(case=case, item_key=i.item_key, question_ref=i.question_ref)
                                      for i in items])
        case.dimensions.set(dimensions)
    return case


def case_publish(*, case: Case, by: User, now: datetime) -> Case:
    """Publish a draft case so that experts see it; publishing a published case changes nothing."""
    with transaction.atomic():
        if Case.objects.filter(pk=case.pk, status=CaseStatus.DRAFT).update(
                status=CaseStatus.PUBLISHED, published_by=by, published_at=now, updated_at=now):
            _audit_publish(case=case, action=AuditAction.CASE_PUBLISH, by=by, now=now)
    case.refresh_from_db()
    return case


def case_unpublish(*, case: Case, by: User, now: datetime) -> Case:
    """Take a case back to draft: experts no longer see it; its readers are kept."""
    with transaction.atomic():
        if Case.objects.filter(pk=case.pk, status=CaseStatus.PUBLISHED).update(
                status=CaseStatus.DRAFT, published_by=None, published_at=None, updated_at=now):
            _audit_publish(case=case, action=AuditAction.CASE_UNPUBLISH, by=by, now=now)
    case.refresh_from_db()
    return case


def case_read_record(*, case: Case, user: User, now: datetime) -> bool:
    """Count `user` as a reader of a published case, once; True when this was their first read."""
    if not case.is_published:
        return False
    try:
        with transaction.atomic():
            _, created = CaseRead.objects.get_or_create(case=case, user=user, defaults={"read_at": now})
            if created:
                Case.objects.filter(pk=case.pk).update(read_count=F("read_count") + 1)
    except IntegrityError:  # the same reader's read in a concurrent request won
        return False
    return created


def faq_ask(*, project: Project, by: User, now: datetime, question: str, dimension_codes: Iterable[str] = (),
            scenes: Iterable[str] = (), source_question: Question | str | None = None, item_key: str = "") -> FaqEntry:
    """Post a question about the guidelines; tagged by the given dimensions and scenes, or by those of
    the rubric item and question it was asked from."""
    text = _texts_clean([("question", question, FAQ_QUESTION_MAX, True)])["question"]
    the_question = _question_get(project, source_question)
    items = _items_get(project, [item_key]) if item_key else []
    dimensions = _dimensions_get(dimension_codes) or [i.dimension for i in items]
    scene_list = _scenes_clean(scenes)
    if not scene_list and the_question is not None:
        scene_list = _scenes_clean([the_question.primary_scene, the_question.secondary_scene])
    with transaction.atomic():
        entry = FaqEntry.objects.create(project=project, question=text, asked_by=by, asked_at=now,
                                        source_question=the_question, item_key=item_key.strip(), scenes=scene_list)
        entry.dimensions.set(dimensions)
        # The project's PMs hear of it; senior experts find it in the FAQ's "waiting" list.
        notification_send(users=project_managers(project).exclude(pk=by.pk), kind="faq_asked",
                          params={"project": project.name, "question": _quote(text)}, now=now,
                          link=reverse("faq_detail", args=[project.pk, entry.pk]))
    return entry


def _quote(text: str) -> str:
    return text if len(text) <= QUOTE_MAX else text[:QUOTE_MAX] + "…"


def faq_answer(*, entry: FaqEntry, by: User, now: datetime, answer: str,
               dimension_codes: Iterable[str] | None = None, scenes: Iterable[str] | None = None) -> FaqEntry:
    """Answer (or correct the answer of) a question; the asker is notified of the first answer only.

    The caller has checked that `by` may answer (`faq_can_answer`). Two answerers at once:
    both answers are kept in turn, the last one stays, and the asker hears once.
    """
    text = _texts_clean([("answer", answer, FAQ_ANSWER_MAX, True)])["answer"]
    dimensions = _dimensions_get(dimension_codes) if dimension_codes is not None else None
    scene_list = _scenes_clean(scenes) if scenes is not None else None
    with transaction.atomic():
        first = FaqEntry.objects.filter(pk=entry.pk, answered_at__isnull=True).update(
            answer=text, answered_by=by, answered_at=now)
        if not first:
            FaqEntry.objects.filter(pk=entry.pk).update(answer=text, answered_by=by)
        if dimensions is not None:
            entry.dimensions.set(dimensions)
        if scene_list is not None:
            FaqEntry.objects.filter(pk=entry.pk).update(scenes=scene_list)
        entry.refresh_from_db()
        if first and entry.asked_by_id != by.pk:
            notification_send(users=[entry.asked_by], kind="faq_answered",
                              params={"project": entry.project.name, "question": _quote(entry.question)}, now=now,
                              link=reverse("faq_detail", args=[entry.project_id, entry.pk]))
    return entry
