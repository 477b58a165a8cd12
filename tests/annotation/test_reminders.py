"""Reminders and risk alerts: each goes to the people concerned, once per event, and can be switched off."""
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone, translation

from annotation.assignment.services import assignment_claim_next, lease_extend
from annotation.models import AgreementReport, GoldenReference, Project
from annotation.review.reminders import (
    deadline_risks_send,
    experts_idle_remind,
    leases_expiring_remind,
    quality_alerts_send,
    reminders_send,
)
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from experts.models import ExpertProfile, Notification
from experts.notifications import notification_text
from tests.factories import PMFactory
from tests.payments.factories import make_expert, make_paid_project
from tests.support.quality import calibrated, make_golden_project
from tests.support.threads import run_together


def _set(project: Project, **values) -> None:
    Project.objects.filter(pk=project.pk).update(**values)
    project.refresh_from_db()


def _kinds(user) -> list[str]:
    return list(Notification.objects.filter(user=user).values_list("kind", flat=True))


@pytest.fixture
def pm():
    return PMFactory()


@pytest.fixture
def expert():
    return make_expert()


@pytest.fixture
def project(pm, expert):
    return make_paid_project(experts=[pm, expert], n_questions=4)


@pytest.mark.django_db
def test_an_expert_is_reminded_once_before_their_lease_ends_and_again_after_it_was_extended(project, expert):
    now = timezone.now()
    lease = assignment_claim_next(project=project, expert=expert, now=now - timedelta(minutes=40))
    assert lease.expires_at == now + timedelta(minutes=5)

    assert leases_expiring_remind(now=now) == 1
    assert leases_expiring_remind(now=now + timedelta(minutes=1)) == 0
    note = Notification.objects.get(user=expert, kind="lease_expiring")
    assert "ends in 5 minutes" in note.message and note.link == f"/assignments/{lease.pk}/"

    lease_extend(assignment=lease, now=now + timedelta(minutes=2))  # 45 more minutes
    assert leases_expiring_remind(now=now + timedelta(minutes=3)) == 0  # far from the end again
    assert leases_expiring_remind(now=now + timedelta(minutes=40)) == 1
    assert _kinds(expert) == ["lease_expiring", "lease_expiring"]


@pytest.mark.django_db
def test_the_lease_reminder_follows_the_projects_minutes_and_its_switch(project, expert):
    now = timezone.now()
    assignment_claim_next(project=project, expert=expert, now=now - timedelta(minutes=25))  # 20 min left
    assert leases_expiring_remind(now=now) == 0
    _set(project, remind_lease_minutes=30, remind_lease_expiring=False)
    assert leases_expiring_remind(now=now) == 0

    _set(project, remind_lease_expiring=True)

    assert leases_expiring_remind(now=now) == 1


@pytest.mark.django_db
def test_an_idle_expert_with_work_left_is_reminded_once_per_idle_spell(project, expert):
    now = timezone.now()
    lease = assignment_claim_next(project=project, expert=expert, now=now - timedelta(days=4))
    labels = {i.item_key: 1 for i in rubric_items_for_task(lease.task)}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=now - timedelta(days=4))
    resting = make_expert()  # never started: not idle
    project_add_member(project=project, user=resting)

    assert experts_idle_remind(now=now) == 1
    assert experts_idle_remind(now=now + timedelta(hours=1)) == 0
    note = Notification.objects.get(user=expert, kind="expert_idle")
    assert "for 4 days; 3 tasks are waiting" in note.message
    assert _kinds(resting) == []
    # Back at work, then idle again: a new spell.
    assignment_claim_next(project=project, expert=expert, now=now)
    assert experts_idle_remind(now=now + timedelta(days=2)) == 0
    assert experts_idle_remind(now=now + timedelta(days=4)) == 1


@pytest.mark.django_db
def test_idle_reminders_are_off_at_zero_days_and_skip_paused_experts(project, expert):
    now = timezone.now()
    assignment_claim_next(project=project, expert=expert, now=now - timedelta(days=10))
    _set(project, remind_idle_days=0)
    assert experts_idle_remind(now=now) == 0
    _set(project, remind_idle_days=3)
    ExpertProfile.objects.filter(user=expert).update(status=ExpertProfile.Status.PAUSED)

    assert experts_idle_remind(now=now) == 0


def _drift_report(project: Project, *, count: int, active: bool = True) -> AgreementReport:
    row = {"user_id": 1, "pseudonym": "E-DRIFT001", "peer": {"alert_active": active, "alert_count": count,
                                                            "baseline": 0.9, "alerts": [{"lowest": 0.6}]},
           "golden": {"alert_active": False}}
    return AgreementReport.objects.create(project=project, status=AgreementReport.Status.DONE,
                                          requested_at=timezone.now(), computed_at=timezone.now(),
                                          payload={"experts": [row]})


