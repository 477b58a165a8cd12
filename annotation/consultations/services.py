"""The life of a consultation after it opens: blind votes, the reveal, the discussion, the resolution.

Writes lock the consultation row (`consultation_lock`), so the last two blind votes cast at
once still reveal exactly once, and a resolution locks the task first (it rewrites the
task's consensus). Repeating a request changes nothing: the same blind vote, the same
final vote, the same resolution and the same invitation are accepted and return unchanged.
"""
import re
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.urls import reverse
from django.utils.text import Truncator

from annotation import permissions
from annotation.audit.services import audit_record
from annotation.consultations.opening import (
    consultation_notify_vote,
    expert_may_still_judge,
    reason_clean,
)
from annotation.lock_objects import consultation_lock, project_imports_lock, task_lock
from annotation.models import (
    Adjudication,
    AuditAction,
    Consultation,
    ConsultationParticipant,
    ConsultationPost,
    ConsultationVote,
    ItemConsensus,
    Outcome,
    Project,
    RubricItemSuggestion,
    Task,
)
from annotation.projects.rules import project_check_writable
from annotation.rubric_editing.publishing import rubric_draft_get_or_create
from annotation.selectors import project_experts, project_managers
from annotation.submission.consensus import consensus_compute
from core.after_commit import task_send_on_commit
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, Forbidden, NotFound
from experts.models import ExpertProfile, User
from experts.notifications import notification_send
from rubrics.models import RubricItem

Status = Consultation.Status
POST_MAX = 5000
QUOTE_MAX = 300
SUGGESTION_MAX = 4000
RESOLUTION_MAX = 5000
# A mention is "@" then a pseudonym (E-1A2B3C4D) or a username; it ends at a space or punctuation.
MENTION = re.compile(r"(?<![\w@])@([A-Za-z0-9][\w.\-]*[\w])")


def _link(consultation: Consultation) -> str:
    return reverse("consultation_detail", args=[consultation.pk])


def _params(consultation: Consultation) -> dict[str, str]:
    item = consultation.rubric_item
    return {"item": item.item_key, "question": item.question_ref, "project": consultation.project.name}


def _participant_users(consultation: Consultation) -> list[User]:
    ids = consultation.participants.values_list("user_id", flat=True)
    return list(User.objects.filter(pk__in=ids).order_by("pk"))


def _choice_clean(choice: object) -> str:
    if not isinstance(choice, str) or choice not in Outcome.values:
        raise DomainError("Choose hit, miss or ambiguous.", code=ErrorCode.CONSULTATION_CHOICE,
                          errors=[{"field": "choice", "code": ErrorCode.CONSULTATION_CHOICE, "message": "choice"}])
    return choice


def _reveal_locked(consultation: Consultation, *, now: datetime) -> bool:
    """Reveal the locked consultation's votes (status `revealed`) and tell its participants; False if done."""
    if consultation.status != Status.OPEN:
        return False
    consultation.status = Status.REVEALED
    consultation.revealed_at = now
    consultation.save(update_fields=["status", "revealed_at"])
    notification_send(users=_participant_users(consultation), kind="consultation_revealed",
                      params=_params(consultation), now=now, link=_link(consultation))
    return True


def consultation_reveal_if_due(*, consultation: Consultation, now: datetime) -> bool:
    """Reveal a consultation whose deadline has passed (read paths and the beat call this); idempotent."""
    if consultation.status != Status.OPEN or consultation.deadline_at > now:
        return False
    with transaction.atomic():
        locked = consultation_lock(consultation.pk)
        if locked.deadline_at > now:
            return False
        revealed = _reveal_locked(locked, now=now)
    if revealed:
        consultation.status, consultation.revealed_at = locked.status, locked.revealed_at
    return revealed


def consultations_reveal_due(*, now: datetime, project: Project | None = None) -> int:
    """Reveal every consultation (of `project`, when given) whose blind vote is past its deadline; returns how many."""
    due = Consultation.objects.filter(status=Status.OPEN, deadline_at__lte=now).select_related(
        "project", "rubric_item")
    if project is not None:
        due = due.filter(project=project)
    return sum(consultation_reveal_if_due(consultation=c, now=now) for c in due)


def consultation_reveal_now(*, pm: User, consultation: Consultation, now: datetime) -> bool:
    """A PM ends the blind vote early (someone is away); idempotent."""
    with transaction.atomic():
        return _reveal_locked(consultation_lock(consultation.pk), now=now)


