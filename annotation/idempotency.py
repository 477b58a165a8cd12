"""Idempotency keys: a request repeated with the same key gets the first answer again."""
import hashlib
import json
from collections.abc import Callable

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from annotation.models import IdempotencyRecord
from core.errors import DomainError
from core.prepared import Prepared
from experts.models import User

MAX_KEY_LENGTH = 200


def _record_query(*, user_id: int, key: str) -> QuerySet[IdempotencyRecord]:
    return IdempotencyRecord.objects.filter(user_id=user_id, key=key)


_RECORD = Prepared(_record_query)  # on every submission: compiled once per process (core.prepared)


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
    previous = _RECORD.first(user_id=user.pk, key=key)
    if previous is not None:
        return _replay(previous, fingerprint)
    status, body = run()
    if status >= 500:
        return status, body
    try:
        if connection.in_atomic_block:
            with transaction.atomic():  # a savepoint: a duplicate must not break the caller's transaction
                _record_insert(user=user, key=key, scope=scope, fingerprint=fingerprint, status=status, body=body)
        else:
            # One statement, its own transaction (autocommit): no BEGIN and COMMIT round trips around it.
            _record_insert(user=user, key=key, scope=scope, fingerprint=fingerprint, status=status, body=body)
    except IntegrityError:
        # A concurrent duplicate stored its answer first; both ran the idempotent service.
        return _replay(IdempotencyRecord.objects.get(user=user, key=key), fingerprint)
    return status, body


# The record's transaction commits without waiting for the disk (PostgreSQL's asynchronous commit,
# for this transaction only): the service it replays is idempotent on its own (a submission sent
# again returns the recorded one), so a record lost in a database crash costs a replay, never a
# second effect, and the request that recorded the work already waited for its own durable commit.
_RECORD_INSERT_SQL = """INSERT INTO {table} (user_id, key, scope, request_hash, status_code, body, created_at)
SELECT %s, %s, %s, %s, %s, %s::jsonb, %s FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit"""


def _record_insert(*, user: User, key: str, scope: str, fingerprint: str, status: int, body: dict) -> None:
    if connection.vendor != "postgresql":
        IdempotencyRecord.objects.create(user=user, key=key, scope=scope, request_hash=fingerprint,
                                         status_code=status, body=body)
        return
    with connection.cursor() as cursor:
        cursor.execute(_RECORD_INSERT_SQL.format(table=IdempotencyRecord._meta.db_table),
                       [user.pk, key, scope, fingerprint, status, json.dumps(body, cls=DjangoJSONEncoder),
                        timezone.now()])


def _replay(record: IdempotencyRecord, fingerprint: str) -> tuple[int, dict]:
    if record.request_hash != fingerprint:
        raise DomainError("This Idempotency-Key was already used for a different request.",
                          code="idempotency_key_reused", status=422)
    return record.status_code, record.body
