"""The PM's workload page and batch operations. Thin: fetch the project for its PM, call one
selector or service, render; every batch operation asks first (`core.confirm`)."""
import uuid
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotation.assignment.manual import hand_over_preview, leases_hand_over
from annotation.models import Assignment, BatchJob, Difficulty, Project
from annotation.models.work import PRIORITY_MAX
from annotation.selectors import project_experts, project_get_for_user
from annotation.workload.batch import (
    TASK_STATUSES,
    TaskFilter,
    batch_experts_pause,
    experts_of_project,
    rejections_preview,
    submissions_filtered,
    tasks_filtered,
    tasks_preview,
)
from annotation.workload.jobs import (
    BatchRequest,
    batch_job_error,
    batch_job_progress,
    batch_job_queue,
    batch_run_now,
    sync_max,
)
from annotation.workload.selectors import expert_loads_for_project, project_deadline
from core.confirm import Confirmation, confirmation_given, confirmation_page
from core.error_codes import ErrorCode
from core.errors import DomainError, NotFound, error_message
from core.pages import render_page
from experts.models import User
from rubrics.models import Dimension

WORKLOAD = "annotation/workload.html"


@login_required
@require_GET
def workload(request: HttpRequest, project_id: int) -> HttpResponse:
    """Each expert's leases, submissions against weekly capacity, pace, quality trend and pause state;
    the project's due date, last week's throughput and the finish date it forecasts."""
    user: User = request.user  # type: ignore[assignment]  # behind login_required
    project = project_get_for_user(user, project_id, manage=True)
    now = timezone.now()
    context = {"project": project, "deadline": project_deadline(project, now=now),
               "loads": expert_loads_for_project(project, now=now)}
    return render_page(request, WORKLOAD, "workload", context)


BATCH = "annotation/batch.html"


def _batch_url(project_id: int, fields: dict[str, str] | None = None) -> str:
    query = urlencode({k: v for k, v in (fields or {}).items() if v})
    return reverse("batch", args=[project_id]) + (f"?{query}" if query else "")


def _ids(request: HttpRequest, name: str) -> list[str]:
    """Ids sent as repeated fields (the form) or as one comma list (the confirmation's re-post)."""
    values = request.POST.getlist(name)
    return [part for value in values for part in value.split(",") if part.strip()]


@login_required
@require_GET
def batch(request: HttpRequest, project_id: int) -> HttpResponse:
    """Batch operations: a task filter with its counts, the operations on that set, and on experts."""
    user: User = request.user  # type: ignore[assignment]  # behind login_required
    project = project_get_for_user(user, project_id, manage=True)
    task_filter = TaskFilter.from_data(request.GET)
    context = {"project": project, "filter": task_filter, "preview": tasks_preview(project, task_filter),
               "experts": list(project_experts(project).select_related("expert_profile")),
               "statuses": [(s.value, s.label) for s in TASK_STATUSES], "difficulties": Difficulty.choices,
               "dimensions": list(Dimension.objects.filter(is_gate=False)),
               "reject_reasons": Assignment.RejectReason.choices, "priority_max": PRIORITY_MAX}
    return render_page(request, BATCH, "batch", context)


def _done(request: HttpRequest, url: str, *, text: str | None = None, error: DomainError | None = None) -> HttpResponse:
    if error is not None:
        if isinstance(error, NotFound):
            raise error
        messages.error(request, error_message(error))
    else:
        messages.success(request, text or "")
    return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)


