"""Notification emails: opt-in per kind, sent once after commit, nothing lost when the mail server fails."""
import email
import smtplib
import socketserver
import threading
import time
from datetime import timedelta
from email.header import decode_header, make_header

import pytest
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend
from django.db import connection
from django.utils import timezone

from experts.models import Notification, NotificationPreference
from experts.notification_email import (
    notification_email_preferences_update,
    notification_email_resend,
    notification_email_send,
    notification_emails_sweep,
)
from experts.notifications import notification_send
from experts.tasks import notification_email_send_task
from tests.factories import ExpertFactory, PMFactory
from tests.support.threads import run_together

pytestmark = pytest.mark.django_db

SMTP_PORTS = range(8631, 8639)  # this session's port range is 8630-8639
CLOSED_PORT = 8639
TIER_PARAMS = {"from_tier": "bronze", "to_tier": "silver", "reason": "reviewed"}


class RefusingBackend(BaseEmailBackend):
    """A mail server that is down."""

    def send_messages(self, email_messages):
        raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")


class SlowBackend(BaseEmailBackend):
    """A mail server that takes half a second, long enough for a second worker to arrive."""

    sent: list = []

    def send_messages(self, email_messages):
        time.sleep(0.5)
        SlowBackend.sent.extend(email_messages)
        return len(email_messages)


def _expert(*, kinds=("tier_changed",), language="zh-hans", address="lin@example.org"):
    expert = ExpertFactory(email=address)
    notification_email_preferences_update(user=expert, kinds=kinds, language=language, now=timezone.now())
    return expert


def _notify(expert, *, kind="tier_changed", params=None, link="/me/portrait/"):
    notification_send(users=[expert], kind=kind, params=params or TIER_PARAMS, now=timezone.now(), link=link)
    return Notification.objects.filter(user=expert).latest("pk")


def test_an_opted_in_expert_gets_exactly_one_email_in_chinese_after_the_commit(
        django_capture_on_commit_callbacks, settings):
    settings.SITE_URL = "https://rubrica.example.cn"
    expert = _expert()

    with django_capture_on_commit_callbacks(execute=True):
        note = _notify(expert)
        assert mail.outbox == []  # nothing is sent inside the transaction that wrote it

    note.refresh_from_db()
    assert len(mail.outbox) == 1
    sent = mail.outbox[0]
    assert sent.to == ["lin@example.org"]
    assert sent.subject == "Rubrica：等级已变更"
    assert sent.body.startswith("你的等级已从青铜变为")
    assert "https://rubrica.example.cn/me/portrait/" in sent.body
    assert "https://rubrica.example.cn/me/profile/" in sent.body
    assert (note.email_status, note.email_attempts, note.email_sent_at is not None) == ("sent", 1, True)


def test_the_email_is_in_the_language_the_preference_was_saved_in(django_capture_on_commit_callbacks):
    expert = _expert(language="en")

    with django_capture_on_commit_callbacks(execute=True):
        _notify(expert)

    assert mail.outbox[0].subject == "Rubrica: Tier changed"
    assert "Your tier changed from Bronze to Silver: reviewed" in mail.outbox[0].body


@pytest.mark.parametrize("case", ["not opted in", "other kind", "no address", "opted out again"])
def test_no_email_without_an_opt_in_for_the_kind_and_an_address(case, django_capture_on_commit_callbacks):
    expert = {
        "not opted in": lambda: ExpertFactory(email="lin@example.org"),
        "other kind": lambda: _expert(kinds=("statement_issued",)),
        "no address": lambda: _expert(address=""),
        "opted out again": lambda: _expert(),
    }[case]()
    if case == "opted out again":
        notification_email_preferences_update(user=expert, kinds=[], language="zh-hans", now=timezone.now())

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        note = _notify(expert)

    assert mail.outbox == [] and callbacks == []
    assert note.email_status == ""


def test_a_retried_or_duplicated_task_never_sends_twice(django_capture_on_commit_callbacks):
    expert = _expert()
    with django_capture_on_commit_callbacks(execute=True):
        note = _notify(expert)

    again = [notification_email_send_task.apply(kwargs={"notification_id": note.pk}).get() for _ in range(2)]

    assert again == ["skipped", "skipped"]
    assert len(mail.outbox) == 1
    note.refresh_from_db()
    assert note.email_attempts == 1


