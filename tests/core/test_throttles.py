"""The API is throttled per user and per client address; a throttled call says when to come back."""
import secrets

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from core.throttles import CountingRateThrottle, throttle_forget
from tests.factories import ExpertFactory
from tests.support.threads import run_together

pytestmark = pytest.mark.django_db


@pytest.fixture
def low_rates(monkeypatch):
    # Counts live in the shared cache; fresh users and never-seen addresses keep runs apart
    # without clearing what other tests count there.
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"user": "3/minute", "anon": "3/minute",
                                                                "address": "5/minute"})


def _address() -> str:
    return f"2001:db8::{secrets.token_hex(2)}:{secrets.token_hex(2)}"


def _fresh_expert():
    """A new expert whose id an earlier run's counts (still in the shared cache) do not hold."""
    user = ExpertFactory()
    throttle_forget("user", user.pk, now=CountingRateThrottle.timer(), duration=60)
    return user


def _token(user) -> str:
    return "Token " + Token.objects.get_or_create(user=user)[0].key


def test_a_user_over_their_rate_gets_429_with_retry_after_and_another_user_does_not(api, low_rates):
    first, second = _fresh_expert(), _fresh_expert()

    codes = [api.get("/api/v1/notifications/", HTTP_AUTHORIZATION=_token(first),
                     REMOTE_ADDR=_address()).status_code for _ in range(4)]
    other = api.get("/api/v1/notifications/", HTTP_AUTHORIZATION=_token(second), REMOTE_ADDR=_address())

    assert codes[:3] == [200, 200, 200] and codes[3] == 429
    assert other.status_code == 200
    throttled = api.get("/api/v1/notifications/", HTTP_AUTHORIZATION=_token(first), REMOTE_ADDR=_address())
    assert throttled.status_code == 429 and int(throttled["Retry-After"]) > 0


def test_many_users_from_one_address_are_limited_together(api, low_rates):
    users = [_fresh_expert() for _ in range(6)]
    shared = _address()

    codes = [api.get("/api/v1/notifications/", HTTP_AUTHORIZATION=_token(u), REMOTE_ADDR=shared).status_code
             for u in users]
    elsewhere = api.get("/api/v1/notifications/", HTTP_AUTHORIZATION=_token(users[0]), REMOTE_ADDR=_address())

    assert codes == [200] * 5 + [429]
    assert elsewhere.status_code == 200


def test_calls_without_credentials_from_one_address_get_429_with_a_json_message(api, low_rates):
    shared = _address()

    codes = [api.get("/api/v1/notifications/", REMOTE_ADDR=shared).status_code for _ in range(3)]
    throttled = api.get("/api/v1/notifications/", REMOTE_ADDR=shared)
    wrong_token = api.get("/api/v1/notifications/", HTTP_AUTHORIZATION="Token " + "0" * 40, REMOTE_ADDR=shared)
    elsewhere = api.get("/api/v1/notifications/", REMOTE_ADDR=_address())

    assert codes == [401, 401, 401]
    assert throttled.status_code == 429 and throttled["Content-Type"] == "application/json"
    assert "throttled" in throttled.json()["detail"].lower() and int(throttled["Retry-After"]) > 0
    assert wrong_token.status_code == 429
    assert elsewhere.status_code == 401


def test_a_throttled_user_gets_a_json_message_saying_when_to_come_back(api, low_rates):
    user = _fresh_expert()

    for _ in range(3):
        api.get("/api/v1/notifications/", HTTP_AUTHORIZATION=_token(user), REMOTE_ADDR=_address())
    throttled = api.get("/api/v1/notifications/", HTTP_AUTHORIZATION=_token(user), REMOTE_ADDR=_address())

    assert throttled.status_code == 429 and throttled["Content-Type"] == "application/json"
    assert "seconds" in throttled.json()["detail"]


# A minute's window from a fixed instant far from today's, so counts of real time never mix in.
T0 = 60 * 16_666_667 + 10  # 10 s into a window


def test_a_client_that_waits_the_retry_after_it_was_given_gets_through_and_one_back_sooner_does_not(
        api, low_rates, monkeypatch):
    user, address = _fresh_expert(), _address()
    clock = [float(T0)]
    monkeypatch.setattr(CountingRateThrottle, "timer", lambda self: clock[0])

    def call() -> object:
        return api.get("/api/v1/notifications/", HTTP_AUTHORIZATION=_token(user), REMOTE_ADDR=address)

    assert [call().status_code for _ in range(3)] == [200, 200, 200]
    refused = call()
    retry_after = int(refused["Retry-After"])
    # Four calls this window at 3 a minute: the next window must be half gone before one more fits.
    assert refused.status_code == 429 and retry_after == 80

    clock[0] = T0 + retry_after - 10
    sooner = call()
    assert sooner.status_code == 429  # too soon, and counted: the wait it is told starts from there
    clock[0] += int(sooner["Retry-After"])
    assert call().status_code == 200


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_calls_racing_from_many_threads_are_each_counted_once_against_the_rate(monkeypatch):
    """Counting is one atomic increment: DRF's list of call instants, read and written back by each
    request, lost the calls of concurrent requests and let more through than the rate."""
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"user": "10/minute", "anon": "10/minute",
                                                                "address": "1000/minute"})
    user = _fresh_expert()
    token = _token(user)

    def one() -> int:
        return APIClient().get("/api/v1/notifications/", HTTP_AUTHORIZATION=token,
                               REMOTE_ADDR=_address()).status_code

    codes = run_together(one, 24)

    assert sorted(codes) == [200] * 10 + [429] * 14


def test_one_call_counts_the_user_and_the_address_in_one_round_trip_to_redis(monkeypatch, low_rates):
    from django.core.cache import cache
    from redis.client import Redis

    if not hasattr(cache, "delete_pattern"):
        pytest.skip("the cache is not django-redis here: each scope is counted by get and incr")
    now = CountingRateThrottle.timer()
    monkeypatch.setattr(CountingRateThrottle, "timer", staticmethod(lambda: now))  # one window for both calls
    user, address = _fresh_expert(), _address()
    throttle_forget("address", address, now=now, duration=60)
    # Redis forgets its scripts when it restarts (or is flushed): the count sends it again.
    cache.client.get_client(write=True).script_flush()
    trips: list[tuple] = []
    execute = Redis.execute_command
    monkeypatch.setattr(Redis, "execute_command", lambda self, *args, **kwargs: trips.append(args)
                        or execute(self, *args, **kwargs))
    client = APIClient()

    for _ in range(2):
        assert client.get("/api/v1/notifications/", HTTP_AUTHORIZATION=_token(user),
                          REMOTE_ADDR=address).status_code == 200

    counting = [args for args in trips if any(":w" in str(arg) for arg in args)]
    # Per call one command counts both scopes (the first one twice: the script was not loaded yet).
    assert [args[0] for args in counting] == ["EVALSHA", "EVAL", "EVALSHA"]
    assert all(args[2] == 4 for args in counting)  # the user's and the address's windows, current and previous
    for scope, ident in (("user", user.pk), ("address", address)):
        key = SimpleRateThrottle.cache_format % {"scope": scope, "ident": ident}
        assert cache.get(f"{key}:w{int(now // 60)}") == 2, scope
        assert 0 < cache.ttl(f"{key}:w{int(now // 60)}") <= 120, scope
