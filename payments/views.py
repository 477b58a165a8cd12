"""Pages of the payments app, mounted at /payments/.

Experts: earnings of the open period (polled, so the count moves as they work), the
price of their work at their tier, and past statements whose lines name the task,
question, rubric version and difficulty, never the model. PMs and admins: cost per
project, per period and per consensus label, and rejecting a submission. Admins:
closing a period now, approving a payout batch, marking it paid, the payouts CSV.

Each view parses input, calls one selector or service, and renders; an htmx request
gets only the fragment it swaps.
"""
import csv
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST

from annotation.models import Assignment
from core.confirm import Confirmation, confirmation_given, confirmation_page
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, NotFound, error_message
from core.pages import render_page
from payments import batch as reject_batch
from payments import permissions, selectors, services
from payments.models import Appeal, PayoutBatch

EARNINGS = "payments/earnings.html"
STATEMENT = "payments/statement.html"
COSTS = "payments/costs.html"
PROJECT_COSTS = "payments/project_costs.html"
UNPROCESSABLE = 422
# A spreadsheet runs a cell that starts with one of these as a formula.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


# --- The expert's side ----------------------------------------------------------------

@login_required
@require_GET
def earnings(request: HttpRequest) -> HttpResponse:
    """The expert's earnings; PMs and admins are taken to the cost pages."""
    if not permissions.has_earnings(request.user):
        return redirect("costs")
    context: dict[str, Any] = {"pending": selectors.earnings_pending_for_expert(request.user)}
    if not request.htmx:
        context |= {
            "lines": selectors.lines_pending_for_expert(request.user),
            "prices": selectors.prices_for_expert(request.user, now=timezone.now()),
            "statements": selectors.statement_list_for_expert(request.user),
        }
    return render_page(request, EARNINGS, "live", context)


@login_required
@require_GET
def statement_detail(request: HttpRequest, statement_id: int) -> HttpResponse:
    statement = selectors.statement_get_for_expert(request.user, statement_id)
    return render(request, STATEMENT, {"statement": statement, "lines": selectors.statement_lines(statement)})


# --- The PM's and admin's side --------------------------------------------------------

@login_required
@require_GET
def costs(request: HttpRequest) -> HttpResponse:
    if not (request.user.is_pm or request.user.is_platform_admin):
        raise Http404(_("Not found, or not yours."))
    return render(request, COSTS, {"rows": selectors.project_costs_for_user(request.user)})


def _project_context(request: HttpRequest, project_id: int) -> dict[str, Any]:
    project = selectors.project_get_for_costs(request.user, project_id)
    return {
        "project": project,
        "cost": selectors.project_cost(project),
        "submissions": selectors.submissions_for_review(project),
        "settings": selectors.payment_settings_for(project),
        "can_settle": permissions.can_settle(request.user),
        "reject_reasons": Assignment.RejectReason.choices,
        "open_appeals": Appeal.objects.filter(project=project, status=Appeal.Status.OPEN).count(),
    }


@login_required
@require_GET
def project_costs(request: HttpRequest, project_id: int) -> HttpResponse:
    context = _project_context(request, project_id)
    return render_page(request, PROJECT_COSTS, "main", context)


def _after_action(request: HttpRequest, project_id: int, *, done: str | None = None,
                  error: DomainError | None = None) -> HttpResponse:
    """The project cost page after a POST: the fragment for htmx, else a redirect with a message."""
    if isinstance(error, NotFound):
        raise error  # the 404 page, from core.middleware
    if request.htmx:
        context = _project_context(request, project_id)
        context |= {"notice": done, "error": error_message(error) if error else None}
        return render_page(request, PROJECT_COSTS, "main", context, status=UNPROCESSABLE if error else 200)
    if error:
        messages.error(request, error_message(error))
    else:
        messages.success(request, done)
    return redirect(reverse("project_costs", args=[project_id]))


def _costs_url(project_id: int) -> str:
    return reverse("project_costs", args=[project_id])


