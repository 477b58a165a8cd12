"""Migrations unapply to zero and apply again on PostgreSQL and SQLite, with their triggers; they import no app code.

The round trip runs `manage.py migrate` in a subprocess against a scratch database of
its own (a SQLite file under tmp_path, a PostgreSQL database with a unique name),
never the pytest-django test database: other tests, possibly in parallel workers, use
that one. Each `migrate` costs seconds of Django rendering migration states, so the
round trip unapplies in two commands rather than one per app, and a static test checks
that every trigger and function a migration creates, its reverse drops: on SQLite a
forgotten trigger would vanish with its table before the round trip could see it, yet
break `migrate` after unapplying only the migration that created it.
"""
import ast
import os
import re
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from core.db import VendorSQL
from experts.models import new_pseudonym

PROJECT_APPS = ("rubrics", "experts", "annotation", "payments")
# core has migrations too (the outbox table), with no trigger or function, so the trigger checks leave it out.
MIGRATING_APPS = (*PROJECT_APPS, "core")

# What the trigger migrations create, by app: rubrics/0002, annotation/0003, 0008 and 0022,
# payments/0002.
TRIGGERS = {
    "sqlite": {
        "rubrics": {"rubrica_item_insert_guard", "rubrica_item_update_guard", "rubrica_item_delete_guard",
                    "rubrica_version_update_guard", "rubrica_version_delete_guard"},
        "annotation": {"rubrica_assignment_slot_insert", "rubrica_assignment_slot_update",
                       "annotation_setting_change_append_only", "annotation_auditentry_no_update",
                       "annotation_auditentry_no_delete"},
        "payments": {"payments_ledgerentry_no_update", "payments_ledgerentry_no_delete",
                     "payments_ledgerentry_period_open", "payments_statement_no_update",
                     "payments_statement_no_delete", "payments_period_closed_no_update",
                     "payments_period_closed_no_delete", "payments_payoutbatch_no_delete",
                     "payments_payoutbatch_amounts_final"},
    },
    "postgresql": {
        "rubrics": {"rubrica_item_guard", "rubrica_item_insert_guard", "rubrica_version_guard",
                    "rubrica_refuse_published_item()", "rubrica_refuse_published_item_insert()",
                    "rubrica_refuse_published_version()",
                    # The references of items, checked per statement instead of by foreign keys (0007).
                    "rubrica_item_references_insert", "rubrica_item_references_update", "rubrica_item_referenced",
                    "rubrica_item_references_check()", "rubrica_item_referenced_refuse()"},
        "annotation": {"rubrica_assignment_slot_guard", "rubrica_assignment_slot_within_overlap()",
                       "annotation_setting_change_append_only", "annotation_setting_change_refuse_update()",
                       "annotation_auditentry_append_only", "annotation_audit_refuse_change()"},
        "payments": {"payments_ledgerentry_append_only", "payments_ledgerentry_period_open",
                     "payments_statement_append_only", "payments_period_closed_final",
                     "payments_payoutbatch_no_delete", "payments_payoutbatch_amounts_final",
                     "payments_refuse_change()", "payments_entry_period_open()"},
    },
}

PUBLISHED_VERSION = [
    "INSERT INTO rubrics_rubric (id, name, created_at) VALUES (1, 'r', '2026-01-05 09:00:00+00')",
    "INSERT INTO rubrics_rubricversion (id, rubric_id, number, status, changelog, created_at, published_at) "
    "VALUES (1, 1, 1, 'published', '', '2026-01-05 09:00:00+00', '2026-01-05 09:00:00+00')",
]
EDIT_PUBLISHED_VERSION = "UPDATE rubrics_rubricversion SET changelog = 'rewritten' WHERE id = 1"


class ScratchDatabase:
    """A database of the test's own that `manage.py migrate` runs against in a subprocess."""

    vendor: str
    url: str

    def migrate(self, *args: str) -> None:
        env = os.environ | {"DATABASE_URL": self.url}
        # System checks run in the suite itself; here they would only add a second per command.
        result = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "--skip-checks", "-v", "0", *args],
            cwd=Path(settings.BASE_DIR), env=env, capture_output=True, text=True, timeout=300,
        )
        assert result.returncode == 0, result.stderr

    def project_objects(self) -> set[str]:
        """Every trigger name, and every function name with "()": only the project's migrations create any."""
        raise TypeError(f"{type(self).__name__} must define project_objects")

    def applied_apps(self) -> set[str]:
        rows = self.query("SELECT DISTINCT app FROM django_migrations")
        return {app for (app,) in rows} & set(PROJECT_APPS)

    def query(self, sql: str) -> list[tuple]:
        raise TypeError(f"{type(self).__name__} must define query")

    def execute(self, *statements: str) -> None:
        """Run `statements` in one transaction; a refusal raises the driver's IntegrityError."""
        raise TypeError(f"{type(self).__name__} must define execute")

    def expected(self, *apps: str) -> set[str]:
        return set().union(*(TRIGGERS[self.vendor].get(app, set()) for app in apps))


class SQLiteScratch(ScratchDatabase):
    vendor = "sqlite"
    integrity_error = sqlite3.IntegrityError

    def __init__(self, path: Path) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"

    def query(self, sql: str) -> list[tuple]:
        with closing(sqlite3.connect(self.path)) as conn:
            return conn.execute(sql).fetchall()

    def execute(self, *statements: str) -> None:
        # closing() closes the connection; the connection's own context commits or rolls back.
        with closing(sqlite3.connect(self.path)) as conn, conn:
            for statement in statements:
                conn.execute(statement)

    def project_objects(self) -> set[str]:
        return {name for (name,) in self.query("SELECT name FROM sqlite_master WHERE type = 'trigger'")}


