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
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import DateTimeField, DecimalField, Exists, Model, OuterRef, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from annotation.models import Assignment
from core.sql_insert import insert_unless_conflict
from experts.models import Tier, User
from payments.lock_objects import payment_settings_lock, period_share_if_open
from payments.models import LedgerEntry, PaymentSettings, Period, PriceRule, TierMultiplier
from payments.periods import next_period_bounds
from payments.pricing import default_currency, quote_from_parts, tier_or_default

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


def _insert(entry: LedgerEntry, *, now: datetime, period_id: int | None = None) -> LedgerEntry:
    """Write `entry` into the period open at `now` (`period_id`: the one a read just found), once.

    One INSERT ... ON CONFLICT on the idempotency key, so a posting that loses a race to a
    concurrent one of the same key (or repeats it) returns the row that won, without a
    savepoint. Joins the caller's transaction; the period's share lock is held until it commits.
    """
    with transaction.atomic(savepoint=False):
        if period_id is None or not period_share_if_open(period_id):
            period_id = period_for_posting(project_id=entry.project_id, at=now).pk
        entry.period_id = period_id
        entry.posted_at = now
        if insert_unless_conflict(entry, conflict="idempotency_key") is not None:
            return entry
    existing = LedgerEntry.objects.filter(idempotency_key=entry.idempotency_key).first()
    if existing is None:
        raise RuntimeError(f"ledger entry {entry.idempotency_key} neither inserted nor found")
    return existing


# Everything an earning needs, in one statement: the assignment and its question's difficulty,
# the price rule and tier multiplier in force at submission (ids looked up as ORDER BY ... LIMIT 1
# subqueries, their rows joined), the project's currency, the entry if it is already posted, and
# the open period it would go to. Plain SQL that PostgreSQL and SQLite both run: the ORM would spend
# more CPU compiling the nine joins and subqueries than the database spends running them.
_EARNING_INPUTS_SQL = """SELECT a.status, a.kind, a.expert_id, a.tier_at_submission, a.submitted_at,
    t.project_id, q.difficulty, r.id, r.amount, r.currency, m.id, m.multiplier, s.currency,
    (SELECT e.id FROM {entry} e WHERE e.idempotency_key = %s),
    (SELECT p.id FROM {period} p WHERE p.project_id = t.project_id AND p.status = %s AND p.ends_at > %s
     ORDER BY p.starts_at, p.id LIMIT 1)
FROM {assignment} a
JOIN {task} t ON t.id = a.task_id
JOIN {response} rs ON rs.id = t.response_id
JOIN {question} q ON q.id = rs.question_id
LEFT JOIN {rule} r ON r.id = (
    SELECT r2.id FROM {rule} r2 WHERE r2.project_id = t.project_id AND r2.difficulty = q.difficulty
        AND r2.effective_from <= a.submitted_at ORDER BY r2.effective_from DESC, r2.id DESC LIMIT 1)
LEFT JOIN {factor} m ON m.id = (
    SELECT m2.id FROM {factor} m2 WHERE m2.project_id = t.project_id AND m2.effective_from <= a.submitted_at
        AND m2.tier = CASE WHEN a.tier_at_submission IN ({tiers}) THEN a.tier_at_submission ELSE %s END
    ORDER BY m2.effective_from DESC, m2.id DESC LIMIT 1)
LEFT JOIN {settings} s ON s.project_id = t.project_id
WHERE a.id = %s"""


def _earning_inputs_sql() -> str:
    from annotation.models import Question, Response, Task

    return _EARNING_INPUTS_SQL.format(
        entry=LedgerEntry._meta.db_table, period=Period._meta.db_table, assignment=Assignment._meta.db_table,
        task=Task._meta.db_table, response=Response._meta.db_table, question=Question._meta.db_table,
        rule=PriceRule._meta.db_table, factor=TierMultiplier._meta.db_table,
        settings=PaymentSettings._meta.db_table, tiers=", ".join(["%s"] * len(Tier.values)))


def _from_db(model: type[Model], field: str, value: Any) -> Any:
    """A raw column value as the ORM would give it: SQLite returns decimals as floats, datetimes as text."""
    if value is None:
        return None
    model_field = model._meta.get_field(field)
    if isinstance(model_field, DecimalField):
        exponent = Decimal(1).scaleb(-(model_field.decimal_places or 0))
        return model_field.to_python(value).quantize(exponent)
    if isinstance(model_field, DateTimeField) and not isinstance(value, datetime):
        value = parse_datetime(str(value))
    if isinstance(value, datetime) and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value


