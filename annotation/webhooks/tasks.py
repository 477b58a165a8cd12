"""Celery task of webhook deliveries: one attempt per task run, the next queued by the service."""
from celery import shared_task
from django.db import OperationalError

from annotation.webhooks.services import WEBHOOK_DELIVER, webhook_deliver

__all__ = ["webhook_deliver_task"]


@shared_task(name=WEBHOOK_DELIVER, acks_late=True, soft_time_limit=60, time_limit=90,
             autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5)
def webhook_deliver_task(*, message_id: int) -> str:
    """Attempt delivery of message `message_id`; returns its status afterwards ("gone" if deleted)."""
    message = webhook_deliver(message_id=message_id)
    return message.status if message is not None else "gone"
