"""Rubrica project configuration: settings, URLs, the Celery app."""
import os

# numpy's OpenBLAS starts a thread a core in every process that loads it, and those threads spin while
# they wait for work. The web (threads in several processes) and the worker (a pool of processes)
# already use every core, so an agreement report computed with them took the second core away from
# the experts' requests and spent 30% more CPU for the same wall time (measured on this 2-core
# machine: 404 against 281 ms). One thread a process, unless the environment says otherwise; set
# here, before anything imports numpy (every entry point imports this package first).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .celery import app as celery_app  # noqa: E402

__all__ = ("celery_app",)
