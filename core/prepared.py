"""Querysets of a fixed shape, built and compiled to SQL once per thread, then run with new values.

On the hot path (a claim, a submission, a token check) the ORM spends more CPU building a
rich queryset (resolving its filters, annotations and subqueries) and compiling it than
PostgreSQL spends running it: the claim's first query takes about 8 ms of Python for
under 1 ms in the database. Django has no prepared querysets, so this module keeps the
SQL of one:

- `build(**shape, **values)` returns the queryset. The values (ids, instants) are bound
  late: the first run builds it twice with sentinel values (integers, instants and
  strings no query here is made with), compiles both, and records which SQL parameters
  are which value. Every value must reach the SQL as a parameter of its own, unchanged;
  anything computed from one (a week's start from an instant) is a value of its own.
  The compile step checks that both compiles give the same SQL, the values in the same
  places and every other parameter alike (one computed from a value would differ), and
  refuses to cache otherwise (`PreparedError`). A value a shape does not use is fine.
- `shape` holds what changes the SQL itself (a role that turns a permission subquery
  into a constant): each distinct shape is compiled separately.
- Rows are turned into model instances the way `QuerySet.__iter__` does (converters,
  `select_related`, annotations), by the compiler the SQL came from.

Only PostgreSQL runs the cached SQL; elsewhere (the SQLite development server) `build` runs
as a plain queryset every time. The cache is per thread (a compiler holds its thread's
connection) and is dropped when settings change (tests).
"""
import threading
from collections.abc import Callable, Hashable
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, Generic, TypeVar

from django.core.exceptions import EmptyResultSet
from django.core.signals import setting_changed
from django.db import connections
from django.db.models import Model, QuerySet
from django.db.models.query import ValuesListIterable, get_related_populators  # type: ignore[attr-defined]
from django.db.models.sql.compiler import SQLCompiler
from django.db.transaction import TransactionManagementError

M = TypeVar("M", bound=Model)

# Sentinels: values no real row is queried with, within even a small integer column's range (Django
# compiles a lookup past a column's range to "no rows"). Each shape is compiled with two sets, and the
# parameters each value lands on must agree, so a constant that happens to equal one is never taken for it.
_INT_SENTINELS = (30_011, 31_277)
_INSTANT_SENTINELS = (datetime(1903, 7, 11, 5, 17, 29, tzinfo=UTC), datetime(1911, 2, 3, 17, 41, 7, tzinfo=UTC))


class PreparedError(RuntimeError):
    """The queryset does not keep each value as a parameter of its own: it cannot be prepared."""


def _sentinel(index: int, value: Any, variant: int) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | str | datetime):
        raise PreparedError(f"only ints, strings and aware datetimes can be bound late, not {type(value).__name__}")
    if isinstance(value, datetime):
        return _INSTANT_SENTINELS[variant] + timedelta(microseconds=index + 1)
    if isinstance(value, str):
        return f"\x1fprepared value {index}.{variant}\x1f"
    return _INT_SENTINELS[variant] + index


def _kind(value: Any) -> type:
    """int for every integer (psycopg's Int2, Int4 ... included) but a bool; else the value's type."""
    return int if isinstance(value, int) and not isinstance(value, bool) else type(value)


