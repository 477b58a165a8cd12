"""Pacing requests to a judge endpoint: the per-process rate limit, `Retry-After`, and backoff.

Pure Python, no Django: `annotation.judging.client` uses it for every request and
`annotation.judging.ratelimit` falls back to its `RateLimiter` when Redis is away.
"""
from __future__ import annotations

import email.utils
import random
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

__all__ = ["RateLimiter", "backoff_delay", "parse_retry_after", "retryable_status"]


class RateLimiter:
    """A thread-safe token bucket shared by every request made through it.

    ``rps`` tokens are added per second up to ``burst`` (default 1, so requests
    are spaced evenly at ``1/rps`` seconds).  ``acquire`` *reserves* a token
    under the lock, possibly driving the balance negative, and then sleeps
    outside the lock for its own wait; a later caller sees the debt and waits
    longer.  So several threads never sleep on the same token, no thread
    holds the lock while sleeping, and there is no retry loop.
    """

    def __init__(
        self,
        rps: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        burst: float = 1.0,
    ) -> None:
        """Create a limiter allowing ``rps`` requests per second on average."""
        if not rps > 0:
            raise ValueError(f"rps must be positive, got {rps!r}")
        if not burst >= 1:
            raise ValueError(f"burst must be at least 1, got {burst!r}")
        self.rps = float(rps)
        self.burst = float(burst)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = self.burst  # start full: the first request goes at once
        self._last = clock()

    def acquire(self) -> float:
        """Block until a request may be sent; return how long this call waited."""
        with self._lock:
            now = self._clock()
            elapsed = max(0.0, now - self._last)  # a clock should not go back; be safe if it does
            self._last = now
            self._tokens = min(self.burst, self._tokens + elapsed * self.rps)
            self._tokens -= 1.0
            wait = -self._tokens / self.rps if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait

    def __repr__(self) -> str:
        return f"RateLimiter(rps={self.rps:g}, burst={self.burst:g})"


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Return the delay a ``Retry-After`` header asks for, in seconds, or None.

    Accepts delta-seconds (what rate limiters send) and, per RFC 9110, an
    HTTP-date.  Unparseable or negative values are ignored (None), so the
    caller falls back to its own backoff.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
        return max(0.0, seconds)
    if seconds != seconds or seconds < 0:  # NaN or negative
        return None
    return seconds


def backoff_delay(
    attempt: int,
    base_s: float,
    max_s: float,
    rng: random.Random,
    retry_after_s: float | None = None,
) -> float:
    """Return how long to wait after failed attempt number ``attempt`` (1-based).

    Full jitter (uniform in ``[0, min(max_s, base_s * 2**(attempt-1))]``)
    spreads retries of many workers apart instead of synchronising them.  A
    server-given ``Retry-After`` wins over the computed delay, since the
    server knows when it will accept us again, but is capped at ``max_s`` so
    a hostile or buggy header cannot park a worker for an hour.
    """
    if retry_after_s is not None:
        return min(max(0.0, retry_after_s), max_s)
    exponent = min(attempt - 1, 60)  # keep 2**n finite for absurd attempt counts
    ceiling = min(max_s, base_s * (2.0**exponent))
    return rng.uniform(0.0, ceiling)


def retryable_status(status: int) -> bool:
    """Return whether an HTTP status is worth retrying.

    429 (rate limited), 408 (the server timed out waiting for us: a timeout,
    like a client-side one) and any 5xx.  Other 4xx mean our request is wrong
    and repeating it would fail the same way.
    """
    return status in (408, 429) or 500 <= status <= 599


# Transport errors worth retrying: timeouts, refused/reset connections, a
# server that hung up mid-response.  Not UnsupportedProtocol or
# LocalProtocolError: those are bugs in our URL or request and never heal.
