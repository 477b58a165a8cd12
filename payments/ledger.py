"""Append-only posting to the ledger: one earning per paid submission, at most one reversal.

Every entry has a unique idempotency key (`earning:<assignment id>`,
`reversal:<assignment id>`), so posting the same thing twice, or from two workers at
once, leaves one row: the second insert fails on the key and returns the first row.

Which period an entry belongs to is decided when it is inserted: the earliest open
period of the project that ends after the posting instant, share-locked while the entry
is written; when there is none, a new period is opened on the project's grid. A
settlement locks its period exclusively, so it waits for entries being written into
it, and an entry posted while (or after) its natural period closes lands in the next
one. That makes "work submitted during settlement" and "a reversal after settlement"
land in the next period exactly, and a statement never misses or repeats an entry.

What is paid: a submitted assignment of kind `work` (silent control tasks included);
calibration is not paid. The price is the one in force at `submitted_at`, for the
tier recorded at submission (`payments.pricing`).
"""
import logging
from datetime import datetime
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, QuerySet

from annotation.models import Assignment
from experts.models import User
from payments.lock_objects import payment_settings_lock, period_share_if_open
from payments.models import LedgerEntry, Period
from payments.periods import next_period_bounds
from payments.pricing import price_quote

logger = logging.getLogger(__name__)

# Each retry means a period closed between finding it and share-locking it; a handful
# of closes in a row cannot happen, so running out is a bug worth an exception.
ROUTING_ATTEMPTS = 5
SWEEP_BATCH = 500
MAX_REASON_CHARS = 500


def earning_key(assignment_id: int) -> str:
    return f"earning:{assignment_id}"


def reversal_key(assignment_id: int) -> str:
    return f"reversal:{assignment_id}"


def correction_key(appeal_id: int) -> str:
    return f"appeal:{appeal_id}"


def _open_period_after(project_id: int, at: datetime) -> Period | None:
    return (Period.objects.filter(project_id=project_id, status=Period.Status.OPEN, ends_at__gt=at)
            .order_by("starts_at", "pk").first())


def period_for_posting(*, project_id: int, at: datetime) -> Period:
    """The open period an entry posted at `at` goes to, share-locked until the caller commits.

    Must run inside a transaction. Opening a new period takes the project's settings
    lock first (lock order, see `payments.lock_objects`).
    """
    for _attempt in range(ROUTING_ATTEMPTS):
        period = _open_period_after(project_id, at)
        if period is not None:
            if period_share_if_open(period.pk):
                return period
            continue
        payment_settings = payment_settings_lock(project_id)
        period = _open_period_after(project_id, at)
        if period is not None:
            if period_share_if_open(period.pk):
                return period
            continue
        latest_end = (Period.objects.filter(project_id=project_id).order_by("-ends_at")
                      .values_list("ends_at", flat=True).first())
        starts_at, ends_at = next_period_bounds(payment_settings=payment_settings, at=at, latest_end=latest_end)
        return Period.objects.create(project_id=project_id, starts_at=starts_at, ends_at=ends_at)
    raise RuntimeError(f"no open period could be locked for project {project_id}")


def _insert(*, key: str, project_id: int, now: datetime, fields: dict) -> LedgerEntry:
    with transaction.atomic():
        period = period_for_posting(project_id=project_id, at=now)
        try:
            with transaction.atomic():
                return LedgerEntry.objects.create(idempotency_key=key, project_id=project_id, period=period,
                                                   posted_at=now, **fields)
        except IntegrityError:
            # A concurrent posting of the same key committed first; its row is the entry.
            existing = LedgerEntry.objects.filter(idempotency_key=key).first()
            if existing is None:
                raise
            return existing


def ledger_post_earning(*, assignment_id: int, now: datetime) -> LedgerEntry | None:
    """Post the earning of a submitted work assignment, once; return it.

    Returns the entry already posted when there is one, and None when nothing is
    payable: the assignment is gone, not submitted, or a calibration assignment.
    """
    existing = LedgerEntry.objects.filter(idempotency_key=earning_key(assignment_id)).first()
    if existing is not None:
        return existing
    assignment = (Assignment.objects.select_related("task__response__question")
                  .filter(pk=assignment_id).first())
    # A rejected submission did earn: its reversal stands beside the earning.
    if assignment is None or assignment.status not in (Assignment.Status.SUBMITTED, Assignment.Status.REJECTED):
        return None
    if assignment.kind != Assignment.Kind.WORK:
        return None
    project_id = assignment.task.project_id
    quote = price_quote(project_id=project_id, difficulty=assignment.task.response.question.difficulty,
                        tier=assignment.tier_at_submission, at=assignment.submitted_at)
    entry = _insert(key=earning_key(assignment_id), project_id=project_id, now=now, fields={
        "kind": LedgerEntry.Kind.EARNING, "expert_id": assignment.expert_id, "assignment_id": assignment_id,
        "amount": quote.amount, "currency": quote.currency, "difficulty": quote.difficulty, "tier": quote.tier,
        "base_price": quote.base_price, "multiplier": quote.multiplier, "price_rule_id": quote.price_rule_id,
        "tier_multiplier_id": quote.tier_multiplier_id, "submitted_at": assignment.submitted_at,
    })
    logger.info("earning posted", extra={"assignment_id": assignment_id, "entry_id": entry.pk})
    return entry


