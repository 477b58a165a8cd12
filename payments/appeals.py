"""Appeals: an expert contests a rejection of their work or a line of their statement; someone
else decides.

Rules (issue 11, point 8):

- Who contests: the expert whose submission was rejected, or whose ledger line it is. An id
  that is not theirs is "not found", exactly like a missing one.
- What: a rejection (the assignment is `rejected`), or an earning line of their statement.
  A reversal line comes from a rejection, so it is contested as that rejection (otherwise
  the money could come back while the labels stayed out). Corrections are not contested.
- When: within the project's `appeal_window_days` of the rejection, or of the statement
  being issued (the period closing); a line of the open period can be contested until
  then. The deadline instant itself is still inside the window.
- Once: one appeal per target, ever (partial unique constraints). A decision is final.
- Who decides: a PM of the project (or an admin), or a senior expert (gold or platinum)
  who works in it; never the appellant, and never the person who made the rejection.
- Accepting a rejection appeal restores the labels (`submission_restore_labels`) and posts
  a correction equal to the earning; accepting a line appeal posts a correction of the
  line's amount or of a smaller amount the decider gives. A correction is a new ledger
  entry (`payments.ledger.ledger_post_correction`), never an edit. Denying records the
  outcome and its reason only. Either way the expert is notified (`appeal_decided`).
- Concurrency: the decision locks the appeal row first (`payments.lock_objects`); a second
  decider, or a double click, waits and then finds it decided (409), so one entry at most.
"""
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation

from django.db import IntegrityError, transaction
from django.db.models import Case, QuerySet, When
from django.urls import reverse

from annotation import permissions as annotation_permissions
from annotation.audit.services import audit_record
from annotation.models import Assignment, AuditAction, Project
from annotation.selectors import project_list_for_user
from annotation.submission.rejection import submission_restore_labels
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, Forbidden, NotFound
from experts.models import ExpertProfile, Tier, User
from experts.notifications import notification_send
from payments.ledger import earning_key, ledger_post_correction
from payments.lock_objects import appeal_lock
from payments.models import Appeal, LedgerEntry, Period

logger = logging.getLogger(__name__)

REASON_MAX = 1000
DECIDER_TIERS = (Tier.GOLD, Tier.PLATINUM)
CENT = Decimal("0.01")


class Outcome:
    ACCEPT = "accept"
    DENY = "deny"


def _error(code: ErrorCode, field: str = "", **params) -> DomainError:
    errors = [{"field": field, "code": str(code), "message": str(code.label) % params}] if field else []
    return DomainError(str(code.label) % params, code=code, errors=errors, params=params)


def _clean_reason(reason: str | None, field: str = "reason",
                  required: ErrorCode = ErrorCode.APPEAL_REASON_REQUIRED) -> str:
    text = (reason or "").strip()
    if not text:
        raise _error(required, field)
    if len(text) > REASON_MAX:
        raise _error(ErrorCode.APPEAL_REASON_TOO_LONG, field, limit=REASON_MAX)
    return text


def _int(value) -> int:
    """An id from a request; 0 (no row has it) for anything that is not a whole number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


# --- Windows ------------------------------------------------------------------------------

def rejection_deadline(assignment: Assignment, project: Project) -> datetime | None:
    """The last instant the rejection of `assignment` may be contested (None: not rejected)."""
    if assignment.rejected_at is None:
        return None
    return assignment.rejected_at + timedelta(days=project.appeal_window_days)


def line_deadline(entry: LedgerEntry, project: Project) -> datetime | None:
    """The last instant a statement line may be contested; None while its period is open."""
    period = entry.period
    if period.status != Period.Status.CLOSED or period.closed_at is None:
        return None
    return period.closed_at + timedelta(days=project.appeal_window_days)


def _window_check(deadline: datetime | None, project: Project, now: datetime) -> None:
    if deadline is not None and now > deadline:
        params = {"deadline": f"{deadline:%Y-%m-%d %H:%M} UTC", "days": project.appeal_window_days}
        raise Conflict(str(ErrorCode.APPEAL_WINDOW_CLOSED.label) % params, code=ErrorCode.APPEAL_WINDOW_CLOSED,
                       params=params)


# --- Contesting ----------------------------------------------------------------------------

def rejection_get_for_expert(expert: User, assignment_id) -> Assignment:
    assignment = (Assignment.objects.select_related("task__project")
                  .filter(pk=_int(assignment_id), expert=expert, kind=Assignment.Kind.WORK).first())
    if assignment is None or not expert.is_authenticated:
        raise NotFound("No such submission.")
    return assignment


def line_get_for_expert(expert: User, entry_id) -> LedgerEntry:
    entry = (LedgerEntry.objects.select_related("project", "period", "assignment")
             .filter(pk=_int(entry_id), expert=expert).first())
    if entry is None or not expert.is_authenticated:
        raise NotFound("No such statement line.")
    return entry


def rejection_contest_check(*, expert: User, assignment_id, now: datetime) -> Assignment:
    """The expert's rejected submission if it may be contested now; the refusal otherwise."""
    assignment = rejection_get_for_expert(expert, assignment_id)
    if Appeal.objects.filter(kind=Appeal.Kind.REJECTION, assignment=assignment).exists():
        raise Conflict(str(ErrorCode.APPEAL_EXISTS.label), code=ErrorCode.APPEAL_EXISTS)
    if assignment.status != Assignment.Status.REJECTED:
        raise Conflict(str(ErrorCode.APPEAL_NOT_CONTESTABLE.label), code=ErrorCode.APPEAL_NOT_CONTESTABLE)
    _window_check(rejection_deadline(assignment, assignment.task.project), assignment.task.project, now)
    return assignment


