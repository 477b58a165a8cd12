"""Django's own PostgreSQL backend, with two changes to its server-side binding cursor.

With server-side binding (config/settings/base.py) every parameter travels in the protocol's
Bind message, which holds at most 65,535 of them: a query with more (an `__in` of 100,000 ids
in a large import, a wide bulk insert) would fail where client-side binding worked. Such a
query is sent as client-side binding would send it, its values quoted into the text by
psycopg's own `ClientCursor.mogrify`, and never prepared; every other query is bound and
prepared as usual. Django has no setting for this (`max_query_params` is None on PostgreSQL,
and `max_in_list_size` only splits an IN list into ORed ones of the same total).

Second, psycopg turns each query's `%s` placeholders into `$1`... by scanning its text with a
regular expression, and keeps the result only for queries of at most 4,096 characters and 50
parameters (`psycopg._queries`): the claim's draw, its context and the submission's assignment
(selected with its task, project, question and expert, about a hundred columns), and the
ten-row inserts of labels and consensus, are longer or wider, and were scanned again on every
run (a fourteenth of the web's CPU per submission, sampled). `CachedQuery` keeps the converted
form of queries up to `CACHED_QUERY_LENGTH` characters and `CACHED_QUERY_PARAMS` parameters
(the application's statements are a few hundred shapes; an import's thousand-row insert is
left out, as psycopg leaves it out, so the cache stays small). It relies on psycopg's
`PostgresQuery` (the cursor's `_query_cls`, psycopg 3.3 as pinned): tests/core/test_postgresql_backend.py
checks that a long query is converted once and gives the same statement as psycopg's own path.

Third, the health check of a kept connection (`DatabaseWrapper.is_usable`) looks at the socket
before it sends `SELECT 1`, which Django sends at the start of every request otherwise.

Fourth, timestamps are read by psycopg's own loader, written in C, instead of Django's: Django
registers a subclass of psycopg's pure-Python loader on every connection, to stamp each value with
the connection's time zone. With `USE_TZ` and no `TIME_ZONE` of the database's own, that zone is
UTC, which Django also sets as the session's, and psycopg's loader already stamps `timezone.utc`
then: the same values, with a loader built and run in C for every timestamp column of every result
(3.5% of the web's CPU on the expert's loop, sampled). Any other zone (or `USE_TZ = False`) gets
Django's loader, per cursor, as Django does it.
"""
import datetime
import select
from functools import lru_cache
from typing import Any

from django.db.backends.postgresql import base
from psycopg import ClientCursor, postgres
from psycopg import Error as DatabaseError
from psycopg._queries import PostgresQuery, _query2pg_nocache
from psycopg.pq import ConnStatus, Format, TransactionStatus

# The protocol's limit: the Bind message counts its parameters in a 16-bit field.
MAX_BOUND_PARAMETERS = 65_535
CACHED_QUERY_LENGTH = 32_768
CACHED_QUERY_PARAMS = 1_000
CACHED_QUERIES = 1_024

TIMESTAMPTZ_OID = postgres.types["timestamptz"].oid
# psycopg's default loader for timestamptz: the C one with psycopg's binary or C implementation.
NATIVE_TZ_LOADER = postgres.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)

# (query bytes, encoding) -> psycopg's converted form, as its own cache keeps it for short queries.
query_converted = lru_cache(maxsize=CACHED_QUERIES)(_query2pg_nocache)


class CachedQuery(PostgresQuery):
    """psycopg's query conversion, remembered for the long and wide queries psycopg converts every time."""

    def convert(self, query: Any, vars: Any) -> None:
        if vars is not None and isinstance(query, str | bytes) and len(query) <= CACHED_QUERY_LENGTH \
                and len(vars) <= CACHED_QUERY_PARAMS:
            self.query, self._want_formats, self._order, self._parts = query_converted(
                self._ensure_bytes(query), self._tx.encoding)
            self.dump(vars)
            return
        super().convert(query, vars)


class ServerBindingCursor(base.ServerBindingCursor):  # type: ignore[name-defined,misc]
    _query_cls = CachedQuery

    def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None,
                binary: bool | None = None) -> Any:
        if params is not None and len(params) > MAX_BOUND_PARAMETERS:
            query, params, prepare = ClientCursor(self.connection).mogrify(query, params), None, False
        return super().execute(query, params, prepare=prepare, binary=binary)


def _has_input(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        """Whether the kept connection still works, without a round trip when it plainly does.

        Django asks at the start of each request that reuses a connection (CONN_HEALTH_CHECKS) and
        sends `SELECT 1` each time: a round trip and a statement for the server, on every request.
        A connection the server closed while it sat idle (a restart, `pg_terminate_backend`, an idle
        timeout) has something to read: the server's last message and the end of the stream. So an
        idle connection in the OK state with nothing to read is usable; any other gets Django's
        `SELECT 1`. (A peer that vanished without a word is caught by neither before a statement.)
        """
        conn = self.connection
        if conn is None:
            return False
        try:
            if (conn.info.status == ConnStatus.OK and conn.info.transaction_status == TransactionStatus.IDLE
                    and not _has_input(conn.fileno())):
                return True
        except (DatabaseError, OSError, ValueError):
            pass
        return bool(super().is_usable())

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        if self.timezone is datetime.timezone.utc:
            connection.adapters.register_loader(TIMESTAMPTZ_OID, NATIVE_TZ_LOADER)
        return connection

    def create_cursor(self, name: str | None = None) -> Any:
        """Django's cursor, without its time zone check when the connection reads timestamps natively.

        Django's check reads the registered loader's `timezone`; psycopg's C loader class has none and cannot
        be subclassed to carry one, so Django's few lines for opening a cursor are repeated here."""
        conn = self.connection
        if conn.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT) is not NATIVE_TZ_LOADER:
            return super().create_cursor(name)
        if name:
            if self.settings_dict["OPTIONS"].get("server_side_binding") is not True:
                cursor = base.ServerSideCursor(  # type: ignore[attr-defined]
                    conn, name=name, scrollable=False, withhold=conn.autocommit)
            else:
                cursor = conn.cursor(name, scrollable=False, withhold=conn.autocommit)
        else:
            cursor = conn.cursor()
        if self.timezone is not datetime.timezone.utc:
            # The settings changed since the connection opened (a test's override): Django's loader.
            base.register_tzloader(self.timezone, cursor)  # type: ignore[attr-defined]
        return cursor

    def get_connection_params(self) -> dict[str, Any]:
        params: dict[str, Any] = super().get_connection_params()
        if params.get("cursor_factory") is base.ServerBindingCursor:  # type: ignore[attr-defined]
            params["cursor_factory"] = ServerBindingCursor
        return params
