"""Querysets of a fixed shape, built and compiled to SQL once per thread, then run with new values.

On the hot path (a claim, a submission, a token check) the ORM spends more CPU building a
rich queryset (resolving its filters, annotations and subqueries) and compiling it than
PostgreSQL spends running it: the claim's first query takes about 8 ms of Python for
under 1 ms in the database. Django has no prepared querysets, so this module keeps the
SQL of one:

- `build(**shape, **values)` returns the queryset. The values (ids, instants) are bound
  late: the first run builds it with sentinel values (an integer or an instant no real
  row has), compiles it, and records which SQL parameters are which sentinel. Every
  value must reach the SQL as a parameter of its own, unchanged; anything computed from
  one (a week's start from an instant) is a value of its own. The compile step checks
  that each sentinel was found exactly as given, and refuses to cache otherwise.
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
from typing import Any, Generic, TypeVar

from django.core.signals import setting_changed
from django.db import connections
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators  # type: ignore[attr-defined]
from django.db.models.sql.compiler import SQLCompiler

M = TypeVar("M", bound=Model)

# Within a 32-bit integer column's range (Django compiles a lookup past it to "no rows"), far past any id here.
_INT_SENTINEL = 2_083_000_000
_INSTANT_SENTINEL = datetime(1903, 7, 11, 5, 17, 29, tzinfo=UTC)  # before any row was written


class PreparedError(RuntimeError):
    """The queryset does not keep each value as a parameter of its own: it cannot be prepared."""


def _sentinel(index: int, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | str | datetime):
        raise PreparedError(f"only ints, strings and aware datetimes can be bound late, not {type(value).__name__}")
    if isinstance(value, datetime):
        return _INSTANT_SENTINEL + timedelta(microseconds=index + 1)
    if isinstance(value, str):
        return f"\x1fprepared value {index}\x1f"
    return _INT_SENTINEL + index


class _Plan:
    """The SQL of one shape, which parameter is which value, and the compiler that reads its rows."""

    def __init__(self, queryset: QuerySet[Any], sentinels: dict[str, Any]) -> None:
        compiler = queryset.query.get_compiler(using=queryset.db)
        sql, params = compiler.as_sql()
        self.sql: str = sql
        self.params: list[Any] = list(params)
        self.slots: list[tuple[int, str]] = []
        by_value = {(type(v), v): name for name, v in sentinels.items()}
        for index, param in enumerate(self.params):
            name = by_value.get((type(param), param))
            if name is not None:
                self.slots.append((index, name))
        missing = set(sentinels) - {name for _index, name in self.slots}
        if missing:
            raise PreparedError(f"values not found among the SQL parameters: {sorted(missing)}")
        self.types = {name: type(value) for name, value in sentinels.items()}
        self.compiler: SQLCompiler = compiler
        self.db: str = queryset.db

    def rows(self, values: dict[str, Any]) -> list[Any]:
        for name, kind in self.types.items():
            if not isinstance(values[name], kind):
                raise TypeError(f"{name} must be {kind.__name__}, not {type(values[name]).__name__}")
        params = list(self.params)
        for index, name in self.slots:
            params[index] = values[name]
        with connections[self.db].cursor() as cursor:
            cursor.execute(self.sql, params)
            fetched = cursor.fetchall()
        return list(self.compiler.results_iter(results=[fetched]))

    def instances(self, values: dict[str, Any]) -> list[Any]:
        """The rows as model instances, as `ModelIterable` makes them."""
        compiler = self.compiler
        select, klass_info, annotation_col_map = compiler.select, compiler.klass_info, compiler.annotation_col_map
        assert klass_info is not None
        model_cls = klass_info["model"]
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        init_list = [f[0].target.attname for f in select[start:end]]
        populators = get_related_populators(klass_info, select, self.db)
        found = []
        for row in self.rows(values):
            obj = model_cls.from_db(self.db, init_list, row[start:end])
            for populator in populators:
                populator.populate(row, obj)
            for attr_name, col_pos in (annotation_col_map or {}).items():
                setattr(obj, attr_name, row[col_pos])
            found.append(obj)
        return found


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
            sentinels = {name: _sentinel(i, value) for i, (name, value) in enumerate(sorted(values.items()))}
            queryset = self._build(**shape, **sentinels).using(using)
            if first:
                queryset = (queryset if queryset.ordered else queryset.order_by("pk"))[:1]
            plan = plans[key] = _Plan(queryset, sentinels)
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

    def clear(self) -> None:
        self._local = threading.local()


_everything: list[Prepared[Any]] = []


def _clear_all(**_kwargs: Any) -> None:
    for prepared in _everything:
        prepared.clear()


setting_changed.connect(_clear_all, dispatch_uid="core.prepared.clear")
