"""Reminders and risk alerts, sent as notifications by a beat task (`annotation.reminders_send`).

Four kinds, each switched and tuned per project: a lease about to end (to its expert), an
expert idle for some days while work is left (to them), a drift alert or a fall in control
accuracy (to the project's PMs), and a forecast finish past the due date (to the PMs). Each
event has a key in `SentReminder` (unique), written in the same transaction as its
notification, so an event is told once however often, or however concurrently, the beat runs.
"""
import logging
import math
from collections import defaultdict
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Max, Sum
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _

from annotation.agreement.selectors import agreement_report_latest
from annotation.models import Assignment, ControlResult, Project, ProjectState, SentReminder, Task
from annotation.models.project import REMIND_LEASE_MINUTES
from annotation.review.services import submission_returns_lapse
from annotation.selectors import project_experts, project_managers
from experts.models import ExpertProfile, User
from experts.notifications import notification_send

logger = logging.getLogger(__name__)
# A fall in control accuracy: the last window against the window before, by this many points.
CONTROL_FALL_POINTS = 15
THROUGHPUT_DAYS = 7
# The signals of a quality alert, stored in English and shown in the reader's language
# (`experts.notifications.TRANSLATED_PARAMS`).
SIGNALS = {
    "peer": _("drift in peer agreement"),
    "golden": _("drift in golden accuracy"),
    "control": _("control accuracy fell"),
}


def _signal(name: str) -> str:
    """The signal's English label (its msgid): notifications translate it when shown."""
    with translation.override("en"):
        return str(SIGNALS[name])


def _send_once(*, key: str, kind: str, project: Project, users: list[User], params: dict, now: datetime,
               link: str = "") -> bool:
    """Notify `users` of the event `key` unless it was told already; True when sent now."""
    if not users or SentReminder.objects.filter(key=key).exists():
        return False
    try:
        with transaction.atomic():
            SentReminder.objects.create(key=key, kind=kind, project=project, sent_at=now)
            notification_send(users=users, kind=kind, params={"project": project.name, **params}, now=now, link=link)
    except IntegrityError:
        return False  # a concurrent beat told it first
    return True


def _active(qs):
    return qs.filter(state=ProjectState.ACTIVE, archived_at__isnull=True)


def leases_expiring_remind(*, now: datetime) -> int:
    """Remind each expert whose work lease ends within the project's reminder minutes.

    One reminder per lease and expiry time: a lease that was extended and nears its end again
    is a new event.
    """
    horizon = now + timedelta(minutes=REMIND_LEASE_MINUTES.high or 120)
    leases = (Assignment.objects.filter(status=Assignment.Status.LEASED, kind=Assignment.Kind.WORK,
                                        expires_at__gt=now, expires_at__lte=horizon,
                                        task__project__remind_lease_expiring=True,
                                        task__project__state=ProjectState.ACTIVE)
              .select_related("task__project", "task__response__question", "expert").order_by("expires_at"))
    sent = 0
    for lease in leases:
        project = lease.task.project
        left = (lease.expires_at - now).total_seconds()
        if left > project.remind_lease_minutes * 60:
            continue
        sent += _send_once(key=f"lease_expiring:{lease.pk}:{lease.expires_at.isoformat()}", kind="lease_expiring",
                           project=project, users=[lease.expert], now=now, link=reverse("annotate", args=[lease.pk]),
                           params={"question": lease.task.response.question.external_id,
                                   "minutes": max(1, math.ceil(left / 60))})
    return sent


def experts_idle_remind(*, now: datetime) -> int:
    """Remind each active expert of a project who has not leased a task there for the project's
    idle days while tasks they could take are open. Once per idle spell (keyed by their last lease)."""
    sent = 0
    for project in _active(Project.objects.filter(remind_idle_days__gt=0)):
        experts = list(project_experts(project).filter(expert_profile__status=ExpertProfile.Status.ACTIVE))
        if not experts:
            continue
        cutoff = now - timedelta(days=project.remind_idle_days)
        last = dict(Assignment.objects.filter(task__project=project, expert__in=experts).values("expert_id")
                    .annotate(last=Max("leased_at")).values_list("expert_id", "last"))
        open_tasks = Task.objects.filter(project=project, status=Task.Status.OPEN, is_golden=False)
        for expert in experts:
            # An expert who never started is not idle in this sense: they have no spell to break.
            last_at = last.get(expert.pk)
            if last_at is None or last_at > cutoff:
                continue
            waiting = open_tasks.exclude(assignments__expert=expert).count()
            if not waiting:
                continue
            sent += _send_once(key=f"expert_idle:{project.pk}:{expert.pk}:{last_at.isoformat()}", kind="expert_idle",
                               project=project, users=[expert], now=now, link=reverse("home"),
                               params={"days": (now - last_at).days, "count": waiting})
    return sent


