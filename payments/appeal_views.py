"""Pages of appeals, mounted at /payments/: the expert contests, a PM or senior expert decides.

Experts: "My appeals" (each with its outcome and the decider's reason) and the contest
form of a rejection (from their history) or of an earning line (from a statement). PMs of
the project and its senior experts: the project's appeal queue, where accepting goes
through the server-side confirmation (it moves money) and denying does not.
"""
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.models import Project
from annotation.selectors import project_get_for_user
from core.confirm import Confirmation, confirmation_given, confirmation_page
from core.errors import DomainError, Forbidden, NotFound, error_message
from core.pages import render_page
from experts.models import User
from payments import appeals
from payments.models import Appeal

LIST = "payments/appeals.html"
NEW = "payments/appeal_new.html"
QUEUE = "payments/project_appeals.html"
UNPROCESSABLE = 422
QUEUE_LIMIT = 200


def _user(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User):
        raise Http404
    return user


@login_required
@require_GET
def appeal_list(request: HttpRequest) -> HttpResponse:
    """The expert's appeals with their outcomes, and the projects where the user decides appeals."""
    user = _user(request)
    projects = list(appeals.decider_projects(user).order_by("name", "pk"))
    open_counts: dict[int, int] = {}
    for project_id in (appeals.appeals_to_decide(user).filter(status=Appeal.Status.OPEN)
                       .values_list("project_id", flat=True)):
        open_counts[project_id] = open_counts.get(project_id, 0) + 1
    context = {"appeals": list(appeals.appeal_list_for_expert(user)) if user.is_expert else [],
               "decides": [(p, open_counts.get(p.pk, 0)) for p in projects]}
    return render_page(request, LIST, "appeals", context)


def _new_page(request: HttpRequest, *, kind: str, target: Any, check, create) -> HttpResponse:
    user = _user(request)
    now = timezone.now()
    context: dict[str, Any] = {"kind": kind, "reason": request.POST.get("reason", ""),
                               "reason_max": appeals.REASON_MAX}
    try:
        obj = check(now)
    except NotFound:
        raise
    except DomainError as exc:
        # Contested already or too late: say so plainly, with nothing to fill in.
        context["refusal"] = error_message(exc)
        context |= _target_context(kind, target(), user)
        return render_page(request, NEW, "form", context, status=UNPROCESSABLE if request.method == "POST" else 200)
    context |= _target_context(kind, obj, user)
    if request.method == "POST":
        try:
            create(now)
        except NotFound:
            raise
        except DomainError as exc:
            context |= {"error": error_message(exc),
                        "errors": {str(e.get("field")): str(e.get("message", "")) for e in exc.errors}}
            return render_page(request, NEW, "form", context, status=UNPROCESSABLE)
        messages.success(request, _("Your appeal was sent. You will be told of the decision."))
        return redirect("appeal_list")
    return render_page(request, NEW, "form", context)


def _target_context(kind: str, obj: Any, user: User) -> dict[str, Any]:
    if kind == Appeal.Kind.REJECTION:
        project = obj.task.project
        return {"assignment": obj, "project": project, "question": obj.task.response.question,
                "deadline": appeals.rejection_deadline(obj, project), "back_url": reverse("my_history")}
    return {"entry": obj, "project": obj.project, "question": obj.assignment.task.response.question,
            "deadline": appeals.line_deadline(obj, obj.project), "back_url": reverse("earnings")}


