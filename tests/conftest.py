"""Shared fixtures. Tests run on the database DATABASE_URL names (PostgreSQL in `make test`)."""
import pytest
from rest_framework.test import APIClient

from tests.factories import AdminFactory, ExpertFactory, PMFactory


@pytest.fixture(autouse=True)
def _taxonomy(request):
    """The dimension taxonomy comes from a data migration; a transactional test's flush
    removes it, so tests that use the database get it back here."""
    marker = request.node.get_closest_marker("django_db")
    uses_db = marker is not None or {"db", "transactional_db"} & set(request.fixturenames)
    if not uses_db:
        return
    transactional = marker is not None and (marker.kwargs.get("transaction") or (marker.args and marker.args[0]))
    request.getfixturevalue("transactional_db" if transactional or "transactional_db" in request.fixturenames
                            else "db")
    from rubrics.taxonomy import taxonomy_ensure

    taxonomy_ensure()


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
    from django.db import connection

    if connection.vendor != "postgresql":
        import os

        if os.environ.get("RUBRICA_REQUIRE_SERVICES") == "1":
            raise pytest.UsageError("CI must run on PostgreSQL: set DATABASE_URL")
