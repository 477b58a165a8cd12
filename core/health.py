"""`/healthz`: the process can serve, the database answers and (when configured) Redis answers.

For load balancers and Kubernetes probes (platform/k8s): 200 with what was checked, 503
naming what failed. It reads no session, needs no login, and says nothing beyond "ok"
or the failing component's error class. Processes that serve no HTTP (the Celery worker)
run the same checks with `manage.py healthcheck`.
"""
import time

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return "ok"


def _redis() -> str:
    if not getattr(settings, "REDIS_URL", ""):
        return "not configured"
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    finally:
        client.close()
    return "ok"


def health_check() -> tuple[bool, dict[str, str]]:
    """Whether the database and (when configured) Redis answer, with what each said."""
    started = time.perf_counter()
    body: dict[str, str] = {}
    healthy = True
    for name, probe in (("database", _database), ("redis", _redis)):
        try:
            body[name] = probe()
        except Exception as exc:  # a probe reports every failure, it never raises
            body[name] = f"failed: {type(exc).__name__}"
            healthy = False
    body["status"] = "ok" if healthy else "failing"
    body["ms"] = str(round((time.perf_counter() - started) * 1000, 1))
    return healthy, body


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    healthy, body = health_check()
    return JsonResponse(body, status=200 if healthy else 503)
