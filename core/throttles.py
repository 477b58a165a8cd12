"""The API's rate limits, counted in two cache counters per client instead of a list of every call.

DRF's `SimpleRateThrottle` keeps, per user and per address, the list of the instants of every
call in the last period, and reads, unpickles, rewrites and pickles it on every request: at
the default rates (6,000 a minute per user, 60,000 per address) a busy address's list holds
thousands of floats, tens of kilobytes each way for every call, and two processes writing it
at once lose each other's calls. Here each scope counts calls in fixed windows of its period
(an atomic INCR) and estimates the rate over the last full period as a sliding window does:
the previous window's count, weighted by the share of it still inside the period, plus the
current window's. With django-redis that is one round trip for every scope of a call (INCR,
EXPIRE and GET of each in one script: the user's and the address's counts together); with
another cache (the embedded mode's memory cache) it is `get`, then `add` or `incr`, per scope.

A refused call is counted too, so a client that keeps calling while throttled stays throttled
until it slows down; `Retry-After` is the time until the estimate falls under the rate if it
makes no call meanwhile. The cache unavailable (Redis down) lets every call through, as the
cache's IGNORE_EXCEPTIONS does for DRF's throttles.
"""
import hashlib
import math
from typing import Any

from django.core.cache import cache as default_cache
from redis.exceptions import NoScriptError
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle


class CountingRateThrottle(SimpleRateThrottle):
    """`SimpleRateThrottle`'s scopes, keys and rates, counted in two windows (the module's docstring)."""

    cache = default_cache
    # Set by SimpleRateThrottle.__init__ from the scope's rate.
    num_requests: int
    duration: int

    def window_keys(self, base: str, now: float) -> tuple[str, str, float]:
        """The current and previous windows' keys for cache key `base`, and the share of the current one gone."""
        window, gone = divmod(now, self.duration)
        index = int(window)
        return _window_key(base, index), _window_key(base, index - 1), gone / self.duration

    def allow_request(self, request: Any, view: Any) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        current_key, previous_key, self.gone = self.window_keys(self.key, self.now)
        counts = self._counted_together(request, view, current_key, previous_key)
        if counts is None:
            return True  # the cache is unavailable: nothing is counted, nothing is refused
        self.current, self.previous = counts
        return bool(self.previous * (1 - self.gone) + self.current <= self.num_requests)

    def _counted_together(self, request: Any, view: Any, current_key: str,
                          previous_key: str) -> tuple[int, int] | None:
        """This scope's counts, from the one round trip that counts every scope of the request.

        DRF asks each throttle of the view in turn, and asks every one even after one refuses, so
        the first to ask counts them all at once (with django-redis: one script for the user's and
        the address's windows instead of one each) and the others read their counts from the request.
        """
        counted: dict[tuple[str, str], tuple[int, int] | None] | None = getattr(
            request, "_rubrica_throttle_counts", None)
        if counted is None:
            windows = [(current_key, previous_key, self.duration)]
            for other in view.get_throttles() if hasattr(view, "get_throttles") else ():
                if isinstance(other, CountingRateThrottle) and other.rate is not None \
                        and type(other) is not type(self):
                    key = other.get_cache_key(request, view)
                    if key is not None:
                        windows.append((*other.window_keys(key, self.now)[:2], other.duration))
            counted = {(current, previous): counts for (current, previous, _), counts
                       in zip(windows, self._count_many(windows), strict=True)}
            try:
                request._rubrica_throttle_counts = counted
            except AttributeError:  # a request that takes no attributes: each scope counts alone
                pass
        if (current_key, previous_key) not in counted:
            return self._count(current_key, previous_key)
        return counted[(current_key, previous_key)]

    def _count_many(self, windows: list[tuple[str, str, int]]) -> list[tuple[int, int] | None]:
        """For each (current key, previous key, its scope's period): (the current window's calls, this one
        included; the previous window's), or None without a cache. With django-redis, one command."""
        client = _redis_client(self.cache)
        if client is None:
            return [self._count_in_cache(current, previous, duration) for current, previous, duration in windows]
        keys: list[str] = []
        for current, previous, _duration in windows:
            keys += [self.cache.make_key(current), self.cache.make_key(previous)]
        ttls = [_ttl(duration) for _current, _previous, duration in windows]
        try:
            try:
                replies = client.evalsha(_COUNT_SHA, len(keys), *keys, *ttls)
            except NoScriptError:  # a restarted or flushed Redis: EVAL sends the script and caches it again
                replies = client.eval(_COUNT_SCRIPT, len(keys), *keys, *ttls)
        except Exception:  # noqa: BLE001 - any cache failure lets the calls through, as IGNORE_EXCEPTIONS does
            return [None] * len(windows)
        return [(int(replies[2 * i]), int(replies[2 * i + 1])) for i in range(len(windows))]

    def _count(self, current_key: str, previous_key: str) -> tuple[int, int] | None:
        """`_count_many` of this scope's windows alone."""
        return self._count_many([(current_key, previous_key, self.duration)])[0]

    def _count_in_cache(self, current_key: str, previous_key: str, duration: int) -> tuple[int, int] | None:
        """The counts through Django's cache API (another backend than django-redis)."""
        try:
            previous = self.cache.get(previous_key) or 0
            if self.cache.add(current_key, 1, _ttl(duration)):
                return 1, int(previous)
            return int(self.cache.incr(current_key)), int(previous)
        except Exception:  # noqa: BLE001 - any cache failure lets the call through, as IGNORE_EXCEPTIONS does
            return None

    def wait(self) -> float | None:
        """Seconds until a call would be let through again, with no call meanwhile (that call counts too)."""
        limit, duration = self.num_requests, self.duration
        if self.current < limit and self.previous:
            # Within this window: the previous window's weight falls as time passes.
            gone_needed = 1 - (limit - self.current - 1) / self.previous
            return max(1.0, _seconds_up(gone_needed - self.gone, duration))
        # In the next window this one is the previous: its weight must fall until one more call fits.
        into_next = max(0.0, 1 - (limit - 1) / self.current) if self.current else 0.0
        return max(1.0, _seconds_up(1 - self.gone + into_next, duration))


