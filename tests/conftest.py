"""Shared fixtures. Tests run on the database DATABASE_URL names (PostgreSQL in `make test`)."""
import pytest
from rest_framework.test import APIClient

from tests.factories import AdminFactory, ExpertFactory, PMFactory


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
