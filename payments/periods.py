"""The period grid: weekly or bi-weekly periods from a project's anchor date.

Boundaries fall at local midnight (settings.TIME_ZONE) on the anchor date plus whole
periods, computed on calendar dates so a daylight-saving change never shifts them.
"""
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings as django_settings

from payments.models import PaymentSettings


def _local_midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=ZoneInfo(django_settings.TIME_ZONE))


def grid_bounds(*, anchor: date, days: int, at: datetime) -> tuple[datetime, datetime]:
    """The grid period [start, end) that contains `at`."""
    local_day = at.astimezone(ZoneInfo(django_settings.TIME_ZONE)).date()
    index = (local_day - anchor).days // days
    start_day = anchor + timedelta(days=index * days)
    return _local_midnight(start_day), _local_midnight(start_day + timedelta(days=days))


def next_period_bounds(*, payment_settings: PaymentSettings, at: datetime,
                       latest_end: datetime | None) -> tuple[datetime, datetime]:
    """Bounds of a new period for an entry posted at `at` when no open period ends after it.

    The new period never reaches back before the latest one's end: an entry whose own
    instant lies in a period that has closed meanwhile (it waited on the settlement's
    lock) opens the grid slot after it. A period closed early leaves the rest of its
    grid slot to the next one.
    """
    if latest_end is not None and latest_end > at:
        at = latest_end
    start, end = grid_bounds(anchor=payment_settings.period_anchor, days=payment_settings.period_days, at=at)
    if latest_end is not None and latest_end > start:
        start = latest_end
    return start, end
