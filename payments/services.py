"""Settlement, payouts and rejections: every payments write that is not a single ledger posting.

Settlement closes one period of one project into one statement per expert with entries
in it, and one payout batch. It locks the project's payment settings and then the
period (see `payments.lock_objects`), so a second run, or a second worker at the same
moment, finds the period closed and returns what the first one wrote; unique
constraints on (period, expert) and on the batch's period back this up. Periods of a
project close in order.

Closing is due when a period's end has passed (the beat job); an admin may also close
the current period early ("close now"), which ends it at that instant; the rest of its
grid slot becomes the next period.
"""
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Count, Sum
from django.urls import reverse
from django.utils import timezone

from annotation import permissions as annotation_permissions
from annotation.audit.services import audit_record
from annotation.models import Assignment, AuditAction, Project, WebhookEvent
from annotation.submission.rejection import submission_reject_labels
from annotation.webhooks.services import webhook_emit
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, NotFound
from experts.models import User
from experts.notifications import notification_send
from payments import permissions
from payments.ledger import ledger_post_reversal, reversal_key
from payments.lock_objects import payment_settings_lock, payout_batch_lock, period_lock
from payments.models import Appeal, Currency, LedgerEntry, PaymentSettings, PayoutBatch, Period, Statement

logger = logging.getLogger(__name__)

ZERO = Decimal("0.00")
MAX_REFERENCE_CHARS = 200


@dataclass(frozen=True)
class Settlement:
    period: Period
    statements: list[Statement]
    batch: PayoutBatch
    created: bool  # False when the period had been closed already


def _settlement_of(period: Period) -> Settlement:
    return Settlement(period=period, statements=list(period.statements.order_by("expert_id")),
                      batch=PayoutBatch.objects.get(period=period), created=False)


def _statement_for(*, period: Period, expert_id: int, total: Decimal, count: int, currency: str,
                   now: datetime) -> Statement:
    previous = (Statement.objects.filter(project_id=period.project_id, expert_id=expert_id)
                .order_by("-period__starts_at", "-pk").first())
    carried_in = previous.carried_out if previous else ZERO
    balance = total + carried_in
    return Statement(
        period=period, project_id=period.project_id, expert_id=expert_id, currency=currency, total=total,
        entry_count=count, previous=previous, carried_in=carried_in, payable=max(balance, ZERO),
        carried_out=min(balance, ZERO), created_at=now,
    )


def statement_settle_period(*, period_id: int, now: datetime, actor: User | None = None,
                            close_early: bool = False) -> Settlement:
    """Close period `period_id`: one statement per expert with entries in it, and a payout batch.

    Settling a closed period returns its statements and batch unchanged (created=False).
    Refused while an earlier period of the project is open, and before the period's end
    unless `close_early`, which ends the period at `now`.
    """
    project_id = Period.objects.filter(pk=period_id).values_list("project_id", flat=True).first()
    if project_id is None:
        raise NotFound("No such period.")
    with transaction.atomic():
        payment_settings = payment_settings_lock(project_id)
        period = period_lock(period_id)
        if period.status == Period.Status.CLOSED:
            return _settlement_of(period)
        if Period.objects.filter(project_id=project_id, status=Period.Status.OPEN,
                                 starts_at__lt=period.starts_at).exists():
            raise Conflict("An earlier period of this project is still open; close it first.",
                           code="earlier_period_open")
        if now < period.ends_at:
            if not close_early:
                raise Conflict("This period has not ended yet.", code="period_not_due")
            if now <= period.starts_at:
                raise Conflict("This period has not started yet.", code="period_not_started")
            period.ends_at = now
        currencies = set(period.entries.values_list("currency", flat=True).distinct())
        if currencies - {payment_settings.currency}:
            raise Conflict("Entries of this period are in another currency than the project's.",
                           code="currency_mismatch")
        rows = (period.entries.values("expert_id").annotate(total=Sum("amount"), count=Count("pk"))
                .order_by("expert_id"))
        statements = Statement.objects.bulk_create(
            _statement_for(period=period, expert_id=row["expert_id"], total=row["total"], count=row["count"],
                           currency=payment_settings.currency, now=now)
            for row in rows
        )
        batch = PayoutBatch.objects.create(
            period=period, project_id=project_id, currency=payment_settings.currency,
            total=sum((s.payable for s in statements), ZERO), statement_count=len(statements), created_at=now,
        )
        period.status = Period.Status.CLOSED
        period.closed_at = now
        period.closed_by = actor
        period.save(update_fields=["ends_at", "status", "closed_at", "closed_by"])
        # A settlement by the beat schedule has no actor; it is logged all the same.
        audit_record(actor=actor, action=AuditAction.PERIOD_SETTLE, project_id=project_id, objects=[period], now=now,
                     details={"statements": len(statements), "payout_batch_id": batch.pk, "total": batch.total,
                              "currency": batch.currency, "close_early": close_early})
        _statements_notify(period=period, statements=statements, now=now)
        if statements:
            webhook_emit(project_id=project_id, event=WebhookEvent.STATEMENT_ISSUED, now=now,
                         data={"period_id": period.pk, "payout_batch_id": batch.pk,
                               "statement_ids": [s.pk for s in statements], "currency": batch.currency,
                               "total_payable": str(batch.total)})
    logger.info("period settled", extra={"period_id": period.pk, "statements": len(statements),
                                         "total": str(batch.total)})
    return Settlement(period=period, statements=statements, batch=batch, created=True)