@pytest.mark.django_db(transaction=True)
def test_two_workers_sending_the_same_email_at_once_send_it_once(settings):
    settings.EMAIL_BACKEND = "tests.experts.test_notifications_email.SlowBackend"
    SlowBackend.sent = []
    expert = _expert()
    note = Notification.objects.create(user=expert, kind="tier_changed", params=TIER_PARAMS, message="m",
                                       created_at=timezone.now(), email_status="pending")
    results = run_together(lambda: notification_email_send(notification_id=note.pk, now=timezone.now()), 2)

    assert sorted(results) == ["sent", "skipped"]
    assert len(SlowBackend.sent) == 1
    note.refresh_from_db()
    assert (note.email_status, note.email_attempts) == ("sent", 1)


def test_a_kind_turned_off_before_the_send_cancels_the_email(settings):
    expert = _expert()
    note = _notify(expert)  # the on-commit send never runs in this test's transaction
    notification_email_preferences_update(user=expert, kinds=[], language="zh-hans", now=timezone.now())

    assert notification_email_send(notification_id=note.pk, now=timezone.now()) == "cancelled"
    note.refresh_from_db()
    assert note.email_status == "" and mail.outbox == []


def test_a_failing_mail_server_leaves_the_email_pending_and_a_later_sweep_sends_it(
        django_capture_on_commit_callbacks, settings):
    settings.EMAIL_BACKEND = "tests.experts.test_notifications_email.RefusingBackend"
    expert = _expert()

    with django_capture_on_commit_callbacks(execute=True):
        note = _notify(expert)  # the eager task fails and leaves the email to the sweep; the caller sees nothing

    note.refresh_from_db()
    assert (note.email_status, note.email_attempts) == ("pending", 1)
    assert "SMTPServerDisconnected" in note.email_error
    # Too soon: the sweep leaves an email alone for a few minutes after its last try.
    assert notification_emails_sweep(now=timezone.now()) == 0

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert notification_emails_sweep(now=timezone.now() + timedelta(minutes=6)) == 1

    note.refresh_from_db()
    assert (note.email_status, note.email_attempts, note.email_error) == ("sent", 2, "")
    assert len(mail.outbox) == 1
    assert notification_emails_sweep(now=timezone.now() + timedelta(hours=1)) == 0


def test_after_the_last_allowed_attempt_the_email_is_failed_and_an_admin_can_queue_it_again(
        django_capture_on_commit_callbacks, settings):
    settings.EMAIL_BACKEND = "tests.experts.test_notifications_email.RefusingBackend"
    settings.RUBRICA_NOTIFICATION_EMAIL_MAX_ATTEMPTS = 2
    expert = _expert()
    with django_capture_on_commit_callbacks(execute=True):
        note = _notify(expert)

    notification_emails_sweep(now=timezone.now() + timedelta(minutes=6))

    note.refresh_from_db()
    assert (note.email_status, note.email_attempts) == ("failed", 2)
    assert notification_emails_sweep(now=timezone.now() + timedelta(hours=1)) == 0
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    with django_capture_on_commit_callbacks(execute=True):
        assert notification_email_resend(notification_ids=[note.pk]) == 1
    note.refresh_from_db()
    assert note.email_status == "sent" and len(mail.outbox) == 1


def test_the_send_task_retries_mail_errors_with_backoff_and_a_limit():
    task = notification_email_send_task
    assert task.name == "experts.notification_email_send"
    assert task.max_retries == 5 and task.retry_backoff and task.acks_late
    assert any(issubclass(e, Exception) and e.__name__ == "MailNotSent" for e in task.autoretry_for)