@login_required
@require_POST
def period_close(request: HttpRequest, project_id: int) -> HttpResponse:
    """An admin closes the project's open period now: statements and a payout batch to approve."""
    if not confirmation_given(request):
        if not permissions.can_settle(request.user):
            raise NotFound("No such project.")
        selectors.project_get_for_costs(request.user, project_id)
        return confirmation_page(request, Confirmation(
            title=_("Close the open period now?"),
            consequences=[
                _("Every expert's earnings of the open period go onto a statement; a new period opens."),
                _("A payout batch is drafted for the statements; it waits for an admin's approval."),
            ],
            action_url=request.path, cancel_url=_costs_url(project_id), confirm_label=_("Close the period"),
            danger=False))
    try:
        settled = services.period_close_now(actor=request.user, project_id=project_id, now=timezone.now())
    except DomainError as exc:
        return _after_action(request, project_id, error=exc)
    count = sum(len(s.statements) for s in settled)
    return _after_action(request, project_id, done=_("Period closed: %(count)d statements written.")
                         % {"count": count})


@login_required
@require_POST
def submission_reject(request: HttpRequest, project_id: int, assignment_id: int) -> HttpResponse:
    """A PM rejects a submission: a reversal with the reason, deducted from the expert's pay.

    The first post names the amount and who sees the reason; only the confirmed post writes.
    """
    reason = request.POST.get("reason", "").strip()
    reason_code = request.POST.get("reason_code", Assignment.RejectReason.OTHER)
    if not confirmation_given(request):
        project = selectors.project_get_for_costs(request.user, project_id)
        row = selectors.submission_get_for_review(project, assignment_id)
        if row.rejected:
            return _after_action(request, project_id, error=Conflict(
                "This submission is already rejected.", code="already_rejected"))
        if not reason:
            return _after_action(request, project_id, error=DomainError(
                "Give a reason for the rejection.", code="reason_required",
                errors=[{"field": "reason", "message": "required"}]))
        if reason_code not in Assignment.RejectReason.values:
            return _after_action(request, project_id, error=DomainError(
                "Unknown reason.", code="reject_reason_unknown",
                errors=[{"field": "reason_code", "message": "unknown"}]))
        return confirmation_page(request, Confirmation(
            title=_("Reject the submission of task #%(task)s by %(expert)s?") % {"task": row.task_id,
                                                                                  "expert": row.expert},
            consequences=[
                _("%(amount)s %(currency)s will be deducted from the expert's next statement.")
                % {"amount": row.amount, "currency": row.currency},
                _("The expert sees the reason on their statement and history: %(kind)s, “%(reason)s”.")
                % {"kind": Assignment.RejectReason(reason_code).label, "reason": reason},
                _("Its labels leave the consensus and the reports; the task goes to another expert."),
                _("The rejection is final; the earning itself stays in the ledger beside its reversal."),
            ],
            action_url=request.path, cancel_url=_costs_url(project_id),
            fields={"reason": reason, "reason_code": reason_code},
            confirm_label=_("Reject and deduct")))
    try:
        entry = services.submission_reject(actor=request.user, assignment_id=assignment_id,
                                           reason=reason, reason_code=reason_code, now=timezone.now())
    except DomainError as exc:
        return _after_action(request, project_id, error=exc)
    return _after_action(request, entry.project_id, done=_("Submission rejected; %(amount)s %(currency)s reversed.")
                         % {"amount": -entry.amount, "currency": entry.currency})


def _batch_action(request: HttpRequest, batch: PayoutBatch, action: Callable[..., PayoutBatch],
                  done: str) -> HttpResponse:
    try:
        action(actor=request.user, batch_id=batch.pk)
    except DomainError as exc:
        return _after_action(request, batch.project_id, error=exc)
    return _after_action(request, batch.project_id, done=done)


def _batch_consequences(batch: PayoutBatch) -> list[str]:
    summary = selectors.payout_batch_summary(batch)
    return [
        ngettext("%(count)d statement to %(experts)d expert(s)", "%(count)d statements to %(experts)d expert(s)",
                 summary.statements) % {"count": summary.statements, "experts": summary.experts},
        _("Total: %(total)s %(currency)s, for the period %(start)s – %(end)s.") % {
            "total": summary.total, "currency": summary.currency,
            "start": date_format(timezone.localtime(batch.period.starts_at), "SHORT_DATETIME_FORMAT"),
            "end": date_format(timezone.localtime(batch.period.ends_at), "SHORT_DATETIME_FORMAT")},
    ]


