"""Fixtures of the payments tests."""
import pytest
from django.core.management.sql import emit_post_migrate_signal


@pytest.fixture
def post_migrate_rows(transactional_db) -> None:
    """Content types, permissions and guardian's anonymous user, made again if missing.

    A transactional test with serialized_rollback flushes the database without the
    post_migrate signal, so a transactional test after it would find no permission to
    grant; the signal's handlers only create what is missing.
    """
    emit_post_migrate_signal(verbosity=0, interactive=False, db="default")