def _statements_notify(*, period: Period, statements: list[Statement], now: datetime) -> None:
    """Tell each expert with a statement that it is issued (in the settlement's transaction;
    the emails of those who want them go on commit)."""
    if not statements:
        return
    project_name = Project.objects.filter(pk=period.project_id).values_list("name", flat=True).get()
    span = (f"{timezone.localtime(period.starts_at):%Y-%m-%d} – "
            f"{timezone.localtime(period.ends_at - timedelta(microseconds=1)):%Y-%m-%d}")
    experts = User.objects.in_bulk([s.expert_id for s in statements])
    for statement in statements:
        notification_send(users=[experts[statement.expert_id]], kind="statement_issued", now=now,
                          params={"project": project_name, "period": span, "payable": str(statement.payable),
                                  "currency": statement.currency, "count": statement.entry_count},
                          link=reverse("statement_detail", args=[statement.pk]))


def periods_settle_due(*, now: datetime) -> list[Settlement]:
    """Settle every open period whose end has passed, oldest first per project (the beat job)."""
    due = (Period.objects.filter(status=Period.Status.OPEN, ends_at__lte=now)
           .order_by("project_id", "starts_at").values_list("pk", flat=True))
    settled = []
    for period_id in list(due):
        try:
            settled.append(statement_settle_period(period_id=period_id, now=now))
        except DomainError as exc:
            # One project's problem must not hold up every other project's pay.
            logger.error("period not settled", extra={"period_id": period_id, "code": exc.code})
    return settled


def period_close_now(*, actor: User, project_id, now: datetime) -> list[Settlement]:
    """An admin closes the project's open periods now, oldest first; the current one ends at `now`."""
    project = _project_for_settler(actor, project_id)
    open_ids = list(Period.objects.filter(project=project, status=Period.Status.OPEN, starts_at__lt=now)
                    .order_by("starts_at").values_list("pk", flat=True))
    if not open_ids:
        raise Conflict("No period of this project is open.", code="no_open_period")
    return [statement_settle_period(period_id=pk, now=now, actor=actor, close_early=True) for pk in open_ids]


