"""Shared fixtures. Tests run on the database DATABASE_URL names (PostgreSQL in `make test`)."""
import importlib

import pytest
from rest_framework.test import APIClient

from tests.factories import AdminFactory, ExpertFactory, PMFactory


@pytest.fixture(autouse=True)
def _no_dns(monkeypatch):
    """Tests never look a name up: the guarded outbound client resolves only loopback names and
    address literals here, so a webhook or judge URL naming a real host fails as "cannot be
    resolved" instead of sending a DNS query (or anything else) off this machine."""
    import ipaddress

    from core import outbound

    real = outbound._system_resolve

    def resolve(host: str, port: int) -> list[str]:
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            if host != "localhost" and not host.endswith(".localhost"):
                raise outbound.OutboundError(f"The host {host} cannot be resolved.", error_class="dns") from None
        return real(host, port)

    monkeypatch.setattr(outbound, "_system_resolve", resolve)


@pytest.fixture(scope="session", autouse=True)
def _cache_of_this_worker():
    """The test workers share one Redis, and each worker's database numbers its rows from 1: a
    key such as the board's "board-choices:<project id>" written by one worker would be read by
    another worker's different project with the same id (and by the next run of the suite). Each
    worker keys its cache entries under its own prefix, emptied before every test below."""
    import os

    from django.conf import settings
    from django.test import override_settings

    caches = {name: {**conf, "KEY_PREFIX": f"test-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"}
              for name, conf in settings.CACHES.items()}
    with override_settings(CACHES=caches):
        yield


@pytest.fixture(autouse=True)
def _empty_cache():
    from django.core.cache import cache

    from annotation.selectors import rubric_items_forget

    rubric_items_forget()  # the rubric items a process keeps, by version id

    if hasattr(cache, "delete_pattern"):
        cache.delete_pattern("*")  # django-redis: only this worker's prefix
    else:
        cache.clear()


@pytest.fixture(autouse=True)
def _migrated_rows(request):
    """The dimension taxonomy and the default tier rules come from data migrations; a
    transactional test's flush removes them, so tests that use the database get them back
    here. A reused test database (`--reuse-db`) starts the way the last run's last flush
    left it, so this holds for the first test of a run too."""
    marker = request.node.get_closest_marker("django_db")
    uses_db = marker is not None or {"db", "transactional_db"} & set(request.fixturenames)
    if not uses_db:
        return
    transactional = marker is not None and (marker.kwargs.get("transaction") or (marker.args and marker.args[0]))
    request.getfixturevalue("transactional_db" if transactional or "transactional_db" in request.fixturenames
                            else "db")
    from django.apps import apps

    from experts.models import TierRule
    from rubrics.taxonomy import taxonomy_ensure

    taxonomy_ensure()
    if not TierRule.objects.exists():
        importlib.import_module("experts.migrations.0002_tiers_notifications").seed_rules(apps, None)


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def expert(db):
    return ExpertFactory()


@pytest.fixture
def pm(db):
    return PMFactory()


@pytest.fixture
def admin_user(db):
    return AdminFactory()


def pytest_collection_modifyitems(config, items):
    # Under `--dist loadgroup` the browser tests share one xdist worker: Chromium launches once
    # (the session fixture) instead of once per worker, and two browsers do not compete for
    # the cores that their live servers and the other tests need.
    for item in items:
        if item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.xdist_group("browser"))

    from django.db import connection

    if connection.vendor != "postgresql":
        import os

        if os.environ.get("RUBRICA_REQUIRE_SERVICES") == "1":
            raise pytest.UsageError("CI must run on PostgreSQL: set DATABASE_URL")