@login_required
@require_http_methods(["GET", "POST"])
def appeal_rejection_new(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """Contest the rejection of one's submission: what was rejected, why, until when; the reason."""
    user = _user(request)
    return _new_page(
        request, kind=Appeal.Kind.REJECTION,
        target=lambda: appeals.rejection_get_for_expert(user, assignment_id),
        check=lambda now: appeals.rejection_contest_check(expert=user, assignment_id=assignment_id, now=now),
        create=lambda now: appeals.appeal_create_for_rejection(expert=user, assignment_id=assignment_id,
                                                               reason=request.POST.get("reason"), now=now))


@login_required
@require_http_methods(["GET", "POST"])
def appeal_line_new(request: HttpRequest, entry_id: int) -> HttpResponse:
    """Contest an earning line of one's statement."""
    user = _user(request)
    return _new_page(
        request, kind=Appeal.Kind.STATEMENT_LINE,
        target=lambda: appeals.line_get_for_expert(user, entry_id),
        check=lambda now: appeals.line_contest_check(expert=user, entry_id=entry_id, now=now),
        create=lambda now: appeals.appeal_create_for_line(expert=user, entry_id=entry_id,
                                                          reason=request.POST.get("reason"), now=now))


# --- Deciding ----------------------------------------------------------------------------------

def _project_for_decider(user: User, project_id: int) -> tuple[Project, str]:
    project = project_get_for_user(user, project_id)
    role = appeals.decider_role(user, project)
    if role is None:
        raise NotFound("No such project.")
    return project, role


def _queue_context(user: User, project: Project, role: str, *, error: str | None = None,
                   refused: int | None = None, posted: dict[str, str] | None = None) -> dict[str, Any]:
    rows = []
    listed = list(appeals.appeals_to_decide(user, project=project)[:QUEUE_LIMIT])
    bounds = appeals.appeal_bounds(listed)
    for appeal in listed:
        rows.append({"appeal": appeal, "may_decide": appeals.may_decide(user, appeal), "bound": bounds.get(appeal.pk),
                     # A refused decision comes back with what was typed, on its own card only.
                     "posted": posted if appeal.pk == refused else {}})
    return {"project": project, "role": role, "rows": rows, "error": error}


@login_required
@require_GET
def project_appeals(request: HttpRequest, project_id: int) -> HttpResponse:
    """The project's appeals for its PMs and senior experts: open ones first, each with its decide form."""
    user = _user(request)
    project, role = _project_for_decider(user, project_id)
    return render_page(request, QUEUE, "queue", _queue_context(user, project, role))


@login_required
@require_POST
def appeal_decide(request: HttpRequest, appeal_id: int) -> HttpResponse:
    """Accept (after a confirmation naming the money and the labels) or deny an appeal, with a reason."""
    user = _user(request)
    appeal = appeals.appeal_get_for_decider(user, appeal_id)
    outcome = request.POST.get("outcome", "")
    reason = request.POST.get("decision_reason", "")
    amount = request.POST.get("amount", "")
    queue_url = reverse("project_appeals", args=[appeal.project_id])
    if outcome == appeals.Outcome.ACCEPT and not confirmation_given(request):
        try:
            text, credited = appeals.appeal_decision_check(actor=user, appeal=appeal, outcome=outcome,
                                                           reason=reason, amount=amount)
        except DomainError as exc:
            return _refused(request, user, appeal, exc)
        bound = appeals.appeal_bound(appeal)
        consequences = [_("%(amount)s %(currency)s is credited to the expert as a new ledger line in the open "
                          "period; no earlier line changes.") % {"amount": credited, "currency": bound.currency}]
        if appeal.kind == Appeal.Kind.REJECTION:
            consequences.insert(0, _("The rejection is lifted: the labels count in the consensus, the reports "
                                     "and the export again; the task's consensus is recomputed."))
        consequences.append(_("The expert is told of the decision and reads your reason: “%(reason)s”.")
                            % {"reason": text})
        return confirmation_page(request, Confirmation(
            title=_("Accept the appeal of %(expert)s?") % {"expert": _pseudonym(appeal)},
            consequences=consequences, action_url=request.path, cancel_url=queue_url,
            fields={"outcome": outcome, "decision_reason": reason, "amount": amount},
            confirm_label=_("Accept and credit"), danger=False))
    try:
        decided = appeals.appeal_decide(actor=user, appeal_id=appeal.pk, outcome=outcome, reason=reason,
                                        amount=amount, now=timezone.now())
    except NotFound:
        raise
    except DomainError as exc:
        return _refused(request, user, appeal, exc)
    if decided.status == Appeal.Status.ACCEPTED:
        messages.success(request, _("Appeal accepted; the expert was told."))
    else:
        messages.success(request, _("Appeal denied; the expert was told."))
    return redirect(queue_url)


def _refused(request: HttpRequest, user: User, appeal: Appeal, exc: DomainError) -> HttpResponse:
    project, role = _project_for_decider(user, appeal.project_id)
    context = _queue_context(user, project, role, error=error_message(exc), refused=appeal.pk,
                             posted={"outcome": request.POST.get("outcome", ""),
                                     "decision_reason": request.POST.get("decision_reason", ""),
                                     "amount": request.POST.get("amount", "")})
    return render_page(request, QUEUE, "queue", context,
                       status=exc.status if isinstance(exc, Forbidden) else UNPROCESSABLE)


def _pseudonym(appeal: Appeal) -> str:
    profile = getattr(appeal.expert, "expert_profile", None)
    return profile.pseudonym if profile is not None else f"#{appeal.expert_id}"
