"""The Celery worker's pool processes run at a lower CPU priority than the web (settings RUBRICA_WORKER_NICE),
and numpy starts no spinning helper threads in any of the platform's processes:
background work takes the CPU the experts' requests leave. Checked in a child interpreter, which the
test's own process must not share (a nice level cannot be lowered again without privileges)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
# The child interpreters connect to this test's database (they only read a setting of their session).
pytestmark = pytest.mark.django_db

# The worker's start (worker_init) in the interpreter's process, then a pool process forked from it
# (worker_process_init, as Celery's prefork pool sends it), then the solo pool's case: the signal in
# the worker's own process. Each prints its nice level.
SCRIPT = """
import os, django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()
from celery.signals import worker_init, worker_process_init
import config.celery
worker_init.send(sender=None)
read, write = os.pipe()
child = os.fork()
from django.db import connection

def parallel():
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        return cursor.fetchone()[0]

if child == 0:
    try:
        worker_process_init.send(sender="pool")
        os.write(write, f"{os.nice(0)} {parallel()}".encode())
    finally:
        os._exit(0)
os.close(write)
os.waitpid(child, 0)
pool = os.read(read, 64).decode()
worker_process_init.send(sender="solo")
print(pool, os.nice(0), parallel())
"""


def _run(**env: str) -> list[str]:
    """(pool's nice level, pool's parallel helpers a statement, the worker process's level, its helpers)."""
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env={**os.environ, "DATABASE_URL": url, **env},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.split()


def _levels(**env: str) -> tuple[int, int]:
    pool, _pool_parallel, main, _main_parallel = _run(**env)
    return int(pool), int(main)


# The level this test runs at (0 unless the runner was started niced): a level is only ever raised.
BASE = os.nice(0)


def test_the_pool_processes_yield_to_the_web_and_the_workers_own_process_does_not():
    assert _levels(RUBRICA_WORKER_NICE="10") == (max(10, BASE), BASE)


def test_the_level_is_a_setting_and_zero_leaves_the_pool_as_started():
    assert _levels(RUBRICA_WORKER_NICE="3") == (max(3, BASE), BASE)
    assert _levels(RUBRICA_WORKER_NICE="0") == (BASE, BASE)


def test_the_pool_processes_database_sessions_run_each_statement_on_one_core_unless_set_otherwise():
    default = _run()
    assert default[1] == "0" and default[3] != "0"  # the pool's session; the worker's own keeps the server's
    assert _run(RUBRICA_WORKER_DB_PARALLEL="2")[1] == "2"


def test_numpy_starts_no_helper_threads_in_the_platforms_processes():
    # OpenBLAS would start one thread a core (this machine has two) as numpy loads, spinning while idle.
    script = ("import os; os.environ.pop('OPENBLAS_NUM_THREADS', None); import config, numpy; "
              "print(len(os.listdir('/proc/self/task')))")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            check=True)
    assert int(result.stdout) == 1