class _Plan:
    """The SQL of one shape, which parameter is which value, and the compiler that reads its rows."""

    def __init__(self, querysets: list[QuerySet[Any]], sentinels: list[dict[str, Any]]) -> None:
        compiled = []
        for queryset, values in zip(querysets, sentinels, strict=True):
            compiler = queryset.query.get_compiler(using=queryset.db)
            try:
                sql, params = compiler.as_sql()
            except EmptyResultSet:
                raise PreparedError("a value makes the query match nothing (out of its column's range?)") from None
            compiled.append((compiler, sql, list(params), self._slots(list(params), values)))
        (compiler, sql, params, slots), (_c, other_sql, other_params, other_slots) = compiled
        if sql != other_sql or slots != other_slots:
            raise PreparedError("the query's SQL or its parameters change with the values bound")
        bound = {index for index, _name in slots}
        changed = [i for i, (a, b) in enumerate(zip(params, other_params, strict=True)) if i not in bound and a != b]
        if changed:
            # A parameter computed from a value (`project_id + 1`, a week's start): it would stay fixed.
            raise PreparedError(f"SQL parameters {changed} are computed from the values: bind them as values")
        if connections[querysets[0].db].vendor == "postgresql":
            sql, params, slots = _constants_inlined(sql, params, slots, connections[querysets[0].db])
        self.sql: str = sql
        self.params: list[Any] = params
        self.slots: list[tuple[int, str]] = slots
        self.types = {name: type(value) for name, value in sentinels[0].items()}
        self.compiler: SQLCompiler = compiler
        self.db: str = querysets[0].db
        self.locks = bool(querysets[0].query.select_for_update)
        # A values_list() (columns and expressions): its rows are the tuples, in the order they were named
        # (the compiler selects them in that order, as ValuesListIterable reads them).
        first = querysets[0]
        self.columns_only = first._iterable_class is ValuesListIterable
        # What `results_iter` works out on every call, once: the converters of the selected columns.
        fields = [selected[0] for selected in compiler.select[0:compiler.col_count]]
        if compiler.has_composite_fields(fields):
            raise PreparedError("composite primary keys are not supported")
        self.converters = compiler.get_converters(fields)

    @staticmethod
    def _slots(params: list[Any], sentinels: dict[str, Any]) -> list[tuple[int, str]]:
        by_value = {(_kind(v), v): name for name, v in sentinels.items()}
        slots = []
        for index, param in enumerate(params):
            if isinstance(param, list | dict | set):
                continue  # a constant (a list of statuses); no value is bound as one
            name = by_value.get((_kind(param), param))
            if name is not None:
                slots.append((index, name))
        return slots

    def rows(self, values: dict[str, Any]) -> list[Any]:
        for name, kind in self.types.items():
            if not isinstance(values[name], kind):
                raise TypeError(f"{name} must be {kind.__name__}, not {type(values[name]).__name__}")
        params = list(self.params)
        for index, name in self.slots:
            # As compiled: a small integer column's value comes wrapped (psycopg's Int2), and is wrapped again.
            wrap = type(self.params[index])
            params[index] = values[name] if wrap in (int, str, datetime) else wrap(values[name])
        connection = connections[self.db]
        if self.locks and connection.get_autocommit():
            # As Django's own check: a lock taken outside a transaction would be released at once.
            raise TransactionManagementError("select_for_update cannot be used outside of a transaction.")
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)
            fetched: list[Any] = cursor.fetchall()
        if not self.converters:
            return fetched
        return list(self.compiler.apply_converters(fetched, self.converters))

    @cached_property
    def _model_reading(self) -> tuple[type[Model], int, int, list[str], list[Any]]:
        """What `ModelIterable` works out on every run, once per plan: the model, where its columns are, their
        names, and the populators of the `select_related` models (they keep no state between rows or runs;
        making them anew was 2% of the web's CPU on the expert's loop)."""
        compiler = self.compiler
        select, klass_info = compiler.select, compiler.klass_info
        assert klass_info is not None
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        init_list = [f[0].target.attname for f in select[start:end]]
        return klass_info["model"], start, end, init_list, get_related_populators(klass_info, select, self.db)

    def instances(self, values: dict[str, Any]) -> list[Any]:
        """The rows as model instances, as `ModelIterable` makes them."""
        model_cls, start, end, init_list, populators = self._model_reading
        annotation_col_map = self.compiler.annotation_col_map
        found = []
        for row in self.rows(values):
            obj = model_cls.from_db(self.db, init_list, row[start:end])
            for populator in populators:
                populator.populate(row, obj)
            for attr_name, col_pos in (annotation_col_map or {}).items():
                setattr(obj, attr_name, row[col_pos])
            found.append(obj)
        return found


