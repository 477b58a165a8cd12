"""The Celery application; tasks are discovered in each app's tasks.py."""
import os

from celery import Celery
from celery.signals import (
    beat_init,
    before_task_publish,
    task_failure,
    task_postrun,
    task_prerun,
    task_retry,
    task_success,
    worker_init,
    worker_process_init,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("rubrica")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def _refuse_unsafe_keys(**kwargs) -> None:
    """A worker or beat with unsafe keys stops before it takes any task (core.checks)."""
    from core.checks import startup_refuse_unsafe

    startup_refuse_unsafe()


# The worker's own process (set when it starts): its prefork pool's processes, where the tasks run, are others.
_worker_main_pid = 0


@worker_init.connect
def _worker_main_note(**kwargs) -> None:
    global _worker_main_pid
    _worker_main_pid = os.getpid()


@worker_process_init.connect
def _pool_process_yield(**kwargs) -> None:
    """Each process of the worker's pool yields the CPU to the web (settings RUBRICA_WORKER_NICE) and its
    database sessions run their statements on one core (RUBRICA_WORKER_DB_PARALLEL). The solo pool runs
    tasks in the worker's own process, as a test's in-process worker does: that one is left as is."""
    if os.getpid() != _worker_main_pid:
        worker_nice_apply()
        from django.db.backends.signals import connection_created

        connection_created.connect(worker_session_serial, dispatch_uid="worker_session_serial")


def worker_session_serial(sender: object = None, connection: object = None, **kwargs: object) -> None:
    """A new PostgreSQL session of a pool process: at most RUBRICA_WORKER_DB_PARALLEL parallel workers a
    statement. An agreement report's reads of a large project (every task, label and submission) were
    planned as parallel scans: PostgreSQL's helpers, at the web's priority, took the second core from the
    experts' requests while the report ran; on one core the same reads leave it to them."""
    from django.conf import settings

    if getattr(connection, "vendor", "") != "postgresql":
        return
    workers = max(0, settings.RUBRICA_WORKER_DB_PARALLEL)
    with connection.cursor() as cursor:  # type: ignore[attr-defined]
        cursor.execute("SELECT set_config('max_parallel_workers_per_gather', %s, false)", [str(workers)])


def worker_nice_apply() -> int:
    """Raise this process's nice level to RUBRICA_WORKER_NICE (never lower it); the level it runs at now."""
    from django.conf import settings

    wanted = max(0, min(19, settings.RUBRICA_WORKER_NICE))
    current = os.nice(0)
    if wanted > current:
        current = os.nice(wanted - current)
    return current


@worker_process_init.connect
def _gc_tune(**kwargs) -> None:
    """Each pool process sets the loaded application aside from the garbage collector (core.gc_tuning)."""
    from core.gc_tuning import gc_tune

    gc_tune()


# The request a task was sent from travels in a message header, so the worker's log lines for
# the task name the same request id as the web process's (core.request_id, core.logging).
REQUEST_ID_HEADER = "rubrica_request_id"


@before_task_publish.connect
def _send_request_id(headers=None, **kwargs) -> None:
    from core.request_id import request_id_current

    request_id = request_id_current()
    if request_id and headers is not None and REQUEST_ID_HEADER not in headers:
        headers[REQUEST_ID_HEADER] = request_id


def _request_id_of(task) -> str:
    request = task.request
    given = getattr(request, REQUEST_ID_HEADER, None) or (getattr(request, "headers", None) or {}).get(
        REQUEST_ID_HEADER)
    return given if isinstance(given, str) else ""


@task_prerun.connect
@task_postrun.connect
def _close_old_connections(task=None, **kwargs) -> None:
    """Around each task the worker ran, close the database connections a request would close: past
    CONN_MAX_AGE, failing their health check, or left unusable by an error (settings
    CELERY_DB_REUSE_MAX keeps Celery from closing them all, every time). An eager task runs
    inside its caller's transaction and connection: it leaves them alone."""
    if task is None or getattr(task.request, "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()


@task_prerun.connect
def _bind_request_id(task=None, **kwargs) -> None:
    from core.request_id import request_id_bind

    request_id = _request_id_of(task) if task is not None else ""
    if request_id:  # an eager task inside a request keeps the request's own id
        task.request._rubrica_request_id_token = request_id_bind(request_id)


@task_postrun.connect
def _unbind_request_id(task=None, **kwargs) -> None:
    from core.request_id import request_id_reset

    token = getattr(task.request, "_rubrica_request_id_token", None) if task is not None else None
    if token is not None:
        request_id_reset(token)
        task.request._rubrica_request_id_token = None


# Task outcomes for /metrics (core.metrics): counted in Redis, which every worker shares.
@task_success.connect
def _count_success(sender=None, **kwargs) -> None:
    from core.metrics import task_outcome_record

    task_outcome_record(task=getattr(sender, "name", "unknown"), outcome="succeeded")


@task_failure.connect
def _count_failure(sender=None, **kwargs) -> None:
    from core.metrics import task_outcome_record

    task_outcome_record(task=getattr(sender, "name", "unknown"), outcome="failed")


@task_retry.connect
def _count_retry(sender=None, **kwargs) -> None:
    from core.metrics import task_outcome_record

    task_outcome_record(task=getattr(sender, "name", "unknown"), outcome="retried")
