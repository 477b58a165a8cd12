"""Helpers of the fault tests: the end-of-test checks, a real Celery worker process, locks held
from a side connection, and pointing this process's Celery app at a broker.

Every fault test ends with `books_and_consensus_clean()`: `reconcile_ledger` passes and
each task's stored consensus equals one recomputed here from its labels.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path

import psycopg
import redis
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from annotation.models import Assignment, ItemConsensus, Label, Task
from config.celery import app
from core import after_commit

ROOT = Path(settings.BASE_DIR)
# The fault tests' broker: a Redis database of their own (the suite's REDIS_URL is another).
WORKER_REDIS_URL = os.environ.get("RUBRICA_FAULTS_REDIS_URL", "redis://127.0.0.1:6379/7")


def expected_consensus() -> dict[tuple[int, int], tuple[int, int, int | None, str]]:
    """(task, item) -> (hits, votes, majority, zone), recomputed from the counted labels of every
    task that is complete or already has consensus rows (golden tasks never have any)."""
    votes: dict[tuple[int, int], list[int]] = defaultdict(list)
    tasks = (set(ItemConsensus.objects.values_list("task_id", flat=True))
             | set(Task.objects.filter(status=Task.Status.COMPLETE, is_golden=False).values_list("pk", flat=True)))
    rows = (Label.objects.filter(task_id__in=tasks, assignment__status=Assignment.Status.SUBMITTED)
            .values_list("task_id", "rubric_item_id", "value"))
    for task_id, item_id, value in rows:
        votes[(task_id, item_id)].append(value)
    expected = {}
    for key, values in votes.items():
        hits, total = sum(values), len(values)
        if 2 * hits == total:
            majority, zone = None, "tied"
        else:
            majority = int(2 * hits > total)
            zone = "single" if total == 1 else "unanimous" if hits in (0, total) else "split"
        expected[key] = (hits, total, majority, zone)
    return expected


def stored_consensus() -> dict[tuple[int, int], tuple[int, int, int | None, str]]:
    return {(t, i): (h, n, m, z) for t, i, h, n, m, z in ItemConsensus.objects.values_list(
        "task_id", "rubric_item_id", "hit_votes", "total_votes", "majority", "zone")}


def books_and_consensus_clean() -> None:
    """Assert `reconcile_ledger` passes and the stored consensus is the labels' own."""
    out = StringIO()
    call_command("reconcile_ledger", stdout=out, stderr=out)  # raises CommandError when the books disagree
    assert "reconciles" in out.getvalue()
    assert stored_consensus() == expected_consensus()


# --- Celery in this process --------------------------------------------------------------------

def forget_celery_connections() -> None:
    """Drop the broker pool and result backend built for the previous configuration."""
    app._pool = None
    app._backend_cache = None
    if hasattr(app._local, "backend"):
        del app._local.backend
    if "amqp" in app.__dict__:
        app.amqp._producer_pool = None


@contextmanager
def celery_broker(url: str) -> Iterator[None]:
    """Send this process's tasks to the broker at `url` (not eagerly), as the web processes do."""
    keys = ("broker_url", "result_backend", "task_always_eager", "broker_connection_retry",
            "broker_connection_max_retries")
    saved = {key: app.conf[key] for key in keys}
    # A refused connection fails the send at once instead of after the default retries.
    app.conf.update(broker_url=url, result_backend=url, task_always_eager=False, broker_connection_max_retries=0)
    forget_celery_connections()
    try:
        yield
    finally:
        app.conf.update(saved)
        forget_celery_connections()
        after_commit._broker_down_until = 0.0  # the next test starts with a broker it has not seen refuse


# --- A real worker process ---------------------------------------------------------------------

def redis_flush(url: str = WORKER_REDIS_URL) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