def ledger_post_reversal(*, assignment_id: int, reason: str, actor: User | None, now: datetime) -> LedgerEntry:
    """Post the reversal of an assignment's earning with `reason`; return it (or the one already posted).

    The earning is posted first when it was not yet (a rejection may overtake the
    posting task), in the same transaction, so a reversal never stands alone. Raises
    ValueError when the assignment earns nothing (not submitted, calibration).
    """
    existing = LedgerEntry.objects.filter(idempotency_key=reversal_key(assignment_id)).first()
    if existing is not None:
        return existing
    reason = reason.strip()[:MAX_REASON_CHARS]
    if not reason:
        raise ValueError("a reversal needs a reason")
    with transaction.atomic():
        earning = ledger_post_earning(assignment_id=assignment_id, now=now)
        if earning is None:
            raise ValueError(f"assignment {assignment_id} has no earning to reverse")
        entry = _insert(key=reversal_key(assignment_id), project_id=earning.project_id, now=now, fields={
            "kind": LedgerEntry.Kind.REVERSAL, "expert_id": earning.expert_id, "assignment_id": assignment_id,
            "amount": -earning.amount, "currency": earning.currency, "difficulty": earning.difficulty,
            "tier": earning.tier, "base_price": earning.base_price, "multiplier": earning.multiplier,
            "price_rule_id": earning.price_rule_id, "tier_multiplier_id": earning.tier_multiplier_id,
            "submitted_at": earning.submitted_at, "reverses": earning, "reason": reason, "created_by": actor,
        })
    logger.info("reversal posted", extra={"assignment_id": assignment_id, "entry_id": entry.pk})
    return entry


def ledger_post_correction(*, appeal_id: int, earning: LedgerEntry, amount: Decimal, reason: str,
                           actor: User | None, now: datetime) -> LedgerEntry:
    """Post the correction of an accepted appeal: a positive entry beside the earning it restores
    or corrects, priced like it, in the period open at `now`; once per appeal (its key)."""
    reason = reason.strip()[:MAX_REASON_CHARS]
    if amount <= 0 or not reason:
        raise ValueError("a correction needs a positive amount and a reason")
    entry = _insert(key=correction_key(appeal_id), project_id=earning.project_id, now=now, fields={
        "kind": LedgerEntry.Kind.ADJUSTMENT, "expert_id": earning.expert_id, "assignment_id": earning.assignment_id,
        "amount": amount, "currency": earning.currency, "difficulty": earning.difficulty, "tier": earning.tier,
        "base_price": earning.base_price, "multiplier": earning.multiplier, "price_rule_id": earning.price_rule_id,
        "tier_multiplier_id": earning.tier_multiplier_id, "submitted_at": earning.submitted_at, "reason": reason,
        "created_by": actor,
    })
    logger.info("appeal correction posted", extra={"appeal_id": appeal_id, "entry_id": entry.pk})
    return entry


def assignments_missing_earning() -> QuerySet[Assignment]:
    """Submitted work assignments without an earning: what the sweep posts and reconciliation reports."""
    earned = LedgerEntry.objects.filter(assignment_id=OuterRef("pk"), kind=LedgerEntry.Kind.EARNING)
    return (Assignment.objects.filter(status=Assignment.Status.SUBMITTED, kind=Assignment.Kind.WORK)
            .exclude(Exists(earned)))


def earnings_sweep(*, now: datetime, limit: int = SWEEP_BATCH) -> int:
    """Post the earnings a lost or failed task left out; returns how many were posted."""
    posted = 0
    for assignment_id in assignments_missing_earning().order_by("pk").values_list("pk", flat=True)[:limit]:
        if ledger_post_earning(assignment_id=assignment_id, now=now) is not None:
            posted += 1
    if posted:
        logger.warning("sweep posted missing earnings", extra={"count": posted})
    return posted