@login_required
@require_POST
def batch_tasks(request: HttpRequest, project_id: int) -> HttpResponse:
    """Mark golden, raise overlap, set priority, assign by hand or reject the submissions of the filtered
    tasks: a preview first, then one transaction (or a worker's, for a large set)."""
    user: User = request.user  # type: ignore[assignment]  # behind login_required
    project = project_get_for_user(user, project_id, manage=True)
    task_filter = TaskFilter.from_data(request.POST)
    op = request.POST.get("op", "")
    value = request.POST.get("value", "").strip()
    back = _batch_url(project.pk, task_filter.as_fields())
    if op not in ("golden", "overlap", "priority", "assign", "reject"):
        return _done(request, back, error=DomainError("Unknown operation.", code=ErrorCode.INVALID))
    named: list[User] = []
    if op == "assign" or (op == "reject" and _ids(request, "experts")):
        try:
            named = experts_of_project(project, _ids(request, "experts"))
        except DomainError as exc:
            return _done(request, back, error=exc)
    reason_code = request.POST.get("reason_code", Assignment.RejectReason.OTHER) if op == "reject" else ""
    if op == "reject" and not confirmation_given(request):
        return _reject_confirmation(request, project=project, task_filter=task_filter, named=named, reason=value,
                                    reason_code=reason_code, back=back)
    if not confirmation_given(request):
        preview = tasks_preview(project, task_filter)
        lines = [ngettext("%(count)d task matches the filter.", "%(count)d tasks match the filter.",
                          preview.tasks) % {"count": preview.tasks}]
        if op == "assign":
            names = ", ".join(e.username for e in named)
            title = _("Assign the filtered tasks to %(names)s?") % {"names": names}
            lines.append(ngettext("%(count)d lease is created; each expert finds these tasks first.",
                                  "%(count)d leases are created; each expert finds these tasks first.",
                                  preview.tasks * len(named)) % {"count": preview.tasks * len(named)})
            lines.append(_("An expert who may not take one of them (paused, at their limit, tier, held it "
                           "before) or a task without a free slot stops the whole assignment, with the reason."))
        elif op == "golden":
            title = _("Mark the filtered tasks golden?")
            lines.append(ngettext("%(count)d of them holds regular work: then nothing is changed.",
                                  "%(count)d of them hold regular work: then nothing is changed.",
                                  preview.with_work) % {"count": preview.with_work})
        elif op == "overlap":
            title = _("Raise the overlap of the filtered tasks to %(value)s?") % {"value": value}
            lines.append(_("Full and complete tasks reopen for the extra experts; no work is removed."))
        else:
            title = _("Set the priority of the filtered tasks to %(value)s?") % {"value": value}
            lines.append(_("Experts draw the highest priority first, at random among equal ones."))
        lines.append(_("All of it happens in one step, or nothing does."))
        if preview.tasks > sync_max():
            lines.append(_("This set is large: it is applied in the background, and the next page shows "
                           "its progress."))
        return confirmation_page(request, Confirmation(
            title=title, consequences=lines, action_url=request.path, cancel_url=back,
            fields={**task_filter.as_fields(), "op": op, "value": value,
                    "experts": ",".join(str(e.pk) for e in named), "token": uuid.uuid4().hex},
            confirm_label=_("Apply"), danger=op == "golden"))
    # A post without the confirmation's token (a script) still applies once per post.
    token = request.POST.get("token", "").strip() or uuid.uuid4().hex
    asked = BatchRequest(op=op, task_filter=task_filter, value=value, experts=tuple(e.pk for e in named),
                         reason_code=reason_code)
    now = timezone.now()
    if op == "reject":
        total = submissions_filtered(project, task_filter, [e.pk for e in named]).count()
    else:
        total = tasks_filtered(project, task_filter).count()
    try:
        if total > sync_max():
            job, _new = batch_job_queue(project=project, by=user, request=asked, token=token, total=total, now=now)
            url = reverse("batch_job", args=[project.pk, job.pk])
            return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)
        job, fresh = batch_run_now(project=project, by=user, request=asked, token=token, total=total, now=now)
    except DomainError as exc:
        return _done(request, back, error=exc)
    if not fresh and job.status != BatchJob.Status.DONE:
        url = reverse("batch_job", args=[project.pk, job.pk])
        return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)
    text = batch_job_summary(job)
    if not fresh:
        text = _("This batch was already applied; nothing more was changed. %(summary)s") % {"summary": text}
    return _done(request, back, text=text)


def _reject_confirmation(request: HttpRequest, *, project: Project, task_filter: TaskFilter, named: list[User],
                         reason: str, reason_code: str, back: str) -> HttpResponse:
    """The step before rejecting the filtered set: how many submissions, whose, and the earnings reversed."""
    error: DomainError | None = None
    if not reason:
        error = DomainError("Give a reason for the rejection.", code="reason_required",
                            errors=[{"field": "reason", "message": "required"}])
    elif reason_code not in Assignment.RejectReason.values:
        error = DomainError("Unknown reason.", code=ErrorCode.REJECT_REASON_UNKNOWN)
    preview = rejections_preview(project, task_filter, [e.pk for e in named])
    if error is None and not preview.submissions:
        error = DomainError("No submission matches.", code=ErrorCode.BATCH_REJECT_NONE)
    if error is not None:
        return _done(request, back, error=error)
    names = ", ".join(f"{username} ({count})" for username, count in preview.experts)
    amounts = ", ".join(f"{amount} {currency}" for currency, amount in preview.earnings.items())
    lines = [
        ngettext("%(count)d task matches the filter.", "%(count)d tasks match the filter.", preview.tasks)
        % {"count": preview.tasks},
        _("Submissions of: %(names)s.") % {"names": names},
        _("The expert sees the reason on their statement and history: %(kind)s, “%(reason)s”.")
        % {"kind": Assignment.RejectReason(reason_code).label, "reason": reason},
        (_("Earnings reversed: %(amounts)s; each is deducted from the expert's next statement.")
         % {"amounts": amounts}) if amounts else _("No earning was posted for them: no money moves."),
        _("Their labels leave the consensus and the reports; the tasks go to other experts."),
        _("Work on golden tasks is never part of it."),
        _("All of it happens in one step, or nothing does."),
    ]
    if preview.submissions > sync_max():
        lines.append(_("This set is large: it is applied in the background, and the next page shows "
                       "its progress."))
    return confirmation_page(request, Confirmation(
        title=ngettext("Reject %(count)d submission?", "Reject %(count)d submissions?", preview.submissions)
        % {"count": preview.submissions},
        consequences=lines, action_url=request.path, cancel_url=back,
        fields={**task_filter.as_fields(), "op": "reject", "value": reason, "reason_code": reason_code,
                "experts": ",".join(str(e.pk) for e in named), "token": uuid.uuid4().hex},
        confirm_label=_("Reject and deduct"), danger=True))


