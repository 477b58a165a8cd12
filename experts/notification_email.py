"""Notification emails: who wants which kind, the outbox on each notification, sending it once.

A notification that its reader wants by email is written with `email_status="pending"`
(`experts.notifications.notification_send`), and `experts.notification_email_send` is sent
on commit. Sending locks the row (`skip_locked`: a second worker on the same row leaves it
to the first), sends, and marks it `sent` in the same transaction, so a retried or
duplicated task finds it sent and sends nothing. A failing mail server leaves the row
pending with the attempt counted and the error kept; the task retries with backoff and
the beat sweep (`experts.notification_emails_sweep`) sends again whatever is still pending
a few minutes later, until `RUBRICA_NOTIFICATION_EMAIL_MAX_ATTEMPTS` marks it `failed`.
"""
import logging
import smtplib
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext

from core.after_commit import task_send, task_send_on_commit
from core.error_codes import ErrorCode
from core.errors import DomainError
from experts.models import Notification, NotificationPreference, User
from experts.notifications import MANAGER_KINDS, TEMPLATES, kind_label, notification_text

logger = logging.getLogger(__name__)

# What a mail server or the network can do to a send; anything else is a bug and propagates.
MAIL_ERRORS = (smtplib.SMTPException, OSError)
EMAIL_LANGUAGES = ("zh-hans", "en")
SWEEP_BATCH = 500
ERROR_CHARS = 300


class MailNotSent(Exception):
    """The mail server refused or could not be reached; the notification stays pending."""


def email_kinds_for(user: User) -> list[str]:
    """The kinds `user` may get by email, in the order of `TEMPLATES` (managers' kinds only for them)."""
    return [kind for kind in TEMPLATES if not user.is_expert or kind not in MANAGER_KINDS]


def notification_email_kinds_for_user(user: User) -> set[str]:
    """The kinds `user` opted in to email for."""
    return set(NotificationPreference.objects.filter(user=user, email=True).values_list("kind", flat=True))


def notification_email_preferences_update(*, user: User, kinds: Iterable[str], language: str,
                                          now: datetime) -> set[str]:
    """Set which kinds `user` gets by email (every other kind: none) and the emails' language.

    An unknown kind refuses the whole change. Returns the kinds now on.
    """
    wanted = set(kinds)
    offered = email_kinds_for(user)
    unknown = sorted(wanted - set(offered))
    if unknown:
        raise DomainError(f"Unknown notification kind {unknown[0]}; nothing was saved.",
                          code=ErrorCode.NOTIFICATION_KIND_UNKNOWN, params={"kind": unknown[0]},
                          errors=[{"field": "email_kinds", "code": ErrorCode.NOTIFICATION_KIND_UNKNOWN,
                                   "params": {"kind": unknown[0]}}])
    language = language if language in EMAIL_LANGUAGES else settings.LANGUAGE_CODE
    with transaction.atomic():
        for kind in offered:
            NotificationPreference.objects.update_or_create(
                user=user, kind=kind, defaults={"email": kind in wanted, "language": language, "updated_at": now})
    logger.info("notification email preferences saved", extra={"user_id": user.pk, "kinds": sorted(wanted)})
    return wanted


def _absolute(path: str) -> str:
    return f"{settings.SITE_URL}{path}" if path.startswith("/") else path


def notification_email_message(notification: Notification, *, language: str) -> EmailMessage:
    """The email of `notification` in `language`: a subject naming the kind, the text, absolute links."""
    user = notification.user
    with translation.override(language):
        subject = gettext("Rubrica: %(kind)s") % {"kind": kind_label(notification.kind)}
        lines = [notification_text(notification), ""]
        if notification.link:
            lines.append(gettext("Open: %(url)s") % {"url": _absolute(notification.link)})
        lines.append(gettext("All your notifications: %(url)s") % {"url": _absolute(reverse("notifications"))})
        settings_page = reverse("my_profile") if user.is_expert else reverse("notifications")
        lines += ["", "-- ", gettext("You get this email because you asked for email about “%(kind)s”. "
                                     "Change it here: %(url)s") % {"kind": kind_label(notification.kind),
                                                                   "url": _absolute(settings_page)}]
    return EmailMessage(subject=subject, body="\n".join(lines), from_email=settings.DEFAULT_FROM_EMAIL,
                        to=[user.email])


