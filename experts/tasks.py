"""Celery tasks of the experts app: thin, idempotent wrappers over the notification emails.

`experts.notification_email_send` is sent on commit by `notification_send` for each
notification its reader wants by email; `experts.notification_emails_sweep` (beat) sends
it again for whatever is still pending. The service locks the row and returns early when
the email is sent already, so a retry or a redelivery never sends twice.
"""
from celery import Task, shared_task
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from experts.notification_email import MailNotSent, notification_email_send, notification_emails_sweep

TRANSIENT = (OperationalError, InterfaceError)


@shared_task(bind=True, name="experts.notification_email_send", acks_late=True,
             autoretry_for=(MailNotSent, *TRANSIENT), retry_backoff=30, retry_backoff_max=900, retry_jitter=True,
             max_retries=5, soft_time_limit=60, time_limit=90)
def notification_email_send_task(self: Task, *, notification_id: int) -> str:
    """Email one notification; a mail server that fails is retried with backoff, then left to the sweep."""
    try:
        return notification_email_send(notification_id=int(notification_id), now=timezone.now())
    except MailNotSent:
        # In-process (the embedded mode, tests) a retry would sleep inside the request that
        # wrote the notification: leave the email pending for the sweep instead.
        if self.request.is_eager:
            return "pending"
        raise


@shared_task(name="experts.notification_emails_sweep", acks_late=True, autoretry_for=TRANSIENT, retry_backoff=True,
             max_retries=3, soft_time_limit=240, time_limit=300)
def notification_emails_sweep_task() -> int:
    """Send pending notification emails again (beat); returns how many were sent for."""
    return notification_emails_sweep(now=timezone.now())