class WorkerProcess:
    """`celery -A config worker` in its own process group, on the test database and WORKER_REDIS_URL.

    A short visibility timeout makes the broker hand a killed worker's message to the next
    worker that starts a second later (a start takes longer than that, so the next worker
    finds it on its first look); `env` adds settings (short judge timeouts, no debounce).
    `start(warm_next=True)` also warms the next worker (tests/support/worker_main.py), which
    the next `start()` sets going.
    """

    VISIBILITY_S = 1

    def __init__(self, **env: str) -> None:
        db = connection.settings_dict
        self.env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "REDIS_URL": WORKER_REDIS_URL, "CELERY_BROKER_URL": WORKER_REDIS_URL,
            "CELERY_RESULT_BACKEND": WORKER_REDIS_URL, "CELERY_TASK_ALWAYS_EAGER": "0",
            "CELERY_VISIBILITY_TIMEOUT_S": str(self.VISIBILITY_S), "RUBRICA_OUTBOUND_ALLOWED_HOSTS": "127.0.0.1",
            "RUBRICA_AGREEMENT_BOOTSTRAP": "50",
            **env,
        }
        self.process: subprocess.Popen | None = None
        self._warm: tuple[subprocess.Popen, str] | None = None
        self._logs: list[str] = []
        self._log = ""

    def _spawn(self) -> tuple[subprocess.Popen, str]:
        fd, log = tempfile.mkstemp(prefix="rubrica-worker-", suffix=".log")
        self._logs.append(log)
        args = ["--pool", "solo", "--loglevel", "INFO", "--without-mingle", "--without-gossip",
                "--without-heartbeat", "-n", f"faults{time.monotonic_ns()}@%h"]
        process = subprocess.Popen([sys.executable, "-m", "tests.support.worker_main", *args],
                                   cwd=ROOT, env=self.env, stdin=subprocess.PIPE, stdout=fd,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        os.close(fd)
        return process, log

    def start(self, *, warm_next: bool = False, timeout: float = 90.0) -> None:
        """Set the warm worker (or a new one) going and wait until it consumes; `warm_next` warms
        the one that replaces it."""
        self.process, self._log = self._warm or self._spawn()
        self._warm = None
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")
        self.process.stdin.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the worker exited: {self.output()[-3000:]}")
            if " ready." in self.output():
                if warm_next:
                    self._warm = self._spawn()
                return
            time.sleep(0.2)
        raise AssertionError(f"the worker never became ready: {self.output()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the whole process group: no shutdown, no ack, as when a node dies."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def output(self) -> str:
        with open(self._log, encoding="utf-8", errors="replace") as f:
            return f.read()

    def close(self) -> None:
        """Stop every process this started (SIGTERM, then SIGKILL) and remove the logs."""
        for process in [p for p in (self.process, self._warm[0] if self._warm else None) if p is not None]:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=30)
        for log in self._logs:
            os.unlink(log)


@contextmanager
def worker_process(**env: str) -> Iterator[WorkerProcess]:
    redis_flush()
    worker = WorkerProcess(**env)
    try:
        with celery_broker(WORKER_REDIS_URL):
            yield worker
    finally:
        worker.close()
        redis_flush()


# --- The database, from the side -----------------------------------------------------------------

def side_connection() -> psycopg.Connection:
    """A connection of its own to the test database (not Django's), for locks a test holds."""
    db = connection.settings_dict
    return psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"])


def wait_for_lock_waiters(count: int = 1, timeout: float = 180.0) -> list[int]:
    """The backend pids of the sessions blocked on a lock, once there are `count` of them."""
    deadline = time.monotonic() + timeout
    with side_connection() as conn:
        conn.autocommit = True
        while time.monotonic() < deadline:
            pids = [r[0] for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")]
            if len(pids) >= count:
                return pids
            time.sleep(0.05)
    raise AssertionError(f"{count} sessions never waited on a lock")


def terminate_backends(pids: list[int]) -> None:
    """End the server side of a killed worker's connections, as PostgreSQL does once it notices
    the client is gone: their open transactions roll back."""
    with side_connection() as conn:
        conn.autocommit = True
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", [pid])


def wait_for(condition, timeout: float = 180.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")