@login_required
@require_POST
def batch_approve(request: HttpRequest, batch_id: int) -> HttpResponse:
    batch = selectors.payout_batch_get_for_settler(request.user, batch_id)
    if not confirmation_given(request):
        return confirmation_page(request, Confirmation(
            title=_("Approve this payout batch for payment?"),
            consequences=[*_batch_consequences(batch),
                          _("Once approved, the batch can be paid and marked paid; it cannot be un-approved.")],
            action_url=request.path, cancel_url=_costs_url(batch.project_id), confirm_label=_("Approve payout"),
            danger=False))
    return _batch_action(
        request, batch,
        lambda **kw: services.payout_batch_approve(now=timezone.now(), **kw),
        _("Payout batch approved."))


@login_required
@require_POST
def batch_mark_paid(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Record a batch as paid; the transfer reference is asked for on the confirmation step."""
    batch = selectors.payout_batch_get_for_settler(request.user, batch_id)
    reference = request.POST.get("reference", "").strip()
    if not confirmation_given(request):
        return confirmation_page(request, Confirmation(
            title=_("Mark this payout batch as paid?"),
            consequences=[*_batch_consequences(batch),
                          _("Do this only after the transfer went out; marking paid cannot be undone.")],
            action_url=request.path, cancel_url=_costs_url(batch.project_id), confirm_label=_("Mark paid"),
            inputs=[("reference", _("Transfer reference (required)"), reference, True)], danger=False))
    return _batch_action(
        request, batch,
        lambda **kw: services.payout_batch_mark_paid(now=timezone.now(), reference=reference, **kw),
        _("Payout batch marked paid."))


def _cell(value: str) -> str:
    return f"'{value}" if value.startswith(FORMULA_PREFIXES) else value


@login_required
@require_GET
def batch_csv(request: HttpRequest, batch_id: int) -> HttpResponse:
    """The payouts of one batch as CSV, one row per expert with something to pay (finance)."""
    batch = selectors.payout_batch_get_for_settler(request.user, batch_id)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="payouts-batch-{batch.pk}.csv"'
    # A byte-order mark, so spreadsheet programs read the Chinese names as UTF-8.
    response.write("\ufeff")
    writer = csv.writer(response)
    for row in selectors.payout_rows(batch):
        writer.writerow([_cell(value) for value in row])
    return response


@login_required
@require_POST
def submissions_reject_batch(request: HttpRequest, project_id: int) -> HttpResponse:
    """A PM rejects every submitted task of one expert in the project with one reason: the count and what
    follows first, then all rejections (with their reversals) in one transaction, or none."""
    project = selectors.project_get_for_costs(request.user, project_id)
    back = reverse("batch", args=[project.pk])
    reason = request.POST.get("reason", "").strip()
    reason_code = request.POST.get("reason_code", Assignment.RejectReason.OTHER)
    expert_id = request.POST.get("expert", "")
    ids = list(reject_batch.submissions_of_expert(project, expert_id).values_list("pk", flat=True))
    error: DomainError | None = None
    if not ids:
        error = DomainError("No submission matches.", code=ErrorCode.BATCH_REJECT_NONE)
    elif not reason:
        error = DomainError("Give a reason for the rejection.", code="reason_required",
                            errors=[{"field": "reason", "message": "required"}])
    elif reason_code not in Assignment.RejectReason.values:
        error = DomainError("Unknown reason.", code="reject_reason_unknown")
    if error is None and not confirmation_given(request):
        return confirmation_page(request, Confirmation(
            title=ngettext("Reject %(count)d submission?", "Reject %(count)d submissions?", len(ids))
            % {"count": len(ids)},
            consequences=[
                _("The expert sees the reason on their statement and history: %(kind)s, “%(reason)s”.")
                % {"kind": Assignment.RejectReason(reason_code).label, "reason": reason},
                _("Each earning is reversed and deducted from the expert's next statement."),
                _("Their labels leave the consensus and the reports; the tasks go to other experts."),
                _("All of it happens in one step, or nothing does."),
            ],
            action_url=request.path, cancel_url=back,
            fields={"reason": reason, "reason_code": reason_code, "expert": expert_id},
            confirm_label=_("Reject and deduct")))
    if error is None:
        try:
            count = reject_batch.submissions_reject_batch(actor=request.user, project=project, assignment_ids=ids,
                                                   reason=reason, reason_code=reason_code, now=timezone.now())
        except DomainError as exc:
            error = exc
    if error is not None:
        if isinstance(error, NotFound):
            raise error
        messages.error(request, error_message(error))
    else:
        messages.success(request, ngettext("Done: %(count)d submission rejected.",
                                           "Done: %(count)d submissions rejected.", count) % {"count": count})
    return redirect(back)
