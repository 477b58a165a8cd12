"""The PostgreSQL backend (core.postgresql): statements run again are prepared once per connection, and a
query past the protocol's 65,535 parameters still runs, bound client-side."""
import pytest
from django.db import connection

from core.postgresql.base import MAX_BOUND_PARAMETERS
from experts.models import User
from tests.factories import UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_a_query_run_again_on_the_connection_is_prepared_once_and_then_only_executed():
    users = [UserFactory(username=f"prep{i}") for i in range(3)]
    for user in users:
        assert User.objects.get(pk=user.pk).username == user.username
    prepared = [s for s in _prepared_statements() if s.endswith('WHERE "experts_user"."id" = $1 LIMIT 21')]
    assert len(prepared) == 1, prepared  # one statement for the three lookups, whatever the id


def test_a_query_of_more_parameters_than_the_protocol_holds_still_runs_and_is_not_prepared():
    users = [UserFactory(username=f"many{i}") for i in range(2)]
    ids = [u.pk for u in users] + list(range(10**9, 10**9 + MAX_BOUND_PARAMETERS))
    for _ in range(3):
        assert set(User.objects.filter(pk__in=ids).values_list("username", flat=True)) == {"many0", "many1"}
    # Quoted into the text like client-side binding: nothing of that size is kept on the server.
    assert not [s for s in _prepared_statements() if str(10**9) in s or len(s) > 100_000]
    # Just under the limit, the values are bound as parameters (and the same shape is prepared).
    few = [u.pk for u in users] + list(range(10**9, 10**9 + MAX_BOUND_PARAMETERS - 2))
    for _ in range(3):
        assert User.objects.filter(pk__in=few).count() == 2


def test_a_long_wide_query_is_converted_once_and_runs_as_psycopg_would_run_it():
    from psycopg._queries import PostgresQuery
    from psycopg.adapt import Transformer

    from core.postgresql.base import query_converted

    users = [UserFactory(username=f"wide{i}") for i in range(60)]
    ids = [u.pk for u in users]
    # Over psycopg's own cache limits (4,096 characters, 50 parameters): a padded text and 60 values.
    sql = ('SELECT "username" FROM "experts_user" WHERE "id" IN (' + ", ".join(["%s"] * len(ids)) + ")"
           + " AND 'pad' <> '" + "x" * 4100 + "' ORDER BY \"id\"")
    query_converted.cache_clear()
    for _ in range(3):
        with connection.cursor() as cursor:
            cursor.execute(sql, ids)
            assert [row[0] for row in cursor.fetchall()] == [u.username for u in users]
    info = query_converted.cache_info()
    assert (info.misses, info.hits) == (1, 2)
    # The statement sent is psycopg's own conversion of it.
    ours = connection.connection.cursor()._query_cls
    assert ours is not PostgresQuery
    tx = Transformer(connection.connection)
    mine, psycopgs = ours(tx), PostgresQuery(tx)
    mine.convert(sql, ids)
    psycopgs.convert(sql, ids)
    assert (mine.query, mine.params) == (psycopgs.query, psycopgs.params)


@pytest.mark.django_db(transaction=True)
def test_a_kept_idle_connection_is_found_usable_without_a_statement_and_one_the_server_closed_is_not():
    import time

    from tests.support.faults import side_connection

    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'the last statement', pg_backend_pid()")
        pid = cursor.fetchone()[1]
    with side_connection() as side:
        def last_statement() -> str:
            return side.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]

        # The check a request starts with, on a connection that is fine: no SELECT 1 reaches the server.
        assert connection.is_usable()
        assert last_statement().startswith("SELECT 'the last statement'")
        # The server ends the session while the connection sits idle (a restart, an administrator).
        side.execute("SELECT pg_terminate_backend(%s)", [pid])
        time.sleep(0.2)
    assert not connection.is_usable()
    connection.close()
    with connection.cursor() as cursor:  # a new session, as the next request gets
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_timestamps_are_read_by_psycopgs_native_loader_as_the_same_aware_utc_values_django_reads():
    from datetime import datetime, timedelta, timezone

    from django.db.backends.postgresql.psycopg_any import register_tzloader
    from psycopg.pq import Format

    from core.postgresql.base import NATIVE_TZ_LOADER, TIMESTAMPTZ_OID

    query = ("SELECT '2026-03-01 12:00:00.123456+08'::timestamptz, '1999-12-31 23:59:59-05:30'::timestamptz, "
             "NULL::timestamptz, '2026-03-01 12:00:00'::timestamp")
    connection.ensure_connection()
    assert connection.connection.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT) is NATIVE_TZ_LOADER
    # The C loader, not Django's Python subclass of psycopg's Python one.
    assert NATIVE_TZ_LOADER.__module__.startswith(("psycopg_binary", "psycopg_c"))
    with connection.cursor() as cursor:
        cursor.execute(query)
        native = cursor.fetchone()
    with connection.cursor() as cursor:
        register_tzloader(connection.timezone, cursor.cursor)  # Django's own loader, on this cursor
        cursor.execute(query)
        django_way = cursor.fetchone()
    assert native == django_way
    assert native[0] == datetime(2026, 3, 1, 4, 0, 0, 123456, tzinfo=timezone.utc)
    assert native[0].tzinfo is timezone.utc and native[1].tzinfo is timezone.utc
    assert native[1] == datetime(2000, 1, 1, 5, 29, 59, tzinfo=timezone.utc)
    assert native[2] is None and native[3].tzinfo is None
    stamped = User.objects.create(username="stamped")
    assert datetime.now(timezone.utc) - User.objects.get(pk=stamped.pk).date_joined < timedelta(minutes=1)
    # A named (server-side) cursor, as `.iterator()` opens one, reads them the same way.
    (joined,) = User.objects.filter(pk=stamped.pk).values_list("date_joined", flat=True).iterator(chunk_size=10)
    assert joined == User.objects.get(pk=stamped.pk).date_joined and joined.tzinfo is timezone.utc


def test_without_time_zone_support_the_connection_reads_naive_timestamps_as_django_does(settings):
    settings.USE_TZ = False
    with connection.cursor() as cursor:
        cursor.execute("SELECT '2026-03-01 12:00:00+00'::timestamptz")
        (value,) = cursor.fetchone()
    assert value.tzinfo is None