def _project_for_settler(actor: User, project_id) -> Project:
    if not permissions.can_settle(actor):
        raise NotFound("No such project.")
    try:
        return Project.objects.get(pk=int(project_id))
    except (Project.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such project.") from None


def _batch_for_settler(actor: User, batch_id) -> PayoutBatch:
    if not permissions.can_settle(actor):
        raise NotFound("No such payout batch.")
    try:
        return payout_batch_lock(int(batch_id))
    except (PayoutBatch.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such payout batch.") from None


def payout_batch_approve(*, actor: User, batch_id, now: datetime) -> PayoutBatch:
    """An admin approves a drafted payout batch for payment."""
    with transaction.atomic():
        batch = _batch_for_settler(actor, batch_id)
        if batch.status != PayoutBatch.Status.DRAFT:
            raise Conflict("This payout batch is already approved.", code="batch_not_draft")
        batch.status = PayoutBatch.Status.APPROVED
        batch.approved_at = now
        batch.approved_by = actor
        batch.save(update_fields=["status", "approved_at", "approved_by"])
        audit_record(actor=actor, action=AuditAction.PAYOUT_APPROVE, project_id=batch.project_id, objects=[batch],
                     now=now, details={"period_id": batch.period_id, "total": batch.total, "currency": batch.currency})
    logger.info("payout batch approved", extra={"batch_id": batch.pk})
    return batch


def payout_batch_mark_paid(*, actor: User, batch_id, now: datetime, reference: str) -> PayoutBatch:
    """An admin records that an approved batch was paid, with finance's transfer reference (required)."""
    with transaction.atomic():
        batch = _batch_for_settler(actor, batch_id)
        if batch.status == PayoutBatch.Status.PAID:
            raise Conflict("This payout batch is already marked paid.", code="batch_paid")
        if batch.status != PayoutBatch.Status.APPROVED:
            raise Conflict("Approve the payout batch before marking it paid.", code="batch_not_approved")
        if not (reference or "").strip():
            raise DomainError("Give the transfer reference of the payment; nothing was marked paid.",
                              code="reference_required", errors=[{"field": "reference", "message": "required"}])
        batch.status = PayoutBatch.Status.PAID
        batch.paid_at = now
        batch.paid_by = actor
        batch.payment_reference = (reference or "").strip()[:MAX_REFERENCE_CHARS]
        batch.save(update_fields=["status", "paid_at", "paid_by", "payment_reference"])
        audit_record(actor=actor, action=AuditAction.PAYOUT_PAID, project_id=batch.project_id, objects=[batch],
                     now=now, details={"total": batch.total, "currency": batch.currency,
                                       "reference": batch.payment_reference})
    logger.info("payout batch paid", extra={"batch_id": batch.pk})
    return batch


def submission_reject(*, actor: User, assignment_id, reason: str, now: datetime,
                      reason_code: str = Assignment.RejectReason.OTHER) -> LedgerEntry:
    """A PM rejects a paid submission (spam, copy-paste): a reversal entry with the reason.

    In one transaction the labels stop counting (`submission_reject_labels`: out of the
    consensus, the slot reopens for another expert) and the earning is reversed. The
    earning is never edited; the reversal lands in the period open at `now`, so a
    rejection after settlement is deducted from the expert's next statement.
    """
    try:
        assignment = Assignment.objects.select_related("task__project").get(pk=int(assignment_id))
    except (Assignment.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such submission.") from None
    if not annotation_permissions.can_manage(actor, assignment.task.project):
        raise NotFound("No such submission.")
    if Appeal.objects.filter(assignment=assignment, kind=Appeal.Kind.REJECTION,
                             status=Appeal.Status.ACCEPTED).exists():
        # Its reversal and correction stand; a second rejection would need a second reversal.
        raise Conflict(str(ErrorCode.RESTORED_ON_APPEAL.label), code=ErrorCode.RESTORED_ON_APPEAL)
    if LedgerEntry.objects.filter(idempotency_key=reversal_key(assignment.pk)).exists():
        raise Conflict("This submission is already rejected.", code="already_rejected")
    if assignment.status != Assignment.Status.SUBMITTED or assignment.kind != Assignment.Kind.WORK:
        raise Conflict("Only submitted, paid work can be rejected.", code="not_payable")
    reason = (reason or "").strip()
    if not reason:
        raise DomainError("Give the reason for the rejection; the expert sees it on their statement.",
                          code="reason_required", errors=[{"field": "reason", "message": "required"}])
    with transaction.atomic():
        # Annotation rows first (task, assignment), then the ledger: payments' posting takes no
        # annotation lock, so this order matches every other writer.
        submission_reject_labels(assignment=assignment, reason_code=reason_code, text=reason, by=actor, now=now)
        reversal = ledger_post_reversal(assignment_id=assignment.pk, reason=reason, actor=actor, now=now)
        audit_record(actor=actor, action=AuditAction.SUBMISSION_REJECT, project_id=assignment.task.project_id,
                     objects=[assignment], now=now, details={"task_id": assignment.task_id, "reason_code": reason_code,
                                                             "reason": reason, "reversal_id": reversal.pk,
                                                             "amount": reversal.amount})
        return reversal


def submission_reject_for_review(actor: User, assignment_id: int, reason_code: str, reason: str,
                                 now: datetime) -> None:
    """The review queue's rejection (`annotation.review.rejecting`): `submission_reject` itself."""
    submission_reject(actor=actor, assignment_id=assignment_id, reason=reason, reason_code=reason_code, now=now)


def payment_settings_update(*, actor: User, project_id, currency: str, period_length: str,
                            period_anchor) -> PaymentSettings:
    """An admin sets a project's currency and period length; the currency is fixed once money moved."""
    project = _project_for_settler(actor, project_id)
    if currency not in Currency.values:
        raise DomainError("Unknown currency.", code="invalid_currency",
                          errors=[{"field": "currency", "message": "unknown"}])
    if period_length not in PaymentSettings.PeriodLength.values:
        raise DomainError("Unknown period length.", code="invalid_period_length",
                          errors=[{"field": "period_length", "message": "expected weekly or biweekly"}])
    with transaction.atomic():
        payment_settings = payment_settings_lock(project.pk)
        if currency != payment_settings.currency and currency_is_fixed(project.pk):
            raise Conflict("The currency cannot change once prices or ledger entries exist.",
                           code="currency_fixed")
        payment_settings.currency = currency
        payment_settings.period_length = period_length
        old = {"currency": payment_settings.currency, "period_length": payment_settings.period_length,
               "period_anchor": payment_settings.period_anchor}
        payment_settings.period_anchor = period_anchor
        payment_settings.save()
        new = {"currency": currency, "period_length": period_length, "period_anchor": period_anchor}
        audit_record(actor=actor, action=AuditAction.PRICE_CHANGE, project_id=project.pk, objects=[payment_settings],
                     details={"changes": {k: {"old": old[k], "new": new[k]} for k in new if old[k] != new[k]}})
    return payment_settings


def currency_is_fixed(project_id: int) -> bool:
    return (LedgerEntry.objects.filter(project_id=project_id).exists()
            or Project.objects.filter(pk=project_id, price_rules__isnull=False).exists())
