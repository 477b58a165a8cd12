"""Webhooks: registering endpoints, emitting events where they happen, delivering them signed.

An event is emitted inside the transaction of the change it reports (`webhook_emit`):
one message per subscribed endpoint, and a delivery task sent on commit, so a rolled
back change sends nothing and no request waits for a remote server. A delivery is one
HTTP attempt through `core.outbound` (a URL a PM typed: resolved, vetted, pinned), a
row per attempt (status code or error class, duration; never the target's body), and
on failure a retry after an exponential backoff until `RUBRICA_WEBHOOK_MAX_ATTEMPTS`.

Signature: `X-Rubrica-Signature: sha256=<hex>` where hex is HMAC-SHA256, under the
endpoint's secret, of `<X-Rubrica-Timestamp> + "." + <body>`; the receiver checks it
and refuses a timestamp too far from its clock (replays).
"""
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cryptography.fernet import InvalidToken
from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from annotation.audit.services import audit_record
from annotation.models import (
    AuditAction,
    Project,
    WebhookAttempt,
    WebhookEndpoint,
    WebhookEvent,
    WebhookMessage,
)
from core.after_commit import task_send, task_send_on_commit
from core.error_codes import ErrorCode
from core.errors import DomainError, NotFound
from core.outbound import OutboundError, OutboundRefused, outbound_request, url_check
from core.prepared import Prepared
from core.secret_box import secret_decrypt, secret_encrypt
from experts.models import User

logger = logging.getLogger(__name__)

WEBHOOK_DELIVER = "annotation.webhook_deliver"
URL_MAX = 500
SWEEP_MARGIN_S = 600
SWEEP_BATCH = 500
# Errors that waiting will not heal: the message fails at once (a resend tries again).
FINAL_ERRORS = frozenset({"refused", "disabled", "secret_unreadable"})
_PURPOSE = b"rubrica.webhooks.secret:"


def _secret_encrypt(plain: str) -> str:
    return secret_encrypt(plain, purpose=_PURPOSE)


def _secret_decrypt(token: str) -> str:
    return secret_decrypt(token, purpose=_PURPOSE)


