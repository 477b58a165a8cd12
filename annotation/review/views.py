"""The PM's review queue: flagged submissions, and the three decisions on each."""
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotation.models import Assignment, ReviewFlag
from annotation.review import services
from annotation.review.rejecting import review_rejecter
from annotation.review.selectors import QUEUE_LIMIT, review_counts, review_queue
from annotation.selectors import project_get_for_user
from core.confirm import Confirmation, confirmation_given, confirmation_page
from core.errors import DomainError, NotFound, error_message
from core.pages import render_page
from experts.requests import SignedInRequest

QUEUE = "annotation/review/queue.html"



def _back(request: HttpRequest, project_id: int) -> HttpResponse:
    url = reverse("review_queue", args=[project_id])
    return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)


@login_required
@require_GET
def queue(request: SignedInRequest, project_id: int) -> HttpResponse:
    """Flagged submissions of the project, open ones first: the rules tripped, and the decisions."""
    project = project_get_for_user(request.user, project_id, manage=True)
    status = request.GET.get("status") or ReviewFlag.Status.OPEN
    if status not in ReviewFlag.Status.values:
        status = ReviewFlag.Status.OPEN
    counts = review_counts(project)
    context: dict[str, Any] = {
        "project": project, "status": status, "rows": review_queue(project, status=status), "limit": QUEUE_LIMIT,
        "statuses": [(value, label, counts[value]) for value, label in ReviewFlag.Status.choices],
        "reasons": Assignment.RejectReason.choices, "can_reject": review_rejecter() is not None,
    }
    return render_page(request, QUEUE, "queue", context)


def _decide(request: SignedInRequest, project_id: int, action, done: str, **kwargs: Any) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, manage=True)
    try:
        action(actor=request.user, project=project, now=timezone.now(), **kwargs)
    except NotFound:
        raise
    except DomainError as exc:
        messages.error(request, error_message(exc))
        return _back(request, project_id)
    messages.success(request, done)
    return _back(request, project_id)


@login_required
@require_POST
def accept(request: SignedInRequest, project_id: int, assignment_id: int) -> HttpResponse:
    return _decide(request, project_id, services.review_accept, _("Accepted: the flags are cleared."),
                   assignment_id=assignment_id)


@login_required
@require_POST
def return_to_expert(request: SignedInRequest, project_id: int, assignment_id: int) -> HttpResponse:
    return _decide(request, project_id, services.submission_return,
                   _("Returned to the expert with your comment; they may fix it once."),
                   assignment_id=assignment_id, comment=request.POST.get("comment", ""))


@login_required
@require_POST
def reject(request: SignedInRequest, project_id: int, assignment_id: int) -> HttpResponse:
    """Reject with a reason, after a confirmation that says what follows (the pay is reversed)."""
    project = project_get_for_user(request.user, project_id, manage=True)
    reason = request.POST.get("reason", "").strip()
    reason_code = request.POST.get("reason_code", Assignment.RejectReason.OTHER)
    if not confirmation_given(request):
        assignment = services.flagged_assignment(project, assignment_id)
        if reason_code not in Assignment.RejectReason.values:
            reason_code = Assignment.RejectReason.OTHER
        return confirmation_page(request, Confirmation(
            title=_("Reject the submission of question %(question)s?")
            % {"question": assignment.task.response.question.external_id},
            consequences=[
                _("Its labels leave the consensus and the reports; the task goes to another expert."),
                _("The expert's earning for it is reversed on their next statement."),
                _("The expert sees the reason: %(kind)s, “%(reason)s”.")
                % {"kind": Assignment.RejectReason(reason_code).label, "reason": reason or "—"},
            ],
            action_url=request.path, cancel_url=reverse("review_queue", args=[project.pk]),
            fields={"reason": reason, "reason_code": reason_code}, confirm_label=_("Reject")))
    return _decide(request, project_id, services.review_reject, _("Submission rejected; the expert was told why."),
                   assignment_id=assignment_id, reason_code=reason_code, reason=reason)
