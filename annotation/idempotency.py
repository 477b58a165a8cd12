"""Idempotency keys: a request repeated with the same key gets the first answer again."""
import hashlib
import json
from collections.abc import Callable

from django.db import IntegrityError, transaction

from annotation.models import IdempotencyRecord
from core.errors import DomainError
from experts.models import User

MAX_KEY_LENGTH = 200


def request_fingerprint(scope: str, payload) -> str:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(f"{scope}\n{body}".encode()).hexdigest()


def idempotent_call(*, user: User, key: str | None, scope: str, payload,
                    run: Callable[[], tuple[int, dict]]) -> tuple[int, dict]:
    """Run `run` once per (user, key); repeats replay the stored (status, body).

    The same key with a different request is refused rather than silently replayed.
    Without a key the call simply runs (the domain service is idempotent on its own).
    """
    if not key:
        return run()
    if len(key) > MAX_KEY_LENGTH:
        raise DomainError(f"Idempotency-Key is longer than {MAX_KEY_LENGTH} characters.",
                          errors=[{"field": "Idempotency-Key", "message": "too long"}])
    fingerprint = request_fingerprint(scope, payload)
    previous = IdempotencyRecord.objects.filter(user=user, key=key).first()
    if previous is not None:
        return _replay(previous, fingerprint)
    status, body = run()
    if status >= 500:
        return status, body
    try:
        with transaction.atomic():
            IdempotencyRecord.objects.create(user=user, key=key, scope=scope, request_hash=fingerprint,
                                             status_code=status, body=body)
    except IntegrityError:
        # A concurrent duplicate stored its answer first; both ran the idempotent service.
        return _replay(IdempotencyRecord.objects.get(user=user, key=key), fingerprint)
    return status, body


def _replay(record: IdempotencyRecord, fingerprint: str) -> tuple[int, dict]:
    if record.request_hash != fingerprint:
        raise DomainError("This Idempotency-Key was already used for a different request.",
                          code="idempotency_key_reused", status=422)
    return record.status_code, record.body
