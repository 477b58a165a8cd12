"""Notifications sent where the money and the dataset change: statements issued, submissions rejected."""
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone, translation

from annotation.models import Task
from experts.models import Notification
from experts.notification_email import notification_email_preferences_update
from experts.notifications import notification_text
from payments.ledger import ledger_post_earning
from payments.models import Statement
from payments.services import statement_settle_period, submission_reject
from tests.factories import PMFactory
from tests.payments.factories import T0, WEEK_END, make_expert, make_paid_project, submit, submit_and_post

pytestmark = pytest.mark.django_db


def test_issuing_statements_tells_each_expert_with_a_statement_and_nobody_else():
    alice, bob, idle = make_expert(), make_expert("silver"), make_expert()
    project = make_paid_project(experts=[alice, bob, idle])
    first = submit_and_post(project, alice, T0)
    submit_and_post(project, alice, T0 + timedelta(hours=1))
    submit_and_post(project, bob, T0 + timedelta(hours=2))

    statement_settle_period(period_id=first.period_id, now=WEEK_END)

    note = Notification.objects.get(user=alice)
    statement = Statement.objects.get(expert=alice)
    assert note.kind == "statement_issued" and note.link == f"/payments/statements/{statement.pk}/"
    assert note.params["period"] == "2025-03-03 – 2025-03-09"
    assert (note.params["payable"], note.params["count"], note.params["currency"]) == ("10.00", 2, "CNY")
    with translation.override("zh-hans"):
        assert "10.00 CNY" in notification_text(note) and "2 条记录" in notification_text(note)
    assert Notification.objects.filter(user=bob, kind="statement_issued").count() == 1
    assert not Notification.objects.filter(user=idle).exists()


def test_settling_again_notifies_nobody_twice():
    expert = make_expert()
    project = make_paid_project(experts=[expert])
    entry = submit_and_post(project, expert, T0)

    statement_settle_period(period_id=entry.period_id, now=WEEK_END)
    statement_settle_period(period_id=entry.period_id, now=WEEK_END + timedelta(hours=1))

    assert Notification.objects.filter(user=expert, kind="statement_issued").count() == 1


def test_an_expert_who_opted_in_gets_the_statement_by_email_once_the_settlement_commits(
        django_capture_on_commit_callbacks):
    expert = make_expert()
    expert.email = "lin@example.org"
    expert.save(update_fields=["email"])
    notification_email_preferences_update(user=expert, kinds=["statement_issued"], language="zh-hans", now=T0)
    project = make_paid_project(experts=[expert])
    entry = submit_and_post(project, expert, T0)

    with django_capture_on_commit_callbacks(execute=True):
        statement_settle_period(period_id=entry.period_id, now=WEEK_END)

    note = Notification.objects.get(user=expert)
    assert (note.email_status, note.email_error) == ("sent", "")
    assert [m.subject for m in mail.outbox] == ["Rubrica：对账单已出具"]


def test_a_rejection_tells_the_expert_the_reason_and_the_pms_words_with_a_link_to_their_history():
    pm, expert = PMFactory(), make_expert()
    project = make_paid_project(experts=[expert, pm], n_questions=1)
    assignment = submit(project, expert, timezone.now())
    ledger_post_earning(assignment_id=assignment.pk, now=timezone.now())
    question = Task.objects.get(pk=assignment.task_id).response.question.external_id

    submission_reject(actor=pm, assignment_id=assignment.pk, reason="all misses in 3 s", reason_code="spam",
                      now=timezone.now())

    note = Notification.objects.get(user=expert)
    assert note.kind == "submission_rejected" and note.link == "/me/history/"
    assert note.params["question"] == question and note.params["text"] == "all misses in 3 s"
    with translation.override("zh-hans"):
        text = notification_text(note)
    assert "垃圾提交" in text and "all misses in 3 s" in text and question in text
    assert not Notification.objects.filter(user=pm).exists()


def test_a_rejection_refused_as_a_duplicate_sends_nothing_more():
    pm, expert = PMFactory(), make_expert()
    project = make_paid_project(experts=[expert, pm], n_questions=1)
    assignment = submit(project, expert, timezone.now())
    ledger_post_earning(assignment_id=assignment.pk, now=timezone.now())
    submission_reject(actor=pm, assignment_id=assignment.pk, reason="spam", now=timezone.now())

    with pytest.raises(Exception):  # noqa: B017 - already rejected, whichever guard refuses it
        submission_reject(actor=pm, assignment_id=assignment.pk, reason="spam", now=timezone.now())

    assert Notification.objects.filter(user=expert, kind="submission_rejected").count() == 1