def _constants_inlined(sql: str, params: list[Any], slots: list[tuple[int, str]],
                       connection: Any) -> tuple[str, list[Any], list[tuple[int, str]]]:
    """The SQL with every parameter that is not a value written in as a literal; the values stay parameters.

    The constants of a shape (a status, a kind, a LIMIT) never change, so they go into the
    statement's text, quoted by psycopg as client-side binding would quote them. The statement
    PostgreSQL prepares (config/settings/base.py) then names them, and its plan for any values
    (the generic plan, made once) can use a partial index whose predicate they meet
    (`task_open_ring_idx ... WHERE status = 'open'`): with the status a parameter it could not,
    so PostgreSQL planned the claim's draw afresh on every claim (2.8 ms of its CPU), and the
    generic plan it was made to use took 18 ms to run; with the status in the text it is the
    same index walk as the planned one (about 1 ms at 10,000 tasks, measured by EXPLAIN ANALYZE).
    """
    from psycopg import sql as pg_sql

    bound = dict(slots)
    pieces: list[str] = []
    kept: list[Any] = []
    new_slots: list[tuple[int, str]] = []
    index, cursor = 0, 0
    connection.ensure_connection()  # psycopg quotes with the connection's adapters (its time zone)
    raw = connection.connection
    while True:
        at = sql.find("%", cursor)
        if at < 0:
            pieces.append(sql[cursor:])
            break
        token = sql[at:at + 2]
        if token == "%%":
            pieces.append(sql[cursor:at + 2])
            cursor = at + 2
            continue
        if token != "%s":
            raise PreparedError(f"unexpected placeholder {token!r} in the compiled SQL")
        pieces.append(sql[cursor:at])
        if index in bound:
            new_slots.append((len(kept), bound[index]))
            kept.append(params[index])
            pieces.append("%s")
        else:
            # The literal's own percent signs are doubled: the statement still takes parameters.
            pieces.append(pg_sql.Literal(params[index]).as_string(raw).replace("%", "%%"))
        index += 1
        cursor = at + 2
    if index != len(params):
        raise PreparedError("the compiled SQL has not one placeholder per parameter")
    return "".join(pieces), kept, new_slots


class Prepared(Generic[M]):
    """A queryset built by `build`, compiled once per thread and shape (see the module's docstring)."""

    def __init__(self, build: Callable[..., QuerySet[M]]) -> None:
        self._build = build
        self._local = threading.local()
        _everything.append(self)

    def _plan(self, using: str, shape: dict[str, Hashable], values: dict[str, Any], *, first: bool) -> _Plan:
        plans: dict[Hashable, _Plan] = self._local.__dict__.setdefault("plans", {})
        key = (using, first, tuple(sorted(shape.items())), tuple(sorted(values)))
        plan = plans.get(key)
        if plan is None:
            sentinels, querysets = [], []
            for variant in (0, 1):
                bound = {name: _sentinel(i, value, variant) for i, (name, value) in enumerate(sorted(values.items()))}
                queryset = self._build(**shape, **bound).using(using)
                if first:
                    queryset = (queryset if queryset.ordered else queryset.order_by("pk"))[:1]
                sentinels.append(bound)
                querysets.append(queryset)
            plan = plans[key] = _Plan(querysets, sentinels)
        return plan

    def first(self, *, shape: dict[str, Hashable] | None = None, using: str = "default", **values: Any) -> M | None:
        """What `build(**shape, **values).first()` returns."""
        shape = shape or {}
        if connections[using].vendor != "postgresql":
            return self._build(**shape, **values).using(using).first()
        found = self._plan(using, shape, values, first=True).instances(values)
        return found[0] if found else None

    def all(self, *, shape: dict[str, Hashable] | None = None, using: str = "default", **values: Any) -> list[M]:
        """What `list(build(**shape, **values))` returns."""
        shape = shape or {}
        if connections[using].vendor != "postgresql":
            return list(self._build(**shape, **values).using(using))
        return self._plan(using, shape, values, first=False).instances(values)

    def tuples(self, *, shape: dict[str, Hashable] | None = None, using: str = "default",
               **values: Any) -> list[tuple[Any, ...]]:
        """What `list(build(**shape, **values))` returns for a `values_list()` queryset (not flat, not named)."""
        shape = shape or {}
        if connections[using].vendor != "postgresql":
            rows: Any = self._build(**shape, **values).using(using)
            return [tuple(row) for row in rows]
        plan = self._plan(using, shape, values, first=False)
        if not plan.columns_only:
            raise PreparedError("tuples() reads a values_list()")
        return [tuple(row) for row in plan.rows(values)]

    def clear(self) -> None:
        self._local = threading.local()


_everything: list[Prepared[Any]] = []


def _clear_all(**_kwargs: Any) -> None:
    for prepared in _everything:
        prepared.clear()


setting_changed.connect(_clear_all, dispatch_uid="core.prepared.clear")