def _pct(value) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def _drift_alerts(project: Project, managers: list[User], now: datetime) -> int:
    report = agreement_report_latest(project)
    if report is None:
        return 0
    sent = 0
    for row in report.payload.get("experts", []):
        for series in ("peer", "golden"):
            data = row.get(series) or {}
            if not data.get("alert_active"):
                continue
            lowest = (data.get("alerts") or [{}])[-1].get("lowest")
            # One alert per drift episode: a new episode raises the count.
            key = f"quality_alert:drift:{project.pk}:{row['user_id']}:{series}:{data.get('alert_count', 0)}"
            sent += _send_once(key=key, kind="quality_alert", project=project, users=managers, now=now,
                               link=reverse("quality_dashboard", args=[project.pk]),
                               params={"expert": row.get("pseudonym", ""), "signal": _signal(series),
                                       "value": f"{_pct(data.get('baseline'))} → {_pct(lowest)}"})
    return sent


def _control_falls(project: Project, managers: list[User], now: datetime) -> int:
    """Experts whose control accuracy over the last window is CONTROL_FALL_POINTS below the window before."""
    window = project.control_window
    series: dict[int, list[tuple[int, int]]] = defaultdict(list)
    counts: dict[int, int] = defaultdict(int)
    for expert_id, correct, total in (ControlResult.objects.filter(project=project)
                                      .order_by("expert_id", "-scored_at", "-pk")
                                      .values_list("expert_id", "items_correct", "items_total")):
        counts[expert_id] += 1
        if len(series[expert_id]) < 2 * window:
            series[expert_id].append((correct, total))
    sent = 0
    pseudonyms = dict(ExpertProfile.objects.filter(user_id__in=list(series)).values_list("user_id", "pseudonym"))
    for expert_id, rows in series.items():
        if len(rows) < 2 * window:
            continue
        recent, before = rows[:window], rows[window:]
        recent_pct = 100 * sum(c for c, _ in recent) / max(1, sum(t for _, t in recent))
        before_pct = 100 * sum(c for c, _ in before) / max(1, sum(t for _, t in before))
        if before_pct - recent_pct < CONTROL_FALL_POINTS:
            continue
        # At most once per window of control tasks the expert completes.
        key = f"quality_alert:control:{project.pk}:{expert_id}:{counts[expert_id] // window}"
        sent += _send_once(key=key, kind="quality_alert", project=project, users=managers, now=now,
                           link=reverse("quality_expert", args=[project.pk, expert_id]),
                           params={"expert": pseudonyms.get(expert_id, ""), "signal": _signal("control"),
                                   "value": f"{before_pct:.0f}% → {recent_pct:.0f}%"})
    return sent


def quality_alerts_send(*, now: datetime) -> int:
    """Tell each project's PMs of an expert's drift alert (the latest agreement report) or fall in
    control accuracy, once per event."""
    sent = 0
    for project in _active(Project.objects.filter(alert_quality=True)):
        managers = list(project_managers(project))
        if managers:
            sent += _drift_alerts(project, managers, now) + _control_falls(project, managers, now)
    return sent


def project_forecast(project: Project, *, now: datetime) -> tuple[int, float, datetime | None]:
    """(submissions still needed, submissions a day over the last 7 days, forecast finish or None)."""
    remaining = (Task.objects.filter(project=project, is_golden=False)
                 .exclude(status__in=[Task.Status.COMPLETE, Task.Status.SUPERSEDED])
                 .aggregate(n=Sum("overlap") - Sum("submitted_count"))["n"]) or 0
    done = Assignment.objects.filter(task__project=project, kind=Assignment.Kind.WORK,
                                     status=Assignment.Status.SUBMITTED,
                                     submitted_at__gt=now - timedelta(days=THROUGHPUT_DAYS)).count()
    rate = done / THROUGHPUT_DAYS
    if remaining <= 0:
        return 0, rate, now
    if rate == 0:
        return remaining, rate, None
    return remaining, rate, now + timedelta(days=math.ceil(remaining / rate))


def deadline_risks_send(*, now: datetime) -> int:
    """Tell the PMs of each project whose forecast finish passes its due date, once per due date."""
    sent = 0
    projects = _active(Project.objects.filter(alert_deadline_risk=True, due_date__isnull=False))
    for project in projects:
        remaining, rate, forecast = project_forecast(project, now=now)
        if not remaining:
            continue
        assert project.due_date is not None
        if forecast is not None and timezone.localdate(forecast) <= project.due_date:
            continue
        sent += _send_once(key=f"deadline_risk:{project.pk}:{project.due_date.isoformat()}", kind="deadline_risk",
                           project=project, users=list(project_managers(project)), now=now,
                           link=reverse("project_detail", args=[project.pk]),
                           params={"forecast": timezone.localdate(forecast).isoformat() if forecast else "—",
                                   "due": project.due_date.isoformat(), "remaining": remaining,
                                   "rate": f"{rate:.1f}"})
    return sent


def reminders_send(*, now: datetime) -> dict[str, int]:
    """Everything the beat does every few minutes; returns how many of each went out."""
    result = {
        "returns_lapsed": submission_returns_lapse(now=now),
        "lease_expiring": leases_expiring_remind(now=now),
        "expert_idle": experts_idle_remind(now=now),
        "quality_alert": quality_alerts_send(now=now),
        "deadline_risk": deadline_risks_send(now=now),
    }
    if any(result.values()):
        logger.info("reminders sent", extra=result)
    return result


__all__ = ["project_forecast", "reminders_send"]
