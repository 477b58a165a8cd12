"""Annotation's numbers for `/metrics` (core.metrics), read from the database when Prometheus scrapes."""
from django.utils import timezone

from annotation.models import Assignment


def leases_open_count() -> int:
    """Leases held right now: leased and not yet past their expiry (the sweep may not have run yet)."""
    return Assignment.objects.filter(status=Assignment.Status.LEASED, expires_at__gt=timezone.now()).count()