def webhook_signature(*, secret: str, timestamp: str, body: bytes) -> str:
    """The `X-Rubrica-Signature` value of `body` sent at `timestamp` (unix seconds, as text)."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


@dataclass(frozen=True)
class CreatedEndpoint:
    endpoint: WebhookEndpoint
    secret: str  # shown once, on the page that created it


def _bad(field: str, message: str, code: ErrorCode, params: dict[str, Any] | None = None) -> DomainError:
    error = {"field": field, "message": message, "code": code, "params": params or {}}
    return DomainError(f"{field}: {message}", code=ErrorCode.INVALID_WEBHOOK, errors=[error])


def webhook_endpoint_create(*, project: Project, url: object, events: object, by: User,
                            now: datetime) -> CreatedEndpoint:
    """Register `url` for `events` of `project`; the secret is generated here and returned once.

    The URL's form is checked now (https, a host, no credentials, no private literal
    address); where its name resolves is checked at each delivery.
    """
    text = str(url or "").strip()
    if not text or len(text) > URL_MAX:
        raise _bad("url", f"Give the endpoint's URL (at most {URL_MAX} characters).", ErrorCode.WEBHOOK_URL_INVALID,
                   {"limit": URL_MAX})
    try:
        url_check(text)
    except OutboundRefused as exc:
        raise _bad("url", str(exc), ErrorCode.WEBHOOK_URL_REFUSED) from None
    chosen = [str(e) for e in events] if isinstance(events, (list, tuple)) else []
    valid = set(WebhookEvent.values)
    if not chosen or set(chosen) - valid:
        raise _bad("events", "Choose at least one of the listed events.", ErrorCode.WEBHOOK_EVENTS_INVALID)
    secret = "whsec_" + secrets.token_urlsafe(32)
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.create(
            project=project, url=text, events=sorted(set(chosen)), secret_encrypted=_secret_encrypt(secret),
            created_by=by, created_at=now)
        audit_record(actor=by, action=AuditAction.WEBHOOK_CREATE, project_id=project.pk, objects=[endpoint],
                     details={"url": text, "events": endpoint.events}, now=now)
    return CreatedEndpoint(endpoint=endpoint, secret=secret)


def webhook_endpoint_disable(*, project: Project, endpoint_id: object, by: User, now: datetime) -> WebhookEndpoint:
    """Stop sending to an endpoint (its log stays); disabling twice changes nothing."""
    with transaction.atomic():
        endpoint = _endpoint_locked(project, endpoint_id)
        if endpoint.is_active:
            endpoint.is_active = False
            endpoint.save(update_fields=["is_active"])
            audit_record(actor=by, action=AuditAction.WEBHOOK_DISABLE, project_id=project.pk, objects=[endpoint],
                         details={"url": endpoint.url}, now=now)
    return endpoint


def _endpoint_locked(project: Project, endpoint_id: object) -> WebhookEndpoint:
    try:
        return WebhookEndpoint.objects.select_for_update().get(pk=int(str(endpoint_id)), project=project)
    except (WebhookEndpoint.DoesNotExist, ValueError):
        raise NotFound("No such webhook endpoint.") from None


def webhook_emit(*, project_id: int, event: WebhookEvent | str, data: dict[str, Any], now: datetime) -> int:
    """Queue `event` with `data` for every active endpoint of the project that subscribed to it.

    Call it inside the transaction of the change: the messages commit with it and the
    deliveries start after the commit. Returns how many messages were queued.
    """
    return webhook_emit_many(project_id=project_id, events=[(event, data)], now=now)


# Every completing submission reads them (mostly to find none): compiled once per process (core.prepared).
_ACTIVE_ENDPOINTS: Prepared[WebhookEndpoint] = Prepared(
    lambda *, project_id: WebhookEndpoint.objects.filter(project_id=project_id, is_active=True).order_by("pk"))


def webhook_emit_many(*, project_id: int, events: Sequence[tuple[WebhookEvent | str, dict[str, Any]]],
                      now: datetime) -> int:
    """`webhook_emit` for several events of one change (a task completed and its consensus ready),
    reading the project's endpoints once. Returns how many messages were queued."""
    active = _ACTIVE_ENDPOINTS.all(project_id=project_id) if events else []
    queued = 0
    for event, data in events:
        for endpoint in (e for e in active if str(event) in e.events):
            message = WebhookMessage(endpoint=endpoint, event=str(event), payload={}, created_at=now)
            message.payload = {"event": str(event), "id": str(message.event_id), "timestamp": now.isoformat(),
                               "data": {"project_id": project_id, **data}}
            message.save()
            task_send_on_commit(WEBHOOK_DELIVER, message_id=message.pk)
            queued += 1
    return queued


def _backoff_s(attempt: int) -> float:
    return float(min(settings.RUBRICA_WEBHOOK_BACKOFF_BASE_S * 2 ** (attempt - 1),
                     settings.RUBRICA_WEBHOOK_BACKOFF_MAX_S))


def webhook_deliver(*, message_id: int) -> WebhookMessage | None:
    """Make one delivery attempt of a pending message and record it; queue the next on failure.

    The message row stays locked during the attempt (bounded by the outbound timeout),
    so a resend and a retry never deliver one message twice at once; a message already
    delivered or given up is left alone.
    """
    with transaction.atomic():
        message = (WebhookMessage.objects.select_for_update(of=("self",)).select_related("endpoint")
                   .filter(pk=message_id).first())
        if message is None or message.status != WebhookMessage.Status.PENDING:
            return message
        endpoint = message.endpoint
        number = message.attempt_count + 1
        status_code, error_class, duration_ms = _attempt(endpoint, message)
        now = timezone.now()
        WebhookAttempt.objects.create(message=message, number=number, at=now, status_code=status_code,
                                      error_class=error_class, duration_ms=duration_ms)
        message.attempt_count = number
        delivered = status_code is not None and 200 <= status_code < 300
        if delivered:
            message.status, message.delivered_at = WebhookMessage.Status.DELIVERED, now
        elif number >= settings.RUBRICA_WEBHOOK_MAX_ATTEMPTS or error_class in FINAL_ERRORS:
            message.status = WebhookMessage.Status.FAILED
        message.save(update_fields=["attempt_count", "status", "delivered_at"])
        retry = message.status == WebhookMessage.Status.PENDING
    logger.info("webhook attempt", extra={"message_id": message.pk, "attempt": number,
                                          "status_code": status_code, "error_class": error_class})
    if retry:
        task_send(WEBHOOK_DELIVER, countdown=_backoff_s(number), message_id=message.pk)
    return message