def line_contest_check(*, expert: User, entry_id, now: datetime) -> LedgerEntry:
    """The expert's statement line if it may be contested now; the refusal otherwise."""
    entry = line_get_for_expert(expert, entry_id)
    if Appeal.objects.filter(kind=Appeal.Kind.STATEMENT_LINE, entry=entry).exists():
        raise Conflict(str(ErrorCode.APPEAL_EXISTS.label), code=ErrorCode.APPEAL_EXISTS)
    if entry.kind == LedgerEntry.Kind.REVERSAL:
        raise Conflict(str(ErrorCode.APPEAL_USE_REJECTION.label), code=ErrorCode.APPEAL_USE_REJECTION)
    if entry.kind != LedgerEntry.Kind.EARNING or entry.amount <= 0:
        raise Conflict(str(ErrorCode.APPEAL_NOT_CONTESTABLE.label), code=ErrorCode.APPEAL_NOT_CONTESTABLE)
    _window_check(line_deadline(entry, entry.project), entry.project, now)
    return entry


def _create(**fields) -> Appeal:
    try:
        with transaction.atomic():
            return Appeal.objects.create(**fields)
    except IntegrityError:
        # A concurrent contest of the same target committed first (the partial unique constraints).
        raise Conflict(str(ErrorCode.APPEAL_EXISTS.label), code=ErrorCode.APPEAL_EXISTS) from None


def appeal_create_for_rejection(*, expert: User, assignment_id, reason: str | None, now: datetime) -> Appeal:
    """The expert contests the rejection of their submission `assignment_id`, with a reason."""
    assignment = rejection_get_for_expert(expert, assignment_id)
    text = _clean_reason(reason)
    assignment = rejection_contest_check(expert=expert, assignment_id=assignment.pk, now=now)
    appeal = _create(kind=Appeal.Kind.REJECTION, project=assignment.task.project, expert=expert,
                     assignment=assignment, reason=text, created_at=now, rejected_at=assignment.rejected_at,
                     rejected_reason=assignment.rejected_reason, rejected_text=assignment.rejected_text,
                     rejected_by=assignment.rejected_by)
    logger.info("appeal created", extra={"appeal_id": appeal.pk, "kind": appeal.kind})
    return appeal


def appeal_create_for_line(*, expert: User, entry_id, reason: str | None, now: datetime) -> Appeal:
    """The expert contests an earning line `entry_id` of their statement, with a reason."""
    entry = line_get_for_expert(expert, entry_id)
    text = _clean_reason(reason)
    entry = line_contest_check(expert=expert, entry_id=entry.pk, now=now)
    appeal = _create(kind=Appeal.Kind.STATEMENT_LINE, project=entry.project, expert=expert,
                     assignment=entry.assignment, entry=entry, reason=text, created_at=now)
    logger.info("appeal created", extra={"appeal_id": appeal.pk, "kind": appeal.kind})
    return appeal


def appeal_create(*, expert: User, kind: str, target_id, reason: str | None, now: datetime) -> Appeal:
    """One entry point for the API: `kind` rejection (target: assignment id) or statement_line (entry id)."""
    if kind == Appeal.Kind.REJECTION:
        return appeal_create_for_rejection(expert=expert, assignment_id=target_id, reason=reason, now=now)
    if kind == Appeal.Kind.STATEMENT_LINE:
        return appeal_create_for_line(expert=expert, entry_id=target_id, reason=reason, now=now)
    raise DomainError("Unknown appeal kind.", code=ErrorCode.INVALID,
                      errors=[{"field": "kind", "message": "expected rejection or statement_line"}])


# --- Who decides ---------------------------------------------------------------------------

