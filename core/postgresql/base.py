"""Django's own PostgreSQL backend, with one change to its server-side binding cursor.

With server-side binding (config/settings/base.py) every parameter travels in the protocol's
Bind message, which holds at most 65,535 of them: a query with more (an `__in` of 100,000 ids
in a large import, a wide bulk insert) would fail where client-side binding worked. Such a
query is sent as client-side binding would send it, its values quoted into the text by
psycopg's own `ClientCursor.mogrify`, and never prepared; every other query is bound and
prepared as usual. Django has no setting for this (`max_query_params` is None on PostgreSQL,
and `max_in_list_size` only splits an IN list into ORed ones of the same total).
"""
from typing import Any

from django.db.backends.postgresql import base
from psycopg import ClientCursor

# The protocol's limit: the Bind message counts its parameters in a 16-bit field.
MAX_BOUND_PARAMETERS = 65_535


class ServerBindingCursor(base.ServerBindingCursor):  # type: ignore[name-defined,misc]
    def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None,
                binary: bool | None = None) -> Any:
        if params is not None and len(params) > MAX_BOUND_PARAMETERS:
            query, params, prepare = ClientCursor(self.connection).mogrify(query, params), None, False
        return super().execute(query, params, prepare=prepare, binary=binary)


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self) -> dict[str, Any]:
        params: dict[str, Any] = super().get_connection_params()
        if params.get("cursor_factory") is base.ServerBindingCursor:  # type: ignore[attr-defined]
            params["cursor_factory"] = ServerBindingCursor
        return params
