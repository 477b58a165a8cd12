"""Fixtures of the fault tests (real processes, real transactions on PostgreSQL)."""
import pytest
from django.core.management.sql import emit_post_migrate_signal


@pytest.fixture
def post_migrate_rows(transactional_db) -> None:
    """Content types and permissions, made again if a flush removed them (see tests/payments/conftest.py)."""
    emit_post_migrate_signal(verbosity=0, interactive=False, db="default")


@pytest.fixture(autouse=True)
def _small_bootstrap(settings) -> None:
    """Agreement reports computed in this process resample 50 times, not 1,000: the faults are the point."""
    settings.RUBRICA_AGREEMENT_BOOTSTRAP = 50
