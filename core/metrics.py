"""Prometheus metrics at `/metrics`: request latency by route, Celery queue depth, task outcomes, open leases.

Where each number lives, given that web and worker processes are many and short-lived:

- Request latency is measured in the process that served the request (a histogram). Under
  gunicorn with several workers, set `PROMETHEUS_MULTIPROC_DIR` to a per-pod empty directory
  and every worker's samples are summed at scrape time (prometheus_client's multiprocess
  mode); Prometheus scrapes each web pod, and sums across pods itself.
- Task outcomes happen in worker processes that serve no HTTP, so Celery's signals add to
  counters in Redis (one hash, shared by every worker on every machine) and a scrape reads
  them: no worker has to be scraped, and a restarted worker loses nothing.
- Queue depth (the broker's Redis list lengths) and open leases (a count in the database)
  are read at scrape time, so they are the same whichever pod is scraped (aggregate them with
  `max`, not `sum`).

Access: a signed-in admin, or `Authorization: Bearer <RUBRICA_METRICS_TOKEN>` for the
scraper. Without the token set, only admins can read it.
"""
from __future__ import annotations

import hmac
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import REGISTRY, Collector

logger = logging.getLogger("rubrica.requests")

# Seconds; a page renders in tens of milliseconds, an import or an export may take seconds.
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
REQUEST_LATENCY = Histogram(
    "rubrica_http_request_duration_seconds", "Time to answer a request, by route (URL name), method and status.",
    ["route", "method", "status"], buckets=LATENCY_BUCKETS,
)
TASK_OUTCOMES_KEY = "rubrica:metrics:task_outcomes"
OUTCOMES = ("succeeded", "failed", "retried")

# Gauges an app computes at scrape time: (name, help, function returning the value).
_gauge_sources: list[tuple[str, str, Callable[[], float]]] = []


def gauge_source_register(*, name: str, documentation: str, read: Callable[[], float]) -> None:
    """Let an app expose a number it reads at scrape time (core imports no app)."""
    if all(existing != name for existing, _, _ in _gauge_sources):
        _gauge_sources.append((name, documentation, read))


def _route_of(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    # A path no URL matched stays one label value, so probing random paths adds no series.
    return (match.view_name or match.route) if match else "unmatched"


class RequestMetricsMiddleware:
    """Times every request: the latency histogram by route, and one log line (`rubrica.requests`)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        elapsed = time.perf_counter() - started
        route = _route_of(request)
        REQUEST_LATENCY.labels(route=route, method=request.method or "", status=str(response.status_code)).observe(
            elapsed)
        logger.info("request", extra={"method": request.method, "path": request.path, "route": route,
                                      "status": response.status_code, "duration_ms": round(elapsed * 1000, 1)})
        return response


# One client (and its connection pool) per Redis URL and process: a new connection for every task
# outcome cost 1.4 ms of the worker's CPU per task, 15 times the count itself. redis-py's pool
# notices a fork and opens new connections in the child, so prefork workers share no socket.
_clients: dict[str, Any] = {}


def _redis() -> Any:
    client = _clients.get(settings.REDIS_URL)
    if client is None:
        import redis

        client = _clients[settings.REDIS_URL] = redis.Redis.from_url(
            settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    return client


def task_outcome_record(*, task: str, outcome: str) -> None:
    """Count one task outcome in Redis; a metrics failure never fails the task."""
    if not settings.REDIS_URL:
        return
    try:
        _redis().hincrby(TASK_OUTCOMES_KEY, f"{task}|{outcome}", 1)
    except Exception:  # Redis down: the task's own work matters more than its count
        logger.warning("task outcome not counted", extra={"task": task, "outcome": outcome}, exc_info=True)


def celery_queues() -> list[str]:
    """The broker queues to measure: Celery's default one plus any named in RUBRICA_METRICS_QUEUES."""
    names = [getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery")]
    names += [q for q in getattr(settings, "RUBRICA_METRICS_QUEUES", []) if q not in names]
    return names


class ScrapeTimeCollector(Collector):
    """Numbers read when Prometheus asks: queue lengths and task outcomes (Redis), app gauges (database)."""

    def collect(self) -> Iterator[Any]:
        yield from self._redis_families()
        for name, documentation, read in _gauge_sources:
            try:
                value = float(read())
            except Exception:  # one source failing (the database down) leaves the other metrics readable
                logger.warning("metrics source failed", extra={"metric": name}, exc_info=True)
                continue
            family = GaugeMetricFamily(name, documentation)
            family.add_metric([], value)
            yield family

    def _redis_families(self) -> Iterable[Any]:
        depth = GaugeMetricFamily("rubrica_celery_queue_length", "Tasks waiting in a Celery queue (the broker list).",
                                  labels=["queue"])
        outcomes = CounterMetricFamily("rubrica_celery_tasks", "Celery task outcomes since the counters began.",
                                       labels=["task", "outcome"])
        up = GaugeMetricFamily("rubrica_redis_up", "1 when Redis answered this scrape, 0 when it did not.")
        if settings.REDIS_URL:
            try:
                client = _redis()
                for queue in celery_queues():
                    depth.add_metric([queue], float(client.llen(queue)))
                for field, value in sorted(client.hgetall(TASK_OUTCOMES_KEY).items()):
                    task, _, outcome = field.decode().rpartition("|")
                    outcomes.add_metric([task, outcome], float(value))
                up.add_metric([], 1.0)
            except Exception:
                logger.warning("metrics could not read Redis", exc_info=True)
                up.add_metric([], 0.0)
        yield from (depth, outcomes, up)


def _registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry = CollectorRegistry()
        registry.register(_ProcessMetrics())
    registry.register(ScrapeTimeCollector())
    return registry


class _ProcessMetrics(Collector):
    """This process's own metrics (the latency histogram among them), when not in multiprocess mode."""

    def collect(self) -> Iterator[Any]:
        yield from REGISTRY.collect()


def _allowed(request: HttpRequest) -> int:
    """200 for an admin or the scraper's token, else the refusal's status (401 without credentials, 403)."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and getattr(user, "is_platform_admin", False):
        return 200
    expected = getattr(settings, "RUBRICA_METRICS_TOKEN", "")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if expected and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected.encode()):
        return 200
    return 403 if user is not None and user.is_authenticated else 401


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    status = _allowed(request)
    if status != 200:
        response = HttpResponse(_("Sign in as an admin or send the metrics token.") + "\n", status=status,
                                content_type="text/plain; charset=utf-8")
        if status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)