def decider_role(user: User, project: Project) -> str | None:
    """"pm" (a PM of the project or an admin), "senior" (a gold or platinum expert in it), or None."""
    if not user.is_authenticated:
        return None
    if annotation_permissions.can_manage(user, project):
        return "pm"
    if annotation_permissions.can_annotate(user, project) and ExpertProfile.objects.filter(
            user=user, tier__in=DECIDER_TIERS).exists():
        return "senior"
    return None


def decider_projects(user: User) -> QuerySet[Project]:
    """The projects where `user` may decide appeals (archived ones included: their appeals stay open)."""
    if not user.is_authenticated:
        return Project.objects.none()
    if user.is_expert and not ExpertProfile.objects.filter(user=user, tier__in=DECIDER_TIERS).exists():
        return Project.objects.none()
    return (project_list_for_user(user) | project_list_for_user(user, archived=True)).distinct()


def may_decide(user: User, appeal: Appeal) -> bool:
    """Whether `user` may decide `appeal` (they see it in the queue either way, unless it is theirs)."""
    return appeal.rejected_by_id != user.pk and appeal.expert_id != user.pk


def appeal_get_for_decider(user: User, appeal_id) -> Appeal:
    """An appeal of a project where `user` decides, or NotFound; never the user's own appeal."""
    appeal = (Appeal.objects.select_related("project", "assignment__task__response__question", "entry", "expert")
              .filter(pk=_int(appeal_id)).first())
    if appeal is None or appeal.expert_id == user.pk or decider_role(user, appeal.project) is None:
        raise NotFound("No such appeal.")
    return appeal


def appeals_to_decide(user: User, *, project: Project | None = None) -> QuerySet[Appeal]:
    """Appeals in the projects `user` decides (one project when given), open ones first, then newest."""
    projects = decider_projects(user)
    if project is not None:
        projects = projects.filter(pk=project.pk)
    return (Appeal.objects.filter(project__in=projects).exclude(expert=user)
            .select_related("project", "assignment__task__response__question", "entry", "expert__expert_profile",
                            "correction")
            .order_by(Case(When(status=Appeal.Status.OPEN, then=0), default=1), "-created_at", "-pk"))


def appeal_list_for_expert(expert: User) -> QuerySet[Appeal]:
    return (Appeal.objects.filter(expert=expert)
            .select_related("project", "assignment__task__response__question", "entry", "correction")
            .order_by("-created_at", "-pk"))


# --- Deciding ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bound:
    """What accepting would credit: `amount` by default, at most `maximum`, in `currency`."""

    amount: Decimal
    maximum: Decimal
    currency: str
    editable: bool


def appeal_bound(appeal: Appeal) -> Bound:
    """The money an acceptance moves: the restored earning, or the contested line (the decider may lower it)."""
    if appeal.kind == Appeal.Kind.STATEMENT_LINE:
        assert appeal.entry is not None
        return Bound(amount=appeal.entry.amount, maximum=appeal.entry.amount, currency=appeal.entry.currency,
                     editable=True)
    earning = LedgerEntry.objects.filter(idempotency_key=earning_key(appeal.assignment_id)).first()
    amount = earning.amount if earning is not None else Decimal("0.00")
    currency = earning.currency if earning is not None else ""
    return Bound(amount=amount, maximum=amount, currency=currency, editable=False)


def appeal_bounds(appeal_list: list[Appeal]) -> dict[int, Bound]:
    """`appeal_bound` of each open appeal of a page, with one query for all the restored earnings."""
    rejection_ids = [a.assignment_id for a in appeal_list
                     if a.kind == Appeal.Kind.REJECTION and a.status == Appeal.Status.OPEN]
    earnings = {e.assignment_id: e for e in LedgerEntry.objects.filter(
        assignment_id__in=rejection_ids, kind=LedgerEntry.Kind.EARNING)}
    bounds = {}
    for appeal in appeal_list:
        if appeal.status != Appeal.Status.OPEN:
            continue
        if appeal.kind == Appeal.Kind.STATEMENT_LINE:
            bounds[appeal.pk] = appeal_bound(appeal)
            continue
        earning = earnings.get(appeal.assignment_id)
        bounds[appeal.pk] = Bound(amount=earning.amount if earning else Decimal("0.00"),
                                  maximum=earning.amount if earning else Decimal("0.00"),
                                  currency=earning.currency if earning else "", editable=False)
    return bounds


def _clean_amount(value, bound: Bound) -> Decimal:
    if not bound.editable or value in (None, ""):
        return bound.amount
    try:
        amount = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        amount = Decimal("-1")
    if not amount.is_finite() or amount <= 0 or amount > bound.maximum or amount != amount.quantize(CENT):
        raise _error(ErrorCode.APPEAL_AMOUNT_INVALID, "amount", max=bound.maximum, currency=bound.currency)
    return amount