def _participant(consultation: Consultation, user: User) -> ConsultationParticipant:
    participant = consultation.participants.filter(user=user).first()
    if participant is None:
        raise Forbidden("Only participants vote.", code=ErrorCode.CONSULTATION_NOT_PARTICIPANT)
    if expert_may_still_judge(user=user, question_id=consultation.task.response.question_id):
        raise Forbidden("Submit your task of this question first.", code=ErrorCode.CONSULTATION_BUSY)
    return participant


@dataclass(frozen=True)
class VoteResult:
    vote: ConsultationVote
    changed: bool
    revealed: bool


def consultation_vote(*, user: User, consultation: Consultation, choice: object, reason: object,
                      now: datetime) -> VoteResult:
    """Cast the participant's vote: the blind one while the vote is blind, else the final one.

    A blind vote is final once cast (the same vote again changes nothing; another one is a
    conflict). The final vote changes until the resolution. The last blind vote reveals them all.
    """
    clean_choice = _choice_clean(choice)
    clean_reason = reason_clean(reason, required=True)
    project_check_writable(consultation.project)
    with transaction.atomic():
        locked = consultation_lock(consultation.pk)
        if locked.status == Status.RESOLVED:
            raise Conflict("Resolved.", code=ErrorCode.CONSULTATION_RESOLVED)
        if locked.status == Status.OPEN and locked.deadline_at <= now:
            _reveal_locked(locked, now=now)
        _participant(locked, user)
        round_ = ConsultationVote.BLIND if locked.status == Status.OPEN else ConsultationVote.FINAL
        vote = ConsultationVote.objects.filter(consultation=locked, user=user, round=round_).first()
        if vote is not None and (vote.choice, vote.reason) == (clean_choice, clean_reason):
            return VoteResult(vote=vote, changed=False, revealed=False)
        if vote is not None and round_ == ConsultationVote.BLIND:
            raise Conflict("The blind vote is cast.", code=ErrorCode.CONSULTATION_VOTED)
        if vote is None:
            vote = ConsultationVote.objects.create(consultation=locked, user=user, round=round_,
                                                   choice=clean_choice, reason=clean_reason, cast_at=now,
                                                   updated_at=now)
        else:
            vote.choice, vote.reason, vote.updated_at = clean_choice, clean_reason, now
            vote.save(update_fields=["choice", "reason", "updated_at"])
        revealed = False
        if round_ == ConsultationVote.BLIND:
            voted = locked.votes.filter(round=ConsultationVote.BLIND).count()
            if voted >= locked.participants.count():
                revealed = _reveal_locked(locked, now=now)
    consultation.status, consultation.revealed_at = locked.status, locked.revealed_at
    return VoteResult(vote=vote, changed=True, revealed=revealed)


def consultation_invite(*, pm: User, consultation: Consultation, expert_id: object, now: datetime) -> bool:
    """Ask one more expert of the project to vote (seniors first in the picker); False when already asked.

    Refused for an expert who still holds, or may still be given, a task of the question.
    """
    project = consultation.project
    try:
        expert = project_experts(project).get(pk=int(str(expert_id)))
    except (User.DoesNotExist, TypeError, ValueError):
        raise DomainError("Not an expert of the project.", code=ErrorCode.MEMBER_UNKNOWN,
                          params={"name": str(expert_id)}) from None
    project_check_writable(project)
    with transaction.atomic():
        locked = consultation_lock(consultation.pk)
        if locked.status == Status.RESOLVED:
            raise Conflict("Resolved.", code=ErrorCode.CONSULTATION_RESOLVED)
        if locked.participants.filter(user=expert).exists():
            return False
        if expert_may_still_judge(user=expert, question_id=consultation.task.response.question_id):
            name = ExpertProfile.objects.filter(user=expert).values_list("pseudonym", flat=True).first()
            raise Conflict("The expert may still judge this question.", code=ErrorCode.CONSULTATION_INVITEE_BUSY,
                           params={"name": name or expert.username})
        ConsultationParticipant.objects.create(consultation=locked, user=expert,
                                               role=ConsultationParticipant.Role.INVITED, invited_by=pm,
                                               added_at=now)
        consultation_notify_vote(consultation=consultation, users=[expert], now=now)
    return True


def _mention_candidates(consultation: Consultation) -> dict[str, User]:
    """Who may be mentioned, by lowercased pseudonym and username: participants and the project's PMs."""
    users = _participant_users(consultation) + list(project_managers(consultation.project))
    pseudonyms = dict(ExpertProfile.objects.filter(user__in=users).values_list("user_id", "pseudonym"))
    found: dict[str, User] = {}
    for user in users:
        found[user.username.lower()] = user
        if user.pk in pseudonyms:
            found[pseudonyms[user.pk].lower()] = user
    return found