def _attempt(endpoint: WebhookEndpoint, message: WebhookMessage) -> tuple[int | None, str, int]:
    """One signed POST: (status code or None, error class or "", duration in ms)."""
    body = json.dumps(message.payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
    timestamp = str(int(time.time()))
    started = time.monotonic()

    def took() -> int:
        return int((time.monotonic() - started) * 1000)

    if not endpoint.is_active:
        return None, "disabled", 0
    try:
        secret = _secret_decrypt(endpoint.secret_encrypted)
    except InvalidToken:
        return None, "secret_unreadable", 0
    headers = {"Content-Type": "application/json", "User-Agent": "Rubrica-Webhooks/1",
               "X-Rubrica-Event": message.event, "X-Rubrica-Delivery": str(message.event_id),
               "X-Rubrica-Timestamp": timestamp,
               "X-Rubrica-Signature": webhook_signature(secret=secret, timestamp=timestamp, body=body)}
    try:
        # The target's body is never kept: 1 KiB is read so the connection closes cleanly.
        response = outbound_request("POST", endpoint.url, content=body, headers=headers, max_body_bytes=1024,
                                    timeout_s=settings.RUBRICA_WEBHOOK_TIMEOUT_S)
    except OutboundError as exc:
        return None, exc.error_class, took()
    return response.status, "" if 200 <= response.status < 300 else "http_status", took()


def webhook_resend(*, project: Project, message_id: object, by: User, now: datetime) -> WebhookMessage:
    """Send a message again (delivered or failed): a new series of attempts, logged after the old ones."""
    with transaction.atomic():
        try:
            message = (WebhookMessage.objects.select_for_update(of=("self",)).select_related("endpoint")
                       .get(pk=int(str(message_id)), endpoint__project=project))
        except (WebhookMessage.DoesNotExist, ValueError):
            raise NotFound("No such webhook message.") from None
        if message.status != WebhookMessage.Status.PENDING:
            message.status, message.delivered_at = WebhookMessage.Status.PENDING, None
            message.save(update_fields=["status", "delivered_at"])
            audit_record(actor=by, action=AuditAction.WEBHOOK_RESEND, project_id=project.pk, objects=[message],
                         details={"event": message.event}, now=now)
            task_send_on_commit(WEBHOOK_DELIVER, message_id=message.pk)
    return message


def webhooks_sweep(*, now: datetime) -> int:
    """Queue again the pending messages nobody is working on: a worker that died between an attempt
    and queueing the next one, or a broker that lost the task. Returns how many were queued.

    A message counts as lost when neither it nor its last attempt moved for longer than the
    longest backoff plus a margin; a message being delivered right now holds its row lock
    and is skipped, and a duplicate task finds the message delivered or simply tries once more.
    """
    stale = now - timedelta(seconds=settings.RUBRICA_WEBHOOK_BACKOFF_MAX_S + SWEEP_MARGIN_S)
    lost = (WebhookMessage.objects.filter(status=WebhookMessage.Status.PENDING, created_at__lt=stale)
            .annotate(last_at=Max("attempts__at")).filter(Q(last_at__isnull=True) | Q(last_at__lt=stale))
            .values_list("pk", flat=True)[:SWEEP_BATCH])
    ids = list(lost)
    for message_id in ids:
        task_send(WEBHOOK_DELIVER, message_id=message_id)
    if ids:
        logger.warning("webhook messages queued again", extra={"count": len(ids)})
    return len(ids)
