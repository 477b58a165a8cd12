"""Migration operation for SQL that differs between PostgreSQL and SQLite.

Some invariants live in triggers (a published rubric version never changes, a ledger
row is never updated), because `QuerySet.update()`, `bulk_create` and raw SQL skip
every Python check. Migrations import this module and Django only: its behaviour is
part of every migration that uses it, so it changes only by adding, never by editing.
"""
from collections.abc import Sequence
from typing import Any

from django.db import migrations


class VendorSQL(migrations.RunPython):
    """Run `postgresql` or `sqlite` statements depending on the connection's vendor.

    Both directions are required: a migration with hand-written SQL must unapply
    cleanly, so that `migrate app zero` followed by `migrate` leaves no trigger behind.

    On SQLite, a later migration that alters a guarded table rebuilds it (new table,
    copy, drop, rename) and the table's triggers go with the old one; such a migration
    must create them again (see annotation/migrations/0008).
    """

    def __init__(self, *, postgresql: Sequence[str], sqlite: Sequence[str],
                 reverse_postgresql: Sequence[str], reverse_sqlite: Sequence[str]) -> None:
        self.statements = {"postgresql": list(postgresql), "sqlite": list(sqlite)}
        self.reverse_statements = {"postgresql": list(reverse_postgresql), "sqlite": list(reverse_sqlite)}
        super().__init__(self._forward, self._backward)

    def _run(self, schema_editor: Any, statements: dict[str, list[str]]) -> None:
        for sql in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql, params=None)

    def _forward(self, apps: Any, schema_editor: Any) -> None:
        self._run(schema_editor, self.statements)

    def _backward(self, apps: Any, schema_editor: Any) -> None:
        self._run(schema_editor, self.reverse_statements)