def appeal_decision_check(*, actor: User, appeal: Appeal, outcome: str, reason: str | None,
                          amount=None) -> tuple[str, Decimal | None]:
    """The clean decision reason and the amount an acceptance credits, or the refusal (nothing written).

    The confirmation step of the page asks this before it shows what accepting would do.
    """
    if appeal.rejected_by_id == actor.pk:
        raise Forbidden(str(ErrorCode.APPEAL_OWN_REJECTION.label), code=ErrorCode.APPEAL_OWN_REJECTION)
    if outcome not in (Outcome.ACCEPT, Outcome.DENY):
        raise _error(ErrorCode.APPEAL_OUTCOME_UNKNOWN, "outcome")
    text = _clean_reason(reason, "decision_reason", ErrorCode.APPEAL_DECISION_REASON_REQUIRED)
    credited = _clean_amount(amount, appeal_bound(appeal)) if outcome == Outcome.ACCEPT else None
    return text, credited


def appeal_decide(*, actor: User, appeal_id, outcome: str, reason: str | None, now: datetime,
                  amount=None) -> Appeal:
    """Accept or deny an open appeal with a reason the expert reads; at most one correction, ever.

    Refused (404) to anyone who does not decide in the appeal's project and to the
    appellant; refused (403) to the person who made the contested rejection; refused (409)
    once decided. Input is checked before anything is locked, so a bad request writes nothing.
    """
    appeal = appeal_get_for_decider(actor, appeal_id)
    text, credited = appeal_decision_check(actor=actor, appeal=appeal, outcome=outcome, reason=reason,
                                           amount=amount)
    with transaction.atomic():
        appeal = appeal_lock(appeal.pk)
        if appeal.status != Appeal.Status.OPEN:
            label = Appeal.Status(appeal.status).label
            raise Conflict(str(ErrorCode.APPEAL_ALREADY_DECIDED.label) % {"status": label},
                           code=ErrorCode.APPEAL_ALREADY_DECIDED, params={"status": label})
        if outcome == Outcome.ACCEPT:
            appeal.correction = _accept(appeal=appeal, amount=credited, reason=text, actor=actor, now=now)
            appeal.status = Appeal.Status.ACCEPTED
        else:
            appeal.status = Appeal.Status.DENIED
        appeal.decided_at = now
        appeal.decided_by = actor
        appeal.decision_reason = text
        appeal.save(update_fields=["status", "decided_at", "decided_by", "decision_reason", "correction"])
        correction = appeal.correction
        audit_record(actor=actor, project_id=appeal.project_id, objects=[appeal], now=now,
                     action=AuditAction.APPEAL_ACCEPT if outcome == Outcome.ACCEPT else AuditAction.APPEAL_DENY,
                     details={"kind": appeal.kind, "expert": appeal.expert_id, "assignment": appeal.assignment_id,
                              "entry": appeal.entry_id, "reason": text,
                              "correction": correction.pk if correction is not None else None,
                              "amount": str(correction.amount) if correction is not None else None})
        _notify(appeal=appeal, now=now)
    logger.info("appeal decided", extra={"appeal_id": appeal.pk, "status": appeal.status})
    return appeal


def _accept(*, appeal: Appeal, amount: Decimal | None, reason: str, actor: User, now: datetime) -> LedgerEntry | None:
    if appeal.kind == Appeal.Kind.REJECTION:
        if not submission_restore_labels(assignment_id=appeal.assignment_id, now=now):
            raise Conflict(str(ErrorCode.APPEAL_NOT_CONTESTABLE.label), code=ErrorCode.APPEAL_NOT_CONTESTABLE)
        earning = LedgerEntry.objects.filter(idempotency_key=earning_key(appeal.assignment_id)).first()
    else:
        earning = appeal.entry
    if earning is None or amount is None or amount <= 0:
        # Work priced at nothing: the labels come back, no money moves.
        return None
    return ledger_post_correction(appeal_id=appeal.pk, earning=earning, amount=amount, reason=reason,
                                  actor=actor, now=now)


def _notify(*, appeal: Appeal, now: datetime) -> None:
    amount = appeal.correction.amount if appeal.correction is not None else ""
    notification_send(users=[appeal.expert], kind="appeal_decided", now=now, link=reverse("appeal_list"), params={
        "project": appeal.project.name, "outcome": appeal.status, "reason": appeal.decision_reason,
        "amount": str(amount), "currency": appeal.correction.currency if appeal.correction is not None else "",
    })