def ledger_post_earning(*, assignment_id: int, now: datetime) -> LedgerEntry | None:
    """Post the earning of a submitted work assignment, once; return it.

    Returns the entry already posted when there is one, and None when nothing is
    payable: the assignment is gone, not submitted, or a calibration assignment.
    Three statements when it posts: the read above, the period's share lock, the insert.
    """
    key = earning_key(assignment_id)
    with connection.cursor() as cursor:
        cursor.execute(_earning_inputs_sql(), [
            key, Period.Status.OPEN.value, connection.ops.adapt_datetimefield_value(now), *Tier.values,
            Tier.BRONZE.value, assignment_id])
        row = cursor.fetchone()
    if row is None:
        return None
    (status, kind, expert_id, tier, submitted_at, project_id, difficulty, rule_id, rule_amount, rule_currency,
     factor_id, factor_multiplier, currency, posted_id, period_id) = row
    if posted_id is not None:
        return LedgerEntry.objects.get(pk=posted_id)
    # A rejected submission did earn: its reversal stands beside the earning.
    if status not in (Assignment.Status.SUBMITTED, Assignment.Status.REJECTED) or kind != Assignment.Kind.WORK:
        return None
    submitted_at = _from_db(Assignment, "submitted_at", submitted_at)
    quote = quote_from_parts(
        difficulty=difficulty, tier=tier_or_default(tier),
        currency=currency or default_currency(),
        rule=None if rule_id is None else (rule_id, _from_db(PriceRule, "amount", rule_amount), rule_currency),
        factor=None if factor_id is None else (factor_id, _from_db(TierMultiplier, "multiplier", factor_multiplier)))
    entry = _insert(LedgerEntry(
        idempotency_key=key, project_id=project_id, kind=LedgerEntry.Kind.EARNING, expert_id=expert_id,
        assignment_id=assignment_id, amount=quote.amount, currency=quote.currency, difficulty=quote.difficulty,
        tier=quote.tier, base_price=quote.base_price, multiplier=quote.multiplier,
        price_rule_id=quote.price_rule_id, tier_multiplier_id=quote.tier_multiplier_id, submitted_at=submitted_at,
    ), now=now, period_id=period_id)
    logger.info("earning posted", extra={"assignment_id": assignment_id, "entry_id": entry.pk})
    return entry


def _priced_like(earning: LedgerEntry, *, key: str, kind: str, amount: Decimal, reason: str,
                 created_by: User | None, reverses: LedgerEntry | None = None) -> LedgerEntry:
    """A new entry for the earning's expert and assignment, priced like the earning."""
    return LedgerEntry(
        idempotency_key=key, kind=kind, project_id=earning.project_id, expert_id=earning.expert_id,
        assignment_id=earning.assignment_id, amount=amount, currency=earning.currency,
        difficulty=earning.difficulty, tier=earning.tier, base_price=earning.base_price,
        multiplier=earning.multiplier, price_rule_id=earning.price_rule_id,
        tier_multiplier_id=earning.tier_multiplier_id, submitted_at=earning.submitted_at, reverses=reverses,
        reason=reason, created_by=created_by)


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
        entry = _insert(_priced_like(earning, key=reversal_key(assignment_id), kind=LedgerEntry.Kind.REVERSAL,
                                     amount=-earning.amount, reverses=earning, reason=reason, created_by=actor),
                        now=now)
    logger.info("reversal posted", extra={"assignment_id": assignment_id, "entry_id": entry.pk})
    return entry


def ledger_post_correction(*, appeal_id: int, earning: LedgerEntry, amount: Decimal, reason: str,
                           actor: User | None, now: datetime) -> LedgerEntry:
    """Post the correction of an accepted appeal: a positive entry beside the earning it restores
    or corrects, priced like it, in the period open at `now`; once per appeal (its key)."""
    reason = reason.strip()[:MAX_REASON_CHARS]
    if amount <= 0 or not reason:
        raise ValueError("a correction needs a positive amount and a reason")
    entry = _insert(_priced_like(earning, key=correction_key(appeal_id), kind=LedgerEntry.Kind.ADJUSTMENT,
                                 amount=amount, reason=reason, created_by=actor), now=now)
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
