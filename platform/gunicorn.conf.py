"""gunicorn settings for the web process; every value can be overridden from the environment."""
import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# One process a core, each with its threads: measured on a 2-core machine with the expert's loop
# (bench/assignment.py, runs alternated), 2 processes spent 8 to 11% less of the web's CPU per submission
# than 4 (fewer database sessions and caches to keep warm, fewer switches) and carried more with 8
# clients: 118 to 124 submissions a second against 110 to 113. A thread waiting on the database leaves
# its process's interpreter to the others.
workers = int(os.environ.get("GUNICORN_WORKERS", multiprocessing.cpu_count()))
# gunicorn's gthread worker, which also spreads kept-alive connections evenly over the workers
# (core/gunicorn_worker.py: left to chance, 3 of 4 clients' connections could share one process).
worker_class = "core.gunicorn_worker.BalancedThreadWorker"
threads = int(os.environ.get("GUNICORN_THREADS", 4))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", 60))
graceful_timeout = 30
keepalive = 5
# A worker is recycled after this many requests (a guard against slow leaks). Each recycle starts
# its database sessions cold: every hot statement is planned anew (up to 5 ms each for the claim's
# and the submission's), so at 2,000 a busy worker (35 requests a second at 70 submissions a
# second) paid that every minute; at 20,000 it is about every ten minutes.
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS", 20_000))
max_requests_jitter = max_requests // 10
# The application is imported once, in the master (config/wsgi.py also resolves the URLs there),
# and each worker is forked from it: a worker recycled after max_requests starts serving at once
# instead of importing Django again (about a second of CPU each time). Nothing opens a database or
# broker connection at import.
preload_app = os.environ.get("GUNICORN_PRELOAD", "1") != "0"
accesslog = "-"
errorlog = "-"
# gunicorn's logger with an access line that computes only the atoms its format names (core/gunicorn_logging.py).
logger_class = "core.gunicorn_logging.LeanLogger"

# Prometheus multiprocess mode (core/metrics.py): each worker writes its samples under this
# directory (an emptyDir in platform/k8s/web.yaml) and a scrape of any worker sums them all.
metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


def on_starting(server):
    # Files left by an earlier run's workers would be summed with this run's.
    if metrics_dir:
        os.makedirs(metrics_dir, exist_ok=True)
        for name in os.listdir(metrics_dir):
            os.remove(os.path.join(metrics_dir, name))


def child_exit(server, worker):
    # A worker that died without freeing its entry of the connection balance (a crash, a kill).
    from core.gunicorn_worker import slot_release

    slot_release(worker.pid)
    if metrics_dir:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