class PostgresScratch(ScratchDatabase):
    vendor = "postgresql"
    integrity_error = psycopg.IntegrityError

    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, sql: str) -> list[tuple]:
        with psycopg.connect(self.url) as conn:
            return conn.execute(sql).fetchall()

    def execute(self, *statements: str) -> None:
        with psycopg.connect(self.url) as conn:
            for statement in statements:
                conn.execute(statement)

    def project_objects(self) -> set[str]:
        triggers = self.query("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        # Functions outlive the tables their triggers were on: only the reverse SQL drops them.
        # An extension's own functions (pg_trgm's, annotation/0016) are the extension's, not ours.
        functions = self.query("SELECT proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                               "WHERE n.nspname = 'public' AND NOT EXISTS (SELECT 1 FROM pg_depend d "
                               "WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')")
        return {name for (name,) in triggers} | {f"{name}()" for (name,) in functions}


@pytest.fixture
def sqlite_scratch(tmp_path) -> SQLiteScratch:
    return SQLiteScratch(tmp_path / "migrations.sqlite3")


def _postgres_server_url(dbname: str) -> str:
    """A URL on the server the suite uses, or on the Makefile's default server when the suite runs on SQLite."""
    db = connection.settings_dict if connection.vendor == "postgresql" else {}
    host = f"{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}"
    return f"postgres://{quote(db.get('USER') or 'postgres')}:{quote(db.get('PASSWORD') or '')}@{host}/{dbname}"


@pytest.fixture
def postgres_scratch() -> Iterator[PostgresScratch]:
    name = f"rubrica_migcheck_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_postgres_server_url("postgres"), autocommit=True) as admin:
        # template0 takes no connections, so a parallel worker copying template1 never blocks this.
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    try:
        yield PostgresScratch(_postgres_server_url(name))
    finally:
        with psycopg.connect(_postgres_server_url("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("scratch_fixture", [
    pytest.param("postgres_scratch", marks=pytest.mark.postgres, id="postgresql"),
    pytest.param("sqlite_scratch", id="sqlite"),
])
def test_every_migration_unapplies_to_zero_and_applies_again_with_its_triggers(request, scratch_fixture):
    scratch: SQLiteScratch | PostgresScratch = request.getfixturevalue(scratch_fixture)

    scratch.migrate()
    created = scratch.project_objects()
    # Django unapplies what depends on the named app first, in reverse dependency order:
    # payments goes with annotation, experts with rubrics (annotation/0001 depends on
    # nothing of ours, so rubrics alone would leave it applied).
    scratch.migrate("annotation", "zero")
    without_annotation = scratch.project_objects()
    scratch.migrate("rubrics", "zero")
    at_zero, applied_at_zero = scratch.project_objects(), scratch.applied_apps()
    scratch.migrate()
    recreated = scratch.project_objects()
    scratch.execute(*PUBLISHED_VERSION)
    with pytest.raises(scratch.integrity_error):
        scratch.execute(EDIT_PUBLISHED_VERSION)

    assert created == scratch.expected(*PROJECT_APPS)
    assert without_annotation == scratch.expected("rubrics")
    assert (at_zero, applied_at_zero) == (set(), set())
    assert recreated == scratch.expected(*PROJECT_APPS)
    assert scratch.query("SELECT changelog FROM rubrics_rubricversion WHERE id = 1") == [("",)]


CREATED = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(TRIGGER|FUNCTION)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I)
DROPPED = re.compile(r"DROP\s+(TRIGGER|FUNCTION)\s+(?:IF\s+EXISTS\s+)?(\w+)", re.I)


def _vendor_sql_operations() -> list:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return [
        pytest.param(operation, id=f"{app}/{name}")
        for (app, name), migration in sorted(loader.disk_migrations.items()) if app in PROJECT_APPS
        for operation in migration.operations if isinstance(operation, VendorSQL)
    ]


@pytest.mark.parametrize("operation", _vendor_sql_operations())
def test_every_trigger_and_function_a_migration_creates_its_reverse_drops(operation):
    def named(pattern: re.Pattern, statements: dict[str, list[str]]) -> dict[str, set[tuple[str, str]]]:
        return {vendor: {(kind.upper(), name) for sql in sqls for kind, name in pattern.findall(sql)}
                for vendor, sqls in statements.items()}

    assert named(DROPPED, operation.reverse_statements) == named(CREATED, operation.statements)


# Django, the frozen helpers in core.db, and the standard library (makemigrations itself
# writes `import datetime` for a date default). Anything else is app code, which may
# change or vanish while the migration must keep working.
def _allowed(module: str) -> bool:
    return (module == "django" or module.startswith("django.") or module == "core.db"
            or module.split(".")[0] in sys.stdlib_module_names)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    plain = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    # A relative import is always app code: it is kept as ".name" so that it is refused.
    from_ = {"." * node.level + (node.module or "") for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    return plain | from_


MIGRATION_FILES = sorted(Path(settings.BASE_DIR).glob("*/migrations/0*.py"))


@pytest.mark.parametrize("path", MIGRATION_FILES, ids=lambda path: f"{path.parent.parent.name}/{path.name}")
def test_a_migration_imports_only_django_core_db_and_the_standard_library(path):
    assert {module for module in _imports(path) if not _allowed(module)} == set()


def test_the_import_check_sees_every_app_with_migrations():
    assert {path.parent.parent.name for path in MIGRATION_FILES} == set(MIGRATING_APPS)


@pytest.mark.django_db
def test_the_migrations_describe_the_models_exactly():
    # The autodetector compares migration files with models; the database is only read
    # for its migration history.
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_a_new_expert_pseudonym_keeps_its_format():
    assert re.fullmatch(r"E-[0-9A-F]{8}", new_pseudonym())
