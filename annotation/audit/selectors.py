"""Reading the audit log: filtered for an admin (every project) or for a PM (their project only)."""
import csv
import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.db.models import QuerySet
from django.utils import timezone

from annotation.exchange.export_formats import csv_cell
from annotation.models import AuditAction, AuditEntry, Project

PAGE_LIMIT = 200
CSV_COLUMNS = ("at", "actor", "action", "project_id", "object_type", "object_ids", "details", "request_id")


@dataclass(frozen=True)
class AuditFilters:
    project_id: int | None = None
    actor: str = ""
    action: str = ""
    since: date | None = None
    until: date | None = None


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        return None


def _int(text: str) -> int | None:
    return int(text) if text.strip().isdigit() and len(text.strip()) < 12 else None


def audit_filters_parse(raw: Mapping[str, str]) -> AuditFilters:
    """Filters from a query string; a value that does not parse filters nothing (it is a search form)."""
    action = raw.get("action", "").strip()
    return AuditFilters(project_id=_int(raw.get("project", "")), actor=raw.get("user", "").strip()[:150],
                        action=action if action in AuditAction.values else "",
                        since=_day(raw.get("since", "")), until=_day(raw.get("until", "")))


def audit_entries(filters: AuditFilters, *, project: Project | None = None) -> QuerySet[AuditEntry]:
    """Entries matching `filters`, newest first; with `project`, only that project's (a PM's view)."""
    qs = AuditEntry.objects.select_related("actor", "project").order_by("-at", "-pk")
    if project is not None:
        qs = qs.filter(project=project)
    elif filters.project_id is not None:
        qs = qs.filter(project_id=filters.project_id)
    if filters.actor:
        qs = qs.filter(actor__username=filters.actor)
    if filters.action:
        qs = qs.filter(action=filters.action)
    tz = timezone.get_current_timezone()
    if filters.since:
        qs = qs.filter(at__gte=datetime.combine(filters.since, time.min, tzinfo=tz))
    if filters.until:
        qs = qs.filter(at__lt=datetime.combine(filters.until + timedelta(days=1), time.min, tzinfo=tz))
    return qs


def audit_csv(entries: QuerySet[AuditEntry]) -> Iterator[bytes]:
    """The entries as CSV (UTF-8 with BOM, formula-looking cells defused), a chunk per 500 rows."""
    buffer = io.StringIO()
    buffer.write("\ufeff")
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for n, entry in enumerate(entries.iterator(chunk_size=500), start=1):
        writer.writerow(csv_cell(value) for value in (
            entry.at.isoformat(), entry.actor.username if entry.actor else "", entry.action, entry.project_id,
            entry.object_type, entry.object_ids, entry.details, entry.request_id))
        if n % 500 == 0:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()