def mentions_parse(text: str, candidates: dict[str, User]) -> list[User]:
    """The distinct users named with @ in `text`, in order of first mention; unknown names are plain text."""
    seen: dict[int, User] = {}
    for token in MENTION.findall(text):
        user = candidates.get(token.lower())
        if user is not None:
            seen.setdefault(user.pk, user)
    return list(seen.values())


def _may_discuss(consultation: Consultation, user: User) -> None:
    if permissions.can_manage(user, consultation.project):
        return
    _participant(consultation, user)


def consultation_post(*, user: User, consultation: Consultation, text: object, reply_to: object = None,
                      quote: object = "", now: datetime) -> ConsultationPost:
    """Add a message to the discussion (after the reveal, until the resolution), notifying who it @mentions.

    `reply_to` is a post of the same consultation; `quote` an excerpt of it (its opening words
    when the excerpt is not found in it).
    """
    clean = text.strip() if isinstance(text, str) else ""
    if not clean or len(clean) > POST_MAX:
        raise DomainError("Write the message.", code=ErrorCode.CONSULTATION_TEXT, params={"max": POST_MAX},
                          errors=[{"field": "text", "code": ErrorCode.CONSULTATION_TEXT, "params": {"max": POST_MAX},
                                   "message": "required"}])
    project_check_writable(consultation.project)
    if consultation.status == Status.OPEN:
        raise Conflict("Not revealed.", code=ErrorCode.CONSULTATION_NOT_REVEALED)
    if consultation.status == Status.RESOLVED:
        raise Conflict("Resolved.", code=ErrorCode.CONSULTATION_RESOLVED)
    _may_discuss(consultation, user)
    parent = None
    excerpt = ""
    if reply_to not in (None, ""):
        try:
            parent = consultation.posts.get(pk=int(str(reply_to)))
        except (ConsultationPost.DoesNotExist, TypeError, ValueError):
            raise NotFound("No such post.") from None
        wanted = quote.strip() if isinstance(quote, str) else ""
        excerpt = wanted[:QUOTE_MAX] if wanted and wanted in parent.text else Truncator(parent.text).chars(120)
    mentioned = [u for u in mentions_parse(clean, _mention_candidates(consultation)) if u.pk != user.pk]
    with transaction.atomic():
        post = ConsultationPost.objects.create(consultation=consultation, author=user, text=clean,
                                               reply_to=parent, quote=excerpt, created_at=now)
        if mentioned:
            post.mentioned.set(mentioned)
            author = ExpertProfile.objects.filter(user=user).values_list("pseudonym", flat=True).first()
            notification_send(users=mentioned, kind="mention", now=now, link=f"{_link(consultation)}#post-{post.pk}",
                              params={**_params(consultation), "author": author or user.username,
                                      "excerpt": Truncator(clean).chars(80)})
    return post


@dataclass(frozen=True)
class ResolveResult:
    consultation: Consultation
    changed: bool
    suggestion: RubricItemSuggestion | None