@pytest.mark.django_db
def test_the_pms_hear_of_a_drift_alert_once_per_episode_and_no_one_else_does(project, pm, expert):
    other_pm = PMFactory()
    make_paid_project(experts=[other_pm], n_questions=1)
    _drift_report(project, count=1)

    assert quality_alerts_send(now=timezone.now()) == 1
    assert quality_alerts_send(now=timezone.now()) == 0
    note = Notification.objects.get(user=pm, kind="quality_alert")
    assert "E-DRIFT001" in note.message and "drift in peer agreement (90% → 60%)" in note.message
    assert _kinds(other_pm) == [] and _kinds(expert) == []
    # Shown in the reader's language, the signal too.
    with translation.override("zh-hans"):
        assert "同伴一致性漂移" in notification_text(note)

    _drift_report(project, count=2)  # a new episode
    assert quality_alerts_send(now=timezone.now()) == 1
    _set(project, alert_quality=False)
    _drift_report(project, count=3)
    assert quality_alerts_send(now=timezone.now()) == 0


@pytest.mark.django_db
def test_the_pms_hear_once_when_an_experts_control_accuracy_falls():
    pm = PMFactory()
    project = make_golden_project(golden=16, regular=4, pm=pm)
    project_add_member(project=project, user=pm)
    _set(project, control_rate_pct=100, control_window=2, control_pause_below_pct=0)
    expert = calibrated(project)
    now = timezone.now()
    for n, right in enumerate([True, True, False, False]):
        lease = assignment_claim_next(project=project, expert=expert, now=now + timedelta(minutes=n))
        refs = dict(GoldenReference.objects.filter(task=lease.task).values_list("rubric_item__item_key", "value"))
        labels = {k: v if right else 1 - v for k, v in refs.items()}
        labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=now + timedelta(minutes=n, seconds=30))

    assert quality_alerts_send(now=now + timedelta(minutes=10)) == 1
    assert quality_alerts_send(now=now + timedelta(minutes=11)) == 0
    note = Notification.objects.get(user=pm, kind="quality_alert")
    assert "control accuracy fell (100% → 0%)" in note.message
    assert _kinds(expert) == []


@pytest.mark.django_db
def test_the_pms_hear_once_when_the_forecast_passes_the_due_date(project, pm, expert):
    now = timezone.now()
    lease = assignment_claim_next(project=project, expert=expert, now=now - timedelta(days=1))
    labels = {i.item_key: 1 for i in rubric_items_for_task(lease.task)}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=now - timedelta(days=1))
    # 11 submissions left at 1/7 a day: about 77 days.
    _set(project, due_date=timezone.localdate(now) + timedelta(days=10))

    assert deadline_risks_send(now=now) == 1
    assert deadline_risks_send(now=now) == 0
    note = Notification.objects.get(user=pm, kind="deadline_risk")
    assert "11 items left at 0.1 a day" in note.message
    assert _kinds(expert) == []
    # A new due date is a new event; one far enough away is no risk.
    _set(project, due_date=timezone.localdate(now) + timedelta(days=20))
    assert deadline_risks_send(now=now) == 1
    _set(project, due_date=timezone.localdate(now) + timedelta(days=200))
    assert deadline_risks_send(now=now) == 0


@pytest.mark.django_db
def test_a_project_on_time_or_with_the_alert_off_is_not_reported(project, pm):
    _set(project, due_date=timezone.localdate() + timedelta(days=3), alert_deadline_risk=False)
    assert deadline_risks_send(now=timezone.now()) == 0
    _set(project, alert_deadline_risk=True, due_date=None)
    assert deadline_risks_send(now=timezone.now()) == 0


@pytest.mark.django_db
def test_the_beat_runs_every_reminder_every_few_minutes(project):
    entry = next(e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == "annotation.reminders_send")
    assert entry["schedule"] <= 600

    assert reminders_send(now=timezone.now()) == {"returns_lapsed": 0, "lease_expiring": 0, "expert_idle": 0,
                                                  "quality_alert": 0, "deadline_risk": 0}


@pytest.mark.django_db(transaction=True)
def test_two_beats_at_once_tell_a_lease_reminder_once(project, expert):
    now = timezone.now()
    assignment_claim_next(project=project, expert=expert, now=now - timedelta(minutes=40))
    results = run_together(lambda: leases_expiring_remind(now=now), 2)

    assert sorted(results) == [0, 1]
    assert Notification.objects.filter(user=expert, kind="lease_expiring").count() == 1
