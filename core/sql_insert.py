"""One-statement inserts for the hot paths: a model instance written by hand-built SQL.

`Model.save()` on a row that may already exist costs a savepoint, the INSERT, and on a
duplicate an IntegrityError, a rollback to the savepoint and a second read. PostgreSQL
and SQLite (3.35 and newer) both take `INSERT ... ON CONFLICT (column) DO NOTHING
RETURNING id`, which does the same in one statement, without a savepoint; Django's
`bulk_create(ignore_conflicts=True)` writes that statement but cannot say whether the row
was inserted or which id it got. These helpers build the statement from the model's own
fields (`pre_save` and `get_db_prep_save`, what `save()` runs: `auto_now_add` included),
so a new column needs no change here. Field defaults are on the instance from its
constructor. `insert_rows` writes many rows in one statement where the ORM's `bulk_create`
would spend more CPU preparing them than the database spends storing them.
"""
from collections.abc import Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Model


def insert_parts(obj: Model, *, computed: dict[str, str] | None = None) -> tuple[list[str], list[str], list[Any]]:
    """The quoted columns, the value expressions and their parameters of `obj`'s row.

    Every concrete field but the primary key is written; a field named in `computed`
    (by attname) takes that SQL expression instead of a parameter.
    """
    computed = computed or {}
    # The connection itself, once: each use of the `connection` proxy looks up the thread's connection
    # (a tenth of the CPU of writing a submission's rows, when it was used for every value).
    db = connections[DEFAULT_DB_ALIAS]
    quote = db.ops.quote_name
    columns: list[str] = []
    values: list[str] = []
    params: list[Any] = []
    for field in obj._meta.concrete_fields:
        if field.primary_key:
            continue
        columns.append(quote(field.column))
        if field.attname in computed:
            values.append(computed[field.attname])
        else:
            values.append("%s")
            params.append(field.get_db_prep_save(field.pre_save(obj, True), db))
    return columns, values, params


def insert_rows(objs: Sequence[Model], *, ignore_conflicts: bool = False, returning: bool = False,
                unique_fields: Sequence[str] = (), update_fields: Sequence[str] = ()) -> None:
    """Insert the rows of `objs` (one model) in one statement.

    `ignore_conflicts`: a row that breaks a unique constraint is left out (ON CONFLICT DO NOTHING,
    on PostgreSQL and SQLite alike), as `bulk_create(ignore_conflicts=True)` does.
    `unique_fields` and `update_fields` (field names): a row whose `unique_fields` are taken
    updates that row's `update_fields` instead (ON CONFLICT ... DO UPDATE), as
    `bulk_create(update_conflicts=True, ...)` does. `returning`: the new (or updated) rows'
    primary keys are read back onto `objs`, in order, which then count as saved (not with
    `ignore_conflicts`, where a left-out row has none).
    """
    if not objs:
        return
    assert not (returning and ignore_conflicts), "a row left out has no primary key to read back"
    rows, params = [], []
    for obj in objs:
        columns, values, row_params = insert_parts(obj)
        rows.append(f"({', '.join(values)})")
        params += row_params
    meta = objs[0]._meta
    quote = connection.ops.quote_name
    conflict = " ON CONFLICT DO NOTHING" if ignore_conflicts else ""
    if unique_fields:
        by_name = {f.name: f for f in meta.concrete_fields}
        targets = ", ".join(quote(by_name[name].column) for name in unique_fields)
        updates = ", ".join(f"{quote(by_name[name].column)} = EXCLUDED.{quote(by_name[name].column)}"
                            for name in update_fields)
        conflict = f" ON CONFLICT ({targets}) DO UPDATE SET {updates}"
    assert meta.pk is not None
    back = f" RETURNING {quote(meta.pk.column)}" if returning else ""
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {quote(meta.db_table)} ({', '.join(columns)}) VALUES {', '.join(rows)}"
                       f"{conflict}{back}", params)
        if returning:
            keys = cursor.fetchall()
    if returning:
        assert len(keys) == len(objs)
        for obj, (key,) in zip(objs, keys, strict=True):
            saved_as(obj, key)


def insert_unless_conflict(obj: Model, *, conflict: str) -> int | None:
    """Insert `obj`'s row unless one with the same `conflict` column (unique) exists.

    Returns the new primary key and sets it on `obj` (which then counts as saved), or
    None when the row was there: on PostgreSQL, a concurrent insert of the same value
    that has not committed yet is waited for first.
    """
    columns, values, params = insert_parts(obj)
    meta = obj._meta
    unique = next(f for f in meta.concrete_fields if f.name == conflict)
    assert meta.pk is not None and unique.column is not None and meta.pk.column is not None
    sql = (f"INSERT INTO {connection.ops.quote_name(meta.db_table)} ({', '.join(columns)}) "
           f"VALUES ({', '.join(values)}) "
           f"ON CONFLICT ({connection.ops.quote_name(unique.column)}) DO NOTHING "
           f"RETURNING {connection.ops.quote_name(meta.pk.column)}")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    saved_as(obj, row[0])
    return int(row[0])


def saved_as(obj: Model, pk: Any) -> None:
    """Mark `obj`, whose row a statement of ours wrote, as saved with primary key `pk` (as `save()` would)."""
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = connection.alias
