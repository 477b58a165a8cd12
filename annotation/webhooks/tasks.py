"""Celery task of webhook deliveries: one attempt per task run, the next queued by the service."""
from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from annotation.webhooks.services import WEBHOOK_DELIVER, webhook_deliver, webhooks_sweep

__all__ = ["webhook_deliver_task", "webhooks_sweep_task"]


@shared_task(name=WEBHOOK_DELIVER, acks_late=True, soft_time_limit=60, time_limit=90,
             autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5)
def webhook_deliver_task(*, message_id: int) -> str:
    """Attempt delivery of message `message_id`; returns its status afterwards ("gone" if deleted)."""
    message = webhook_deliver(message_id=message_id)
    return message.status if message is not None else "gone"


@shared_task(name="annotation.webhooks_sweep", acks_late=True, soft_time_limit=60, time_limit=90)
def webhooks_sweep_task() -> int:
    """Queue again pending messages whose delivery chain was lost (beat runs it every 10 minutes)."""
    return webhooks_sweep(now=timezone.now())