def batch_job_summary(job: BatchJob) -> str:
    """What a finished job did, in the words the page and the message use."""
    changed = job.changed or 0
    if job.op == BatchJob.Op.REJECT:
        return ngettext("Done: %(count)d submission rejected.", "Done: %(count)d submissions rejected.",
                        changed) % {"count": changed}
    if job.op == BatchJob.Op.ASSIGN:
        return ngettext("Done: %(count)d lease created.", "Done: %(count)d leases created.", changed) % {
            "count": changed}
    return ngettext("Done: %(count)d task changed.", "Done: %(count)d tasks changed.", changed) % {"count": changed}


BATCH_JOB = "annotation/batch_job.html"


@login_required
@require_GET
def batch_job(request: HttpRequest, project_id: int, job_id: int) -> HttpResponse:
    """A batch job's progress while a worker applies it (the page polls), then its summary."""
    user: User = request.user  # type: ignore[assignment]  # behind login_required
    project = project_get_for_user(user, project_id, manage=True)
    job = BatchJob.objects.filter(pk=job_id, project=project).select_related("created_by").first()
    if job is None:
        raise NotFound("No such batch job.")
    error = batch_job_error(job)
    context = {"project": project, "job": job, "done": batch_job_progress(job),
               "active": job.status == BatchJob.Status.QUEUED,
               "summary": batch_job_summary(job) if job.status == BatchJob.Status.DONE else "",
               "error": error_message(error) if error is not None else "",
               "back": _batch_url(project.pk, TaskFilter.from_data(job.params).as_fields())}
    return render_page(request, BATCH_JOB, "progress", context)


@login_required
@require_POST
def batch_experts(request: HttpRequest, project_id: int) -> HttpResponse:
    """Pause or resume a set of experts, or hand an expert's open leases over to others."""
    user: User = request.user  # type: ignore[assignment]  # behind login_required
    project = project_get_for_user(user, project_id, manage=True)
    op = request.POST.get("op", "")
    back = _batch_url(project.pk)
    now = timezone.now()
    chosen = _ids(request, "experts")
    source = request.POST.get("from", "")
    if op not in ("pause", "resume", "handover"):
        return _done(request, back, error=DomainError("Unknown operation.", code=ErrorCode.INVALID))
    try:
        experts = experts_of_project(project, chosen)
        giver = experts_of_project(project, [source])[0] if op == "handover" else None
    except DomainError as exc:
        return _done(request, back, error=exc)
    names = ", ".join(e.username for e in experts)
    if not confirmation_given(request):
        if op == "handover":
            assert giver is not None
            leases = hand_over_preview(project=project, expert=giver, now=now)
            title = _("Hand %(name)s's open leases over?") % {"name": giver.username}
            lines = [ngettext("%(count)d open lease moves, with its draft, to one of: %(names)s.",
                              "%(count)d open leases move, with their drafts, to: %(names)s.", leases)
                     % {"count": leases, "names": names},
                     _("A lease none of them may take returns to the pool.")]
        else:
            title = (_("Pause %(count)d experts?") if op == "pause" else _("Resume %(count)d experts?")) \
                % {"count": len(experts)}
            lines = [names, _("A paused expert gets no new task in any project; their open leases stay theirs "
                              "until handed over.") if op == "pause"
                     else _("A resumed expert may take tasks again.")]
        lines.append(_("All of it happens in one step, or nothing does."))
        return confirmation_page(request, Confirmation(
            title=title, consequences=lines, action_url=request.path, cancel_url=back,
            fields={"op": op, "experts": ",".join(str(e.pk) for e in experts), "from": source},
            confirm_label=_("Apply"), danger=op != "resume"))
    try:
        if op == "handover":
            assert giver is not None
            result = leases_hand_over(project=project, expert=giver, to=experts, by=user, now=now)
            text = _("Done: %(moved)d leases handed over, %(returned)d returned to the pool.") % {
                "moved": len(result.moved), "returned": len(result.returned)}
        else:
            changed = batch_experts_pause(project=project, user_ids=[e.pk for e in experts], pause=op == "pause",
                                          by=user, now=now)
            text = ngettext("Done: %(count)d expert changed.", "Done: %(count)d experts changed.",
                            changed) % {"count": changed}
    except DomainError as exc:
        return _done(request, back, error=exc)
    return _done(request, back, text=text)
