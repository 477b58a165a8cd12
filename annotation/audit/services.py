"""Writing the audit log: one entry per PM or admin change, in the change's own transaction.

A service that changes data on a PM's or an admin's behalf calls `audit_record` next to
the write, inside its `transaction.atomic()`: a change that rolls back leaves no entry,
and an entry never exists without its change. The request id comes from
`core.request_id` (empty outside a request: a command, a worker).
"""
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.db import models
from django.utils import timezone

from annotation.models import AuditAction, AuditEntry
from core.request_id import request_id_current
from experts.models import User

DETAILS_MAX_CHARS = 2000


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value)
    return text if len(text) <= DETAILS_MAX_CHARS else text[:DETAILS_MAX_CHARS] + "…"


def audit_record(*, actor: User | None, action: AuditAction | str, project_id: int | None = None,
                 objects: Iterable[models.Model] = (), object_type: str = "", object_ids: Iterable[Any] = (),
                 details: Mapping[str, Any] | None = None, now: datetime | None = None) -> AuditEntry:
    """Append one entry: `actor` did `action` in project `project_id` to the rows `objects`
    (or to `object_type` with `object_ids` when the rows are not at hand).

    `details` holds what the change was (old and new values, counts, a reason); long
    text is cut. An anonymous or system actor is stored as no one.
    """
    rows = list(objects)
    if rows:
        object_type = object_type or rows[0]._meta.label_lower
        object_ids = [row.pk for row in rows]
    # Numbers in numeric order (9 before 10), any other id after them in text order.
    ids = sorted(_jsonable(list(object_ids)), key=lambda v: (0, v, "") if isinstance(v, int) else (1, 0, str(v)))
    return AuditEntry.objects.create(
        at=now or timezone.now(), actor=actor if isinstance(actor, User) and actor.pk else None,
        action=str(action), project_id=project_id, object_type=object_type, object_ids=ids,
        details=_jsonable(dict(details or {})), request_id=request_id_current(),
    )
