"""Reads of consultations, scoped to the reader: missing and not-yours give the same NotFound.

Only the project's PMs (and admins) and the consultation's participants read one. While the
vote is blind nobody sees another's vote; a participant who still holds, or may still be
given, a task of the question sees nothing of the case until they submit it.
"""
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet

from annotation import permissions
from annotation.consultations.opening import expert_may_still_judge
from annotation.consultations.services import consultation_reveal_if_due
from annotation.models import (
    Assignment,
    Consultation,
    ConsultationParticipant,
    ConsultationVote,
    ItemConsensus,
    JudgeLabel,
    JudgeRun,
    JudgeTaskResult,
    Label,
    Project,
    RubricItemSuggestion,
)
from core.errors import NotFound
from experts.models import ExpertProfile, Tier, User

Status = Consultation.Status
SENIOR_TIERS = (Tier.GOLD, Tier.PLATINUM)


@dataclass(frozen=True)
class ConsultationAccess:
    """A consultation and what the reader is in it, fetched and authorised in one call."""

    consultation: Consultation
    user: User
    manages: bool
    participant: ConsultationParticipant | None
    # A participant who may still judge the question: they see only that they must submit first.
    busy: bool


def consultation_access_for_user(user: User, consultation_id: object, *, now: datetime) -> ConsultationAccess:
    """The consultation if `user` may read it (its project's PM, an admin, or a participant), else NotFound.

    A blind vote past its deadline is revealed on the way (the beat task does the same).
    """
    try:
        consultation = (Consultation.objects.select_related("project", "rubric_item__dimension",
                                                            "task__response__question")
                        .get(pk=int(str(consultation_id))))
    except (Consultation.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such consultation.") from None
    manages = user.is_authenticated and permissions.can_manage(user, consultation.project)
    participant = None
    if not manages:
        participant = consultation.participants.filter(user_id=user.pk).first() if user.is_authenticated else None
        if participant is None or not permissions.can_annotate(user, consultation.project):
            raise NotFound("No such consultation.")
    consultation_reveal_if_due(consultation=consultation, now=now)
    busy = participant is not None and expert_may_still_judge(
        user=user, question_id=consultation.task.response.question_id)
    return ConsultationAccess(consultation=consultation, user=user, manages=manages, participant=participant,
                              busy=busy)


def consultation_list_for_project(project: Project, *, status: str = "") -> QuerySet[Consultation]:
    """The project's consultations, newest first, filtered by status when one is given."""
    rows = Consultation.objects.filter(project=project).select_related(
        "rubric_item__dimension", "task__response__question").annotate(
        n_participants=Count("participants", distinct=True),
        n_blind=Count("votes", filter=Q(votes__round=ConsultationVote.BLIND), distinct=True))
    return rows.filter(status=status) if status in Status.values else rows


def consultation_counts(project: Project) -> dict[str, int]:
    counts = dict(Consultation.objects.filter(project=project).values_list("status").annotate(n=Count("id")))
    return {s: counts.get(s, 0) for s in Status.values} | {"all": sum(counts.values())}


def consultation_list_for_expert(user: User) -> QuerySet[Consultation]:
    """The consultations `user` is asked to vote on, in projects they still annotate in."""
    rows = (Consultation.objects.filter(participants__user=user).select_related(
        "project", "rubric_item__dimension", "task__response__question")
        .annotate(my_blind=Count("votes", filter=Q(votes__user=user, votes__round=ConsultationVote.BLIND))))
    from annotation.selectors import project_list_for_user

    return rows.filter(project__in=project_list_for_user(user)).order_by("status", "-opened_at")


def invite_candidates(consultation: Consultation) -> list[dict[str, Any]]:
    """Experts of the project a PM may invite, gold and platinum first, then the others; never a participant."""
    from annotation.selectors import project_experts

    taken = set(consultation.participants.values_list("user_id", flat=True))
    profiles = {p.user_id: p for p in ExpertProfile.objects.filter(user__in=project_experts(consultation.project))}
    rows = [{"user_id": uid, "pseudonym": p.pseudonym, "tier": p.tier, "tier_label": Tier(p.tier).label,
             "senior": p.tier in SENIOR_TIERS} for uid, p in profiles.items() if uid not in taken]
    order: dict[str, int] = {t: i for i, t in enumerate([Tier.PLATINUM, Tier.GOLD, Tier.SILVER, Tier.BRONZE])}
    rows.sort(key=lambda r: (order.get(str(r["tier"]), 9), str(r["pseudonym"])))
    return rows


def _names(user_ids: set[int]) -> dict[int, str]:
    """What peers see of each user: an expert's pseudonym, a PM's username."""
    pseudonyms = dict(ExpertProfile.objects.filter(user_id__in=user_ids).values_list("user_id", "pseudonym"))
    usernames = dict(User.objects.filter(pk__in=user_ids).values_list("pk", "username"))
    return {uid: pseudonyms.get(uid) or usernames.get(uid, f"#{uid}") for uid in user_ids}


def _judge(consultation: Consultation) -> dict[str, Any] | None:
    """The latest judge run's label and reason on the item, or None."""
    label = (JudgeLabel.objects.filter(task=consultation.task, rubric_item=consultation.rubric_item)
             .select_related("run").order_by("-run__created_at", "-run_id").first())
    if label is None:
        return None
    reason = (JudgeTaskResult.objects.filter(run=label.run, task=consultation.task)
              .values_list("reason", flat=True).first())
    return {"run": label.run.name, "value": label.value, "reason": reason or "",
            "finished": label.run.status == JudgeRun.Status.DONE}


@dataclass
class ConsultationView:
    """Everything the page and the API show of one consultation to one reader."""

    access: ConsultationAccess
    notes: list[dict[str, str]] = field(default_factory=list)
    participants: list[dict[str, Any]] = field(default_factory=list)
    votes: list[dict[str, Any]] = field(default_factory=list)
    final_votes: list[dict[str, Any]] = field(default_factory=list)
    tally: dict[str, int] = field(default_factory=dict)
    final_tally: dict[str, int] = field(default_factory=dict)
    posts: list[dict[str, Any]] = field(default_factory=list)
    judge: dict[str, Any] | None = None
    my_blind: ConsultationVote | None = None
    my_final: ConsultationVote | None = None
    shown: bool = True  # False for a busy participant: nothing of the case is shown
    # The panel's labels on the item (hits of how many, the zone): to the PM always, to participants once revealed.
    panel: dict[str, Any] | None = None

    @property
    def revealed(self) -> bool:
        return self.access.consultation.status != Status.OPEN


def consultation_view(access: ConsultationAccess) -> ConsultationView:
    """The reader's view: opening notes always; votes, reasons, judge and posts only once revealed."""
    c = access.consultation
    view = ConsultationView(access=access)
    if access.busy:
        view.shown = False
        return view
    participants = list(c.participants.order_by("id"))
    votes = list(c.votes.all())
    notes = list(Label.objects.counted().filter(task=c.task, rubric_item=c.rubric_item,
                                                assignment__status=Assignment.Status.SUBMITTED)
                 .exclude(note="").order_by("assignment__submitted_at")
                 .values_list("assignment__expert_id", "note"))
    posts = list(c.posts.select_related("reply_to").prefetch_related("mentioned"))
    ids = {p.user_id for p in participants} | {v.user_id for v in votes} | {u for u, _ in notes} | {
        p.author_id for p in posts}
    names = _names(ids)
    view.notes = [{"author": names[u], "text": text} for u, text in notes]
    blind = {v.user_id: v for v in votes if v.round == ConsultationVote.BLIND}
    view.participants = [{"name": names[p.user_id], "role": p.role, "role_label": p.get_role_display(),
                          "voted": p.user_id in blind} for p in participants]
    view.my_blind = blind.get(access.user.pk)
    view.my_final = next((v for v in votes if v.round == ConsultationVote.FINAL and v.user_id == access.user.pk),
                         None)
    if access.manages or view.revealed:
        found = (ItemConsensus.objects.filter(task=c.task, rubric_item=c.rubric_item)
                 .values("hit_votes", "total_votes", "zone", "majority", "provenance").first())
        view.panel = dict(found) if found is not None else None
    if not view.revealed:
        return view

    def row(v: ConsultationVote) -> dict[str, Any]:
        return {"name": names[v.user_id], "choice": v.choice, "choice_label": v.get_choice_display(),
                "reason": v.reason, "at": v.updated_at}

    view.votes = [row(v) for v in votes if v.round == ConsultationVote.BLIND]
    view.final_votes = [row(v) for v in votes if v.round == ConsultationVote.FINAL]
    view.tally = dict(Counter(v["choice"] for v in view.votes))
    view.final_tally = dict(Counter(v["choice"] for v in view.final_votes))
    if c.project.consult_show_judge:
        view.judge = _judge(c)
    view.posts = [{"id": p.pk, "author": names[p.author_id], "text": p.text, "at": p.created_at,
                   "reply_to": p.reply_to_id, "quote": p.quote,
                   "reply_author": names.get(p.reply_to.author_id, "") if p.reply_to else "",
                   "mentioned": [u.pk for u in p.mentioned.all()]} for p in posts]
    return view


def suggestions_open_for_project(project: Project) -> QuerySet[RubricItemSuggestion]:
    return RubricItemSuggestion.objects.filter(project=project, status=RubricItemSuggestion.Status.OPEN) \
        .select_related("consultation")


def consultation_case_material(consultation: Consultation) -> dict[str, Any]:
    """What a case in the library is made of: the problem, where experts disagreed, the discussion, the reading.

    Names are pseudonyms (a PM by username). Meant for a resolved consultation; an unresolved
    one gives an empty `agreed_reading`.
    """
    c = Consultation.objects.select_related("rubric_item__dimension", "task__response__question").get(
        pk=consultation.pk)
    votes = list(c.votes.all())
    posts = list(c.posts.all())
    names = _names({v.user_id for v in votes} | {p.author_id for p in posts})
    item = c.rubric_item
    question = c.task.response.question
    return {
        "consultation_id": c.pk,
        "question_id": question.external_id,
        "item_key": item.item_key,
        "dimension": item.dimension.code,
        "dimension_name": {"zh": item.dimension.name_zh, "en": item.dimension.name_en},
        "scenes": [s for s in (question.primary_scene, question.secondary_scene) if s],
        "problem": {"item_text": item.content, "score": item.score, "trigger": c.trigger,
                    "opening_reason": c.opening_reason},
        "disagreement": {
            "blind": dict(Counter(v.choice for v in votes if v.round == ConsultationVote.BLIND)),
            "final": dict(Counter(v.choice for v in votes if v.round == ConsultationVote.FINAL)),
            "reasons": [{"by": names[v.user_id], "round": v.round, "choice": v.choice, "reason": v.reason}
                        for v in votes],
        },
        "discussion": [{"by": names[p.author_id], "text": p.text, "quote": p.quote} for p in posts],
        "agreed_reading": {"outcome": c.outcome, "category": c.reason_category, "text": c.resolution_text,
                           "resolved_at": c.resolved_at.isoformat() if c.resolved_at else None},
    }
