"""What migrations may use besides Django: vendor-specific SQL and frozen column defaults.

Some invariants live in triggers (a published rubric version never changes, a ledger
row is never updated), because `QuerySet.update()`, `bulk_create` and raw SQL skip
every Python check. Migrations import this module and Django only, never app code: a
migration must stay valid however the apps change later. Its behaviour is therefore
part of every migration that uses it, so it changes only by adding, never by editing.
"""
import secrets
from collections.abc import Sequence
from typing import Any

from django.db import migrations
from django.utils.deconstruct import deconstructible


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


@deconstructible
class RandomCode:
    """A callable column default: `prefix` followed by `nbytes` random bytes in upper-case hex.

    Deconstructible, so that a migration records it as `core.db.RandomCode(...)`, not
    as a reference to a function in an app's models that may later move or change.
    """

    def __init__(self, *, prefix: str, nbytes: int) -> None:
        self.prefix = prefix
        self.nbytes = nbytes

    def __call__(self) -> str:
        return self.prefix + secrets.token_hex(self.nbytes).upper()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RandomCode) and (self.prefix, self.nbytes) == (other.prefix, other.nbytes)

    def __hash__(self) -> int:
        return hash((self.prefix, self.nbytes))
