"""Migration operation for SQL that differs between PostgreSQL and SQLite.

Some invariants live in triggers (a published rubric version never changes, a ledger
row is never updated), because `QuerySet.update()`, `bulk_create` and raw SQL skip
every Python check.
"""
from django.db import migrations


class VendorSQL(migrations.RunPython):
    """Run `postgresql` or `sqlite` statements depending on the connection's vendor."""

    def __init__(self, *, postgresql: list[str], sqlite: list[str],
                 reverse_postgresql: list[str] = (), reverse_sqlite: list[str] = ()) -> None:
        self.statements = {"postgresql": list(postgresql), "sqlite": list(sqlite)}
        self.reverse_statements = {"postgresql": list(reverse_postgresql), "sqlite": list(reverse_sqlite)}
        super().__init__(self._forward, self._backward)

    def _run(self, schema_editor, statements: dict[str, list[str]]) -> None:
        for sql in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql, params=None)

    def _forward(self, apps, schema_editor) -> None:
        self._run(schema_editor, self.statements)

    def _backward(self, apps, schema_editor) -> None:
        self._run(schema_editor, self.reverse_statements)
