"""The Celery worker's pool processes run at a lower CPU priority than the web (settings RUBRICA_WORKER_NICE),
and numpy starts no spinning helper threads in any of the platform's processes:
background work takes the CPU the experts' requests leave. Checked in a child interpreter, which the
test's own process must not share (a nice level cannot be lowered again without privileges)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

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
if child == 0:
    worker_process_init.send(sender="pool")
    os.write(write, str(os.nice(0)).encode())
    os._exit(0)
os.waitpid(child, 0)
pool = os.read(read, 16).decode()
worker_process_init.send(sender="solo")
print(pool, os.nice(0))
"""


def _levels(**env: str) -> tuple[int, int]:
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env={**os.environ, **env},
                            capture_output=True, text=True, timeout=120, check=True)
    pool, main = result.stdout.split()
    return int(pool), int(main)


# The level this test runs at (0 unless the runner was started niced): a level is only ever raised.
BASE = os.nice(0)


def test_the_pool_processes_yield_to_the_web_and_the_workers_own_process_does_not():
    assert _levels(RUBRICA_WORKER_NICE="10") == (max(10, BASE), BASE)


def test_the_level_is_a_setting_and_zero_leaves_the_pool_as_started():
    assert _levels(RUBRICA_WORKER_NICE="3") == (max(3, BASE), BASE)
    assert _levels(RUBRICA_WORKER_NICE="0") == (BASE, BASE)


def test_numpy_starts_no_helper_threads_in_the_platforms_processes():
    # OpenBLAS would start one thread a core (this machine has two) as numpy loads, spinning while idle.
    script = ("import os; os.environ.pop('OPENBLAS_NUM_THREADS', None); import config, numpy; "
              "print(len(os.listdir('/proc/self/task')))")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            check=True)
    assert int(result.stdout) == 1