def notification_email_send(*, notification_id: int, now: datetime) -> str:
    """Send the email of one pending notification once; returns what became of it.

    "sent"; "skipped" (not pending: sent already, or another worker holds it, or gone);
    "cancelled" (the reader turned the kind off or has no address now); "failed" (the last
    allowed attempt failed). Raises MailNotSent after a failed attempt that may be retried:
    the attempt and its error are saved first, the row stays pending.
    """
    with transaction.atomic():
        notification = (Notification.objects.select_for_update(skip_locked=True, of=("self",))
                        .select_related("user")
                        .filter(pk=notification_id, email_status=Notification.EmailStatus.PENDING).first())
        if notification is None:
            return "skipped"
        preference = NotificationPreference.objects.filter(user_id=notification.user_id, kind=notification.kind,
                                                           email=True).first()
        if preference is None or not notification.user.email:
            notification.email_status = Notification.EmailStatus.NONE
            notification.save(update_fields=["email_status"])
            return "cancelled"
        message = notification_email_message(notification, language=preference.language)
        notification.email_attempts += 1
        notification.email_attempted_at = now
        try:
            message.send()
        except MAIL_ERRORS as exc:
            notification.email_error = f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
            if notification.email_attempts >= settings.RUBRICA_NOTIFICATION_EMAIL_MAX_ATTEMPTS:
                notification.email_status = Notification.EmailStatus.FAILED
            notification.save(update_fields=["email_attempts", "email_attempted_at", "email_error",
                                              "email_status"])
            failed = notification.email_status == Notification.EmailStatus.FAILED
        else:
            notification.email_status = Notification.EmailStatus.SENT
            notification.email_sent_at = now
            notification.email_error = ""
            notification.save(update_fields=["email_attempts", "email_attempted_at", "email_error",
                                              "email_status", "email_sent_at"])
            logger.info("notification email sent", extra={"notification_id": notification.pk,
                                                          "attempts": notification.email_attempts})
            return "sent"
    logger.warning("notification email not sent", extra={"notification_id": notification.pk,
                                                         "attempts": notification.email_attempts,
                                                         "error": notification.email_error})
    if failed:
        return "failed"
    raise MailNotSent(notification.email_error)


def notification_emails_due(*, now: datetime) -> list[int]:
    """Pending emails whose last attempt (or whose notification) is older than the retry delay."""
    before = now - timedelta(seconds=settings.RUBRICA_NOTIFICATION_EMAIL_RETRY_AFTER_S)
    return list(Notification.objects.filter(email_status=Notification.EmailStatus.PENDING)
                .annotate(last_try=Coalesce("email_attempted_at", "created_at"))
                .filter(last_try__lte=before).order_by("pk").values_list("pk", flat=True)[:SWEEP_BATCH])


def notification_emails_sweep(*, now: datetime) -> int:
    """Send the send task again for every due pending email (the beat job); returns how many."""
    due = notification_emails_due(now=now)
    for notification_id in due:
        task_send("experts.notification_email_send", notification_id=notification_id)
    return len(due)


def notification_email_resend(*, notification_ids: Iterable[int]) -> int:
    """Put failed emails back in the outbox with a fresh count of attempts (an admin action)."""
    ids = list(Notification.objects.filter(pk__in=list(notification_ids),
                                           email_status=Notification.EmailStatus.FAILED)
               .values_list("pk", flat=True))
    Notification.objects.filter(pk__in=ids).update(email_status=Notification.EmailStatus.PENDING,
                                                   email_attempts=0)
    for notification_id in ids:
        task_send_on_commit("experts.notification_email_send", notification_id=notification_id)
    return len(ids)