# Every scope of a call counted by one script in Redis (atomic, one command): INCR of the current
# window, its EXPIRE, and GET of the previous one, per pair of keys (current, previous), with each
# scope's TTL in ARGV. A pipeline of the same six commands cost the web process half as much CPU again
# on every API call (packing and parsing each command and reply: 115 against 75 microseconds, measured).
_COUNT_SCRIPT = """
local counts = {}
for i = 1, #KEYS, 2 do
    counts[#counts + 1] = redis.call('INCR', KEYS[i])
    redis.call('EXPIRE', KEYS[i], ARGV[(i + 1) / 2])
    counts[#counts + 1] = tonumber(redis.call('GET', KEYS[i + 1]) or '0')
end
return counts
"""
_COUNT_SHA = hashlib.sha1(_COUNT_SCRIPT.encode(), usedforsecurity=False).hexdigest()


def _ttl(duration: float) -> int:
    # A window's counter lives for two periods: it is read as the previous one through the next.
    return 2 * int(math.ceil(duration))


def _window_key(base: str, index: int) -> str:
    return f"{base}:w{index}"


def _seconds_up(share: float, duration: float) -> float:
    """`share` of `duration`, in whole seconds rounded up (past a rounding error of the float)."""
    return float(math.ceil(share * duration - 1e-6))


def _redis_client(cache: Any) -> Any:
    """django-redis's client for `cache`, or None for another backend."""
    client = getattr(cache, "client", None)
    get_client = getattr(client, "get_client", None)
    return get_client(write=True) if callable(get_client) else None


class UserThrottle(CountingRateThrottle, UserRateThrottle):
    """Calls per signed-in user (scope `user`); anonymous calls by address."""


class AnonThrottle(CountingRateThrottle, AnonRateThrottle):
    """Calls without credentials, per address (scope `anon`)."""


class AddressThrottle(CountingRateThrottle):
    """Requests per client address, signed in or not (scope `address`), beside the per-user limit.

    Many tokens used from one address (a leaked batch, a runaway script on one host) are
    limited together. The address is DRF's: REMOTE_ADDR, or X-Forwarded-For behind the
    NUM_PROXIES trusted proxies the deployment declares.
    """

    scope = "address"

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def throttle_forget(scope: str, ident: object, *, now: float, duration: float) -> None:
    """Drop the counts of `ident` in `scope` around `now` (tests start a client afresh)."""
    base = SimpleRateThrottle.cache_format % {"scope": scope, "ident": ident}
    window = int(now // duration)
    default_cache.delete_many([_window_key(base, window + k) for k in (-1, 0, 1)])