def consultation_resolve(*, pm: User, consultation: Consultation, outcome: object, category: object, text: object,
                         suggested_text: object = "", now: datetime) -> ResolveResult:
    """Set the item's final label: the outcome (hit, miss, ambiguous) with a reason category and text.

    Writes the task item's `Adjudication` and rewrites the task's consensus (provenance
    `adjudicated`; "ambiguous" leaves the item without a majority, out of agreement and
    scores). A guideline gap also files the suggested wording on the rubric item. Resolving
    again with the same answer changes nothing; with another answer it is a conflict.
    """
    clean_outcome = _choice_clean(outcome)
    if not isinstance(category, str) or category not in Consultation.ReasonCategory.values:
        raise DomainError("Choose a reason category.", code=ErrorCode.CONSULTATION_CATEGORY,
                          errors=[{"field": "category", "code": ErrorCode.CONSULTATION_CATEGORY,
                                   "message": "choice"}])
    clean_text = reason_clean(text, required=True, limit=RESOLUTION_MAX)
    suggestion_text = suggested_text.strip() if isinstance(suggested_text, str) else ""
    gap = category == Consultation.ReasonCategory.GUIDELINE_GAP
    if gap and (not suggestion_text or len(suggestion_text) > SUGGESTION_MAX):
        raise DomainError("Suggest the wording.", code=ErrorCode.SUGGESTION_TEXT, params={"max": SUGGESTION_MAX},
                          errors=[{"field": "suggested_text", "code": ErrorCode.SUGGESTION_TEXT,
                                   "params": {"max": SUGGESTION_MAX}, "message": "required"}])
    project_check_writable(consultation.project)
    with transaction.atomic():
        task = task_lock(consultation.task_id)
        locked = consultation_lock(consultation.pk)
        if locked.status == Status.RESOLVED:
            same = (locked.outcome, locked.reason_category, locked.resolution_text) == (
                clean_outcome, category, clean_text)
            if not same:
                raise Conflict("Resolved.", code=ErrorCode.CONSULTATION_RESOLVED)
            return ResolveResult(consultation=locked, changed=False, suggestion=None)
        locked.status = Status.RESOLVED
        locked.revealed_at = locked.revealed_at or now
        locked.resolved_at, locked.resolved_by = now, pm
        locked.outcome, locked.reason_category, locked.resolution_text = clean_outcome, category, clean_text
        locked.save(update_fields=["status", "revealed_at", "resolved_at", "resolved_by", "outcome",
                                   "reason_category", "resolution_text"])
        ambiguous = clean_outcome == Outcome.AMBIGUOUS
        Adjudication.objects.update_or_create(
            task=task, rubric_item_id=locked.rubric_item_id,
            defaults={"value": None if ambiguous else int(clean_outcome == Outcome.HIT), "ambiguous": ambiguous,
                      "consultation": locked, "decided_by": pm, "decided_at": now})
        if task.status == Task.Status.COMPLETE or ItemConsensus.objects.filter(task=task).exists():
            # An unfinished task gets the verdict when its consensus is first written.
            consensus_compute(task=task, now=now)
            task_send_on_commit("annotation.agreement_report_request", project_id=task.project_id)
        suggestion = None
        if gap:
            suggestion = RubricItemSuggestion.objects.create(
                project_id=locked.project_id, item_key=consultation.rubric_item.item_key, text=suggestion_text,
                consultation=locked, created_at=now)
        audit_record(actor=pm, action=AuditAction.CONSULTATION_RESOLVE, project_id=locked.project_id, now=now,
                     objects=[locked], details={"task_id": task.pk, "item_key": consultation.rubric_item.item_key,
                                                "outcome": clean_outcome, "category": category})
        notification_send(users=_participant_users(locked), kind="consultation_resolved", now=now,
                          link=_link(locked), params={**_params(consultation), "outcome": clean_outcome})
    return ResolveResult(consultation=locked, changed=True, suggestion=suggestion)


def _suggestion_get(project: Project, suggestion_id: object) -> RubricItemSuggestion:
    try:
        return RubricItemSuggestion.objects.get(pk=int(str(suggestion_id)), project=project)
    except (RubricItemSuggestion.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such suggestion.") from None


def rubric_suggestion_take(*, project: Project, suggestion_id: object, by: User, now: datetime) -> RubricItem:
    """Put the suggested wording into the draft version's item (starting the draft when there is none)."""
    with transaction.atomic():
        project_imports_lock(project=project)
        project_check_writable(project)
        suggestion = _suggestion_get(project, suggestion_id)
        if suggestion.status != RubricItemSuggestion.Status.OPEN:
            raise Conflict("Decided.", code=ErrorCode.SUGGESTION_DECIDED)
        draft = rubric_draft_get_or_create(project=project)
        item = RubricItem.objects.filter(version=draft, item_key=suggestion.item_key).first()
        if item is None:
            raise Conflict("The item is gone.", code=ErrorCode.SUGGESTION_ITEM_GONE,
                           params={"key": suggestion.item_key})
        item.content = suggestion.text
        item.save(update_fields=["content"])
        suggestion.status, suggestion.decided_at, suggestion.decided_by = (
            RubricItemSuggestion.Status.TAKEN, now, by)
        suggestion.save(update_fields=["status", "decided_at", "decided_by"])
    return item


def rubric_suggestion_dismiss(*, project: Project, suggestion_id: object, by: User, now: datetime) -> bool:
    """Set a suggestion aside; False when it was already decided."""
    with transaction.atomic():
        suggestion = _suggestion_get(project, suggestion_id)
        changed = RubricItemSuggestion.objects.filter(pk=suggestion.pk, status=RubricItemSuggestion.Status.OPEN) \
            .update(status=RubricItemSuggestion.Status.DISMISSED, decided_at=now, decided_by=by)
    return bool(changed)