def test_the_sweep_runs_from_beat(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["experts-notification-emails-sweep"]
    assert entry["task"] == "experts.notification_emails_sweep" and entry["schedule"] <= 600


class _SmtpSink(socketserver.StreamRequestHandler):
    """The few SMTP replies Django's backend needs; every message it receives lands in `server.received`."""

    def reply(self, line: str) -> None:
        self.wfile.write(f"{line}\r\n".encode())

    def handle(self) -> None:
        self.reply("220 sink ready")
        while line := self.rfile.readline():
            verb = line.decode().strip().split(" ")[0].upper()
            if verb == "EHLO":
                self.reply("250-sink")
                self.reply("250 8BITMIME")
            elif verb == "DATA":
                self.reply("354 end with .")
                data = b"".join(iter(self.rfile.readline, b".\r\n"))
                self.server.received.append(data)  # type: ignore[attr-defined]
                self.reply("250 queued")
            elif verb == "QUIT":
                self.reply("221 bye")
                self.rfile.read()  # the client closes first, so the port is not left in TIME_WAIT here
                return
            else:  # HELO, MAIL, RCPT, RSET, NOOP
                self.reply("250 ok")


class _SinkServer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True  # a rerun within TIME_WAIT binds the same port


@pytest.fixture
def smtp_sink():
    server = None
    for port in SMTP_PORTS:  # a port of a run a moment ago may still be taken
        try:
            server = _SinkServer(("127.0.0.1", port), _SmtpSink)
            break
        except OSError:
            continue
    assert server is not None, "no free port in 8631-8638"
    server.daemon_threads = True
    server.received = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_real_smtp_server_on_loopback_receives_the_email(smtp_sink, settings, django_capture_on_commit_callbacks):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", smtp_sink.server_address[1], 5
    settings.SITE_URL = "http://rubrica.test"
    expert = _expert(kinds=("statement_issued",))

    with django_capture_on_commit_callbacks(execute=True):
        note = _notify(expert, kind="statement_issued", link="/payments/statements/7/",
                       params={"project": "共情评测", "period": "2025-03-03 – 2025-03-09", "payable": "16.00",
                               "currency": "CNY", "count": 3})

    assert len(smtp_sink.received) == 1
    message = email.message_from_bytes(smtp_sink.received[0])
    body = message.get_payload(decode=True).decode(message.get_content_charset())
    assert str(make_header(decode_header(message["Subject"]))) == "Rubrica：对账单已出具"
    assert message["To"] == "lin@example.org"
    assert "「共情评测」" in body and "16.00 CNY" in body
    assert "http://rubrica.test/payments/statements/7/" in body
    note.refresh_from_db()
    assert note.email_status == "sent"


def test_a_closed_loopback_port_counts_as_a_failed_attempt(settings, django_capture_on_commit_callbacks):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", CLOSED_PORT, 2
    expert = _expert()

    with django_capture_on_commit_callbacks(execute=True):
        note = _notify(expert)

    note.refresh_from_db()
    assert (note.email_status, note.email_attempts) == ("pending", 1)
    assert "ConnectionRefusedError" in note.email_error


def test_one_notification_to_many_reads_the_preferences_once(django_assert_max_num_queries):
    experts = [_expert() for _ in range(5)] + [ExpertFactory() for _ in range(5)]

    # One statement on PostgreSQL: the insert decides, row by row, who is emailed.
    with django_assert_max_num_queries(1 if connection.vendor == "postgresql" else 2):
        notification_send(users=experts, kind="tier_changed", params=TIER_PARAMS, now=timezone.now())

    assert set(Notification.objects.filter(email_status="pending").values_list("user_id", flat=True)) == {
        e.pk for e in experts[:5]}
    assert Notification.objects.filter(email_status="").count() == 5


# --- The preferences on the profile -----------------------------------------------------


def test_the_profile_lists_every_kind_as_a_checkbox_in_chinese_with_the_saved_ones_ticked(client):
    expert = _expert(kinds=("statement_issued", "mention"))
    client.force_login(expert)

    page = client.get("/me/profile/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()

    assert "邮件通知" in page and "lin@example.org" in page
    assert 'name="email_kinds" value="statement_issued" checked' in page
    assert 'name="email_kinds" value="mention" checked' in page
    assert 'name="email_kinds" value="submission_rejected">' in page
    assert "需要重新校准" in page and "提交被驳回" in page and "有人@了我" in page
    assert 'value="expert_paused"' not in page  # a PM's kind


def test_saving_the_choices_on_the_profile_writes_one_row_per_kind_in_the_page_language(client):
    expert = ExpertFactory(email="lin@example.org")
    client.force_login(expert)

    response = client.post("/notifications/email/",
                           {"email_kinds": ["tier_changed", "submission_rejected"], "next": "my_profile"},
                           HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 302 and response.url == "/me/profile/#email"
    on = set(NotificationPreference.objects.filter(user=expert, email=True).values_list("kind", flat=True))
    assert on == {"tier_changed", "submission_rejected"}
    assert set(NotificationPreference.objects.filter(user=expert).values_list("language", flat=True)) == {"en"}


def test_an_unknown_kind_saves_nothing_and_says_why(client):
    expert = _expert(kinds=("tier_changed",))
    client.force_login(expert)

    response = client.post("/notifications/email/", {"email_kinds": ["mention", "weather"], "next": "my_profile"},
                           HTTP_ACCEPT_LANGUAGE="zh-hans", follow=True)

    assert "没有名为 weather 的通知类型" in response.content.decode()
    on = set(NotificationPreference.objects.filter(user=expert, email=True).values_list("kind", flat=True))
    assert on == {"tier_changed"}


def test_a_project_manager_chooses_on_the_notifications_page_and_may_take_the_pause_alert(client):
    pm = PMFactory(email="zhou@example.org")
    client.force_login(pm)

    page = client.get("/notifications/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    response = client.post("/notifications/email/", {"email_kinds": ["expert_paused"], "next": "notifications"})

    assert 'value="expert_paused"' in page
    assert response.url == "/notifications/#email"
    assert NotificationPreference.objects.get(user=pm, kind="expert_paused").email
