"""A judge run's requests-per-second limit, per process or shared through Redis.

`RateLimiter` (pacing.py) spaces the requests of one process. Several Celery worker
processes walking the same run would each allow the full rate, so with Redis
configured every process reserves its slot from one Redis key per run instead: a
short Lua script reads Redis's own clock (so worker clocks need not agree), takes the
later of "now" and the key's next free slot, and moves the slot on by 1/rps. That is
the same reservation as the in-process bucket with a burst of one, made atomic across
processes. Should Redis be unreachable the process falls back to its own limiter and
logs a warning: a judge run slowed to one process's share beats one that stops.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

import redis
from django.conf import settings

from annotation.judging.pacing import RateLimiter

logger = logging.getLogger(__name__)

# KEYS[1] the run's slot key; ARGV[1] interval in microseconds; ARGV[2] key TTL in ms.
# Returns how many microseconds the caller must wait for its reserved slot.
_RESERVE_SLOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local slot = math.max(now, tonumber(redis.call('GET', KEYS[1]) or '0'))
redis.call('SET', KEYS[1], string.format('%.0f', slot + tonumber(ARGV[1])), 'PX', ARGV[2])
return slot - now
"""


class RedisRateLimiter:
    """Spaces the requests of every process sharing `key` at least 1/rps seconds apart."""

    def __init__(self, *, url: str, key: str, rps: float, sleep: Callable[[float], None] = time.sleep) -> None:
        if not rps > 0:
            raise ValueError(f"rps must be positive, got {rps!r}")
        self.rps = float(rps)
        self.key = key
        self._interval_us = int(round(1_000_000 / self.rps))
        # Idle keys vanish on their own; a minute is far longer than any slot.
        self._ttl_ms = max(60_000, 10 * self._interval_us // 1000)
        self._sleep = sleep
        self._redis = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self._script = self._redis.register_script(_RESERVE_SLOT)
        self._fallback = RateLimiter(self.rps, sleep=sleep)

    def acquire(self) -> float:
        """Block until this process may send; return how long it waited."""
        try:
            wait_us = int(self._script(keys=[self.key], args=[self._interval_us, self._ttl_ms]))
        except redis.RedisError as exc:
            logger.warning("judge rate limit: Redis unavailable; limiting this process only",
                           extra={"error": type(exc).__name__})
            return self._fallback.acquire()
        wait = max(0, wait_us) / 1_000_000
        if wait > 0:
            self._sleep(wait)
        return wait

    def __repr__(self) -> str:
        return f"RedisRateLimiter(key={self.key!r}, rps={self.rps:g})"


def rate_limiter_for_run(*, run_id: int, rps: float) -> RateLimiter | RedisRateLimiter:
    """Redis-shared when REDIS_URL is set (several workers), else this process's own bucket."""
    url = getattr(settings, "REDIS_URL", "")
    if url:
        return RedisRateLimiter(url=url, key=f"rubrica:judge-run:{run_id}:next-slot", rps=rps)
    return RateLimiter(rps)
