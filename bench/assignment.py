"""Benchmark: next-task and submit through the real stack, for veteran experts, at 10,000 and 100,000 tasks.

Builds, in a scratch PostgreSQL database, a project of 10 rubric items per task (overlap
3) and --experts veteran experts with about --labels labels of history each
(tests/support/scale.py's `veteran_world`); serves it with gunicorn as deployed
(`platform/gunicorn.conf.py`) beside a Celery worker that consumes the follow-up work each
submission queues (tier evaluation, earning, review flags, agreement requests: one outbox row
each, run by drains that take every pending row, core.after_commit) from Redis;
then drives it with 1, 4 and 8 concurrent experts, --submissions submissions per phase (after
--warmup unmeasured ones),
each a next-task and a submit through the token API. Then more models answer the
questions until the project holds the next size, and the phases run again.

For each phase: next-task and submit p50/p95/p99, submissions per second, the cores the
web, the worker, PostgreSQL, Redis and the client used, their CPU per submission, and how long
the worker took to drain the queue afterwards; per size, a cProfile of where a claim's and
a submission's time goes in-process. Prints one JSON line.
Usage: .venv/bin/python bench/assignment.py [--tasks 10000 100000] [--submissions 300] [--experts 8]
"""
import argparse
import http.client
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
HEARTBENCH = ROOT.parent / "shared" / "heartbench" / "question_all.jsonl"
DB_NAME = "rubrica_bench"
PG = "postgres://postgres@127.0.0.1:5432"
PORT = 8765
# Issue 14, point 4: with 4 concurrent experts, on 10,000 and 100,000 tasks, veterans included.
TARGETS = {"next_p95_ms_4": 40, "submit_p95_ms_4": 40, "submissions_per_s_4": 70, "largest_vs_smallest": 1.2}


def setup_django() -> None:
    os.environ["DATABASE_URL"] = f"{PG}/{DB_NAME}"
    # Outside the embedded mode the keys come from the environment (core/checks.py); a bench
    # run, and the gunicorn and Celery processes it starts, use throwaway ones.
    for name in ("SECRET_KEY", "RUBRICA_SECRETS_KEY"):
        os.environ.setdefault(name, secrets.token_urlsafe(48))
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"
    # 10,000 HeartBench questions are ~33 MB, over the default upload cap.
    os.environ["RUBRICA_MAX_IMPORT_BYTES"] = str(200 * 1024 * 1024)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def recreate_database() -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")


def heartbench_shaped(n: int) -> bytes:
    """n questions cloned from the real HeartBench rows under new ids."""
    rows = [json.loads(line) for line in HEARTBENCH.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for i in range(n):
        row = dict(rows[i % len(rows)])
        row["question_id"] = f"bq{i:06d}"
        out.append(json.dumps(row, ensure_ascii=False))
    return ("\n".join(out) + "\n").encode()


def server_wait(base_url: str, tries: int = 150) -> None:
    """Wait until the server at `base_url` answers its login page (gunicorn starting: up to 30 s)."""
    for _ in range(tries):
        try:
            httpx.get(f"{base_url}/accounts/login/", timeout=5)
            return
        except httpx.HTTPError:
            time.sleep(0.2)


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    if not ordered:
        return {"n": 0}

    def pick(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000, 2)

    return {"p50_ms": pick(0.50), "p95_ms": pick(0.95), "p99_ms": pick(0.99), "n": len(ordered)}


def run_threads(target, tokens: list[str]) -> float:
    """Run `target(token)` for each token in a thread of its own, all at once; the seconds until all ended."""
    threads = [threading.Thread(target=target, args=(token,)) for token in tokens]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def drive(tokens: list[str], project_id: int, submissions: int,
          kept: dict[str, http.client.HTTPConnection] | None = None) -> dict:
    """`len(tokens)` experts loop next-task -> submit until `submissions` submissions are in, together.

    Each expert keeps one connection; with `kept`, the connections of an earlier drive (its warm-up):
    gunicorn hands a connection's requests to the worker that accepted it, so the measured requests
    reach the workers, threads and database sessions the warm-up prepared, as a server's do once it
    has been up a while, instead of a worker that new connections happened to wake."""
    next_lat: list[float] = []
    submit_lat: list[float] = []
    # Split by whether the submission completed its task (and so wrote its consensus) or not.
    completing_lat: list[float] = []
    other_lat: list[float] = []
    lock = threading.Lock()
    errors: list[str] = []
    left = [submissions]

    def take() -> bool:
        with lock:
            if left[0] <= 0:
                return False
            left[0] -= 1
            return True

    from tests.support.scale import agreeing_label

    def worker(token: str) -> None:
        rng = random.Random(token)
        # The standard library's client on one kept-alive connection per expert: the clients share the
        # machine with the stack they measure, and httpx spent about 4 ms of CPU per submission.
        client = (kept or {}).get(token) or http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        if kept is not None:
            kept[token] = client
        auth = {"Authorization": f"Token {token}"}

        def post(path: str, body: dict | None = None, **headers: str) -> tuple[int, bytes]:
            data = json.dumps(body).encode() if body is not None else b""
            client.request("POST", path, body=data, headers={**auth, **headers, "Content-Type": "application/json"})
            response = client.getresponse()
            return response.status, response.read()

        try:
            while take():
                t0 = time.perf_counter()
                status, text = post(f"/api/v1/projects/{project_id}/next-task/")
                t1 = time.perf_counter()
                if status != 200:
                    errors.append(f"next-task {status} {text[:200]!r}")
                    return
                lease = json.loads(text)
                # Experts who mostly agree (a fixed answer per item, one in ten flipped), as a real
                # panel does, and as the veterans' history was written: random labels would split
                # every panel and open consultations.
                labels = {item["id"]: agreeing_label(item["id"], rng) for item in lease["rubric_items"]}
                t2 = time.perf_counter()
                status, text = post(f"/api/v1/assignments/{lease['id']}/submit/", {"labels": labels},
                                    **{"Idempotency-Key": uuid.uuid4().hex})
                t3 = time.perf_counter()
                if status not in (200, 201):
                    errors.append(f"submit {status} {text[:200]!r}")
                    return
                with lock:
                    next_lat.append(t1 - t0)
                    submit_lat.append(t3 - t2)
                    (completing_lat if json.loads(text).get("task_complete") else other_lat).append(t3 - t2)
        finally:
            if kept is None:
                client.close()

    elapsed = run_threads(worker, tokens)
    return {"clients": len(tokens), "next_task": percentiles(next_lat), "submit": percentiles(submit_lat),
            "submit_completing": percentiles(completing_lat), "submit_not_completing": percentiles(other_lat),
            "submissions_per_s": round(len(submit_lat) / elapsed, 1), "seconds": round(elapsed, 1),
            "errors": errors[:3]}


# ---------------------------------------------------------------- CPU of the processes


def _cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime


def _tree(pid: int) -> list[int]:
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except FileNotFoundError:
            children = []
        queue.extend(int(c) for c in children)
    return found


def _pids_named(*names: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in names:
                    pids.append(int(entry.name))
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
    return pids


def _postgres_pids() -> list[int]:
    return _pids_named("postgres", "postmaster")


class CpuMeter:
    """CPU seconds of the web (gunicorn tree), the worker (Celery tree), PostgreSQL, Redis (the broker,
    the cache and the throttles' counts) and this client. A PostgreSQL backend that exits takes its
    CPU with it: the figures count the sessions alive at the end of a phase (the served processes
    keep theirs, DB_CONN_MAX_AGE and CELERY_DB_REUSE_MAX)."""

    def __init__(self, web: int, worker: int) -> None:
        self.web, self.worker = web, worker
        self.hz = os.sysconf("SC_CLK_TCK")

    def read(self) -> dict[str, float]:
        return {"web": sum(map(_cpu_ticks, _tree(self.web))) / self.hz,
                "worker": sum(map(_cpu_ticks, _tree(self.worker))) / self.hz,
                "database": sum(map(_cpu_ticks, _postgres_pids())) / self.hz,
                "redis": sum(map(_cpu_ticks, _pids_named("redis-server"))) / self.hz,
                "client": sum(os.times()[:2])}


def machine_speed_ms() -> float:
    """CPU milliseconds of a fixed pure-Python loop (the best of 5), taken with the stack idle before a phase.

    This machine's speed drifts: within one session the same code on the same world measured 8.8 and
    14.9 ms of web CPU per submission an hour apart. This figure records the pace this process saw;
    it did not follow every drift of the served processes (one run: 12.0 and 9.9 ms of web CPU in
    two phases at 11.9 and 18.9 ms here), so runs are compared side by side, one after the other."""
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        total = 0
        for i in range(300_000):
            total += i * i % 7
        best = min(best, time.process_time() - started)
    return round(1000 * best, 1)


def measured(meter: CpuMeter, run) -> dict:
    """Run a phase and add the cores each side used over it (CPU seconds / wall seconds)."""
    speed = machine_speed_ms()
    before, started = meter.read(), time.perf_counter()
    figures = run()
    after, wall = meter.read(), time.perf_counter() - started
    figures["cores_used"] = {k: round((after[k] - before[k]) / wall, 2) for k in before}
    figures["cpu_ms_per_submission"] = {k: round(1000 * (after[k] - before[k]) / max(1, figures["submit"]["n"]), 1)
                                        for k in ("web", "worker", "database", "redis", "client")}
    figures["machine_speed_ms"] = speed
    return figures


def queue_drained(broker: str, timeout_s: float = 120) -> float:
    """Seconds until the Celery queue on `broker` is empty and stays so (the worker kept up, or caught up)."""
    import redis

    client = redis.Redis.from_url(broker)
    started = time.perf_counter()
    quiet = 0
    while time.perf_counter() - started < timeout_s:
        quiet = quiet + 1 if client.llen("celery") == 0 else 0
        if quiet >= 5:
            break
        time.sleep(0.1)
    return round(time.perf_counter() - started - 0.5, 2)


# ------------------------------------------------------------------- profiles


WARM_RUNS = 5


def profile_claim_and_submit(project_id: int, expert_id: int, runs: int = 20) -> dict:
    """Where a claim's and a submission's time goes, in this process (cProfile over `runs` of each): the
    request's own work, its follow-ups written to the outbox as served (the worker's share is above)."""
    import cProfile
    import pstats

    from celery import current_app
    from django.utils import timezone

    import core.after_commit as after_commit
    from annotation.assignment.services import assignment_claim_next
    from annotation.models import Project
    from annotation.selectors import rubric_items_for_task
    from annotation.submission.services import labels_submit
    from core.models import OutboxTask
    from experts.models import User
    from tests.support.scale import agreeing_label

    rng = random.Random(expert_id)
    expert = User.objects.get(pk=expert_id)
    claim_profile, submit_profile = cProfile.Profile(), cProfile.Profile()
    # As served: the follow-up work is written to the outbox in the submission's transaction and left
    # to the worker (measured above), not run in this process after the commit.
    eager, send, flag = current_app.conf.task_always_eager, after_commit.task_send, after_commit.drain_queued_flag
    current_app.conf.task_always_eager = False
    after_commit.task_send = lambda *args, **kwargs: None
    # Nor does it flag a drain as queued on the served stack's broker, which sends none then.
    after_commit.drain_queued_flag = lambda *, set_it: None
    first_row = OutboxTask.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    for run in range(WARM_RUNS + runs):
        # The first runs are not profiled: they import the URL configuration, the templates and the
        # task modules, and compile the prepared queries, once per process (a served worker has).
        profiling = run >= WARM_RUNS
        project = Project.objects.get(pk=project_id)
        if profiling:
            claim_profile.enable()
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
        claim_profile.disable()
        labels = {item.item_key: agreeing_label(item.item_key, rng) for item in rubric_items_for_task(lease.task)}
        if profiling:
            submit_profile.enable()
        labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
        submit_profile.disable()
    current_app.conf.task_always_eager, after_commit.task_send, after_commit.drain_queued_flag = eager, send, flag
    # The worker's next drain runs the rows the profiled submissions left (before the next phase).
    OutboxTask.objects.filter(pk__gt=first_row, done_at__isnull=True).update(next_check_at=timezone.now())

    def top(profile) -> list[str]:
        stats = pstats.Stats(profile)
        rows = []
        for (path, line, name), (_, _, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
            if str(ROOT) in path and ".venv" not in path:
                rows.append((cumulative, f"{Path(path).relative_to(ROOT)}:{line} {name}"))
        rows.sort(reverse=True)
        return [f"{1000 * c / runs:.2f} ms {where}" for c, where in rows[:8]]

    return {"runs": runs, "warm_runs_not_profiled": WARM_RUNS, "claim": top(claim_profile),
            "submit": top(submit_profile)}


# ------------------------------------------------------------------------ main


def build_world(tasks: int, experts: int, labels: int) -> tuple[int, list[int]]:
    """The project (10 rubric items per task, overlap 3) and `experts` veteran experts of ~`labels` labels."""
    from django.core.management import call_command

    from annotation.models import Assignment
    from experts.models import ExpertProfile
    from tests.support.scale import veteran_world

    call_command("migrate", verbosity=0)
    # No control tasks in the drive: the clients cannot know the references, and an expert
    # failing controls at random is paused by the tier rules, as it should be.
    project, _ = veteran_world(tasks=tasks, labels=labels, items=10, veterans=experts, control_rate_pct=0,
                               golden=400, control=100)
    expert_ids = sorted(set(Assignment.objects.filter(task__project=project).values_list("expert_id", flat=True)))
    # Part-time experts take 200 tasks a week by default; the bench has each take more than that.
    ExpertProfile.objects.filter(user_id__in=expert_ids).update(weekly_capacity=100_000)
    settle()
    return project.pk, expert_ids


def settle() -> None:
    """VACUUM ANALYZE after writing the world: autovacuum would otherwise come for the bulk-inserted
    tables during the first phases, where a server that took the import a while ago has long had it.
    (One run at 100,000 tasks with ANALYZE alone: the measured processes used 1.74 of the 2 cores in
    its 4-client phase, and 70.5 submissions a second against 90.8 at 10,000; with this, 1.91 cores.)"""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def grow(project_id: int, tasks: int) -> int:
    """More models answer the questions until the project has `tasks` tasks (each new model answers every question)."""

    from annotation.models import Project, Question, Response, Task
    from annotation.selectors import rubric_version_current

    project = Project.objects.get(pk=project_id)
    version = rubric_version_current(project)
    questions = list(Question.objects.filter(project=project).order_by("pk"))
    extra = tasks - Task.objects.filter(project=project).count()
    rng = random.Random(5)
    responses = Response.objects.bulk_create(
        (Response(project=project, question=questions[i % len(questions)],
                  model_name=f"grown-model-{i // len(questions)}", text="嗯，我听到了。")
         for i in range(max(0, extra))), batch_size=5000)
    Task.objects.bulk_create((Task(project=project, response=r, rubric_version=version, overlap=project.overlap,
                                   shuffle_key=rng.getrandbits(62)) for r in responses), batch_size=5000)
    settle()
    return Task.objects.filter(project=project).count()


def stack_start(root: Path, database: str, broker: str, port: int) -> tuple[subprocess.Popen, subprocess.Popen]:
    """gunicorn as deployed and a Celery worker consuming the follow-up work, from checkout `root`, on `database`."""
    env = {**os.environ, "DATABASE_URL": f"{PG}/{database}", "DB_CONN_MAX_AGE": "600", "AXES_ENABLED": "0",
           "CELERY_TASK_ALWAYS_EAGER": "0", "REDIS_URL": broker, "CELERY_BROKER_URL": broker,
           "GUNICORN_BIND": f"127.0.0.1:{port}"}
    server = subprocess.Popen([str(root / ".venv" / "bin" / "gunicorn"), "-c", "platform/gunicorn.conf.py",
                               "config.wsgi:application", "--access-logfile", "/dev/null", "--log-level", "warning"],
                              cwd=root, env=env)
    worker = subprocess.Popen([str(root / ".venv" / "bin" / "celery"), "-A", "config", "worker", "--loglevel",
                               "WARNING", "--concurrency", "2", "--without-gossip", "--without-mingle"],
                              cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    return server, worker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--submissions", type=int, default=300)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--labels", type=int, default=4000, help="each veteran's history, in labels")
    parser.add_argument("--warmup", type=int, default=150, help="unmeasured submissions before each phase")
    args = parser.parse_args()

    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/12")
    recreate_database()
    setup_django()
    from rest_framework.authtoken.models import Token

    started = time.perf_counter()
    project_id, expert_ids = build_world(args.tasks[0], args.experts, args.labels)
    tokens = [Token.objects.get_or_create(user_id=e)[0].key for e in expert_ids]
    build_s = round(time.perf_counter() - started, 1)

    broker = "redis://127.0.0.1:6379/12"
    import redis

    redis.Redis.from_url(broker).flushdb()
    server, worker = stack_start(ROOT, DB_NAME, broker, PORT)
    sizes = []
    try:
        server_wait(f"http://127.0.0.1:{PORT}")
        meter = CpuMeter(server.pid, worker.pid)
        for n, tasks in enumerate(args.tasks):
            if n:
                tasks = grow(project_id, tasks)
            size: dict = {"tasks": tasks}
            for clients in (1, 4, 8):
                # Unmeasured first: each served thread's connection (a worker a core, 4 threads each)
                # prepares its statements on their second run and PostgreSQL plans each anew for its
                # first five runs (5 ms for the claim's context, the draw or the submission's
                # assignment), which a server that has been up a while has done long ago. 150
                # submissions give each connection about 37 requests, and the measured phase goes on
                # on the warm-up's client connections, so on the same served threads. (A worker
                # recycled after its max_requests, about every ten minutes at 70/s, pays this again.)
                kept: dict[str, http.client.HTTPConnection] = {}
                drive(tokens[:clients], project_id, args.warmup, kept)
                queue_drained(broker)
                phase = measured(meter, lambda c=clients, k=kept: drive(tokens[:c], project_id, args.submissions, k))
                for connection in kept.values():
                    connection.close()
                phase["follow_ups_drained_after_s"] = queue_drained(broker)
                size[f"clients_{clients}"] = phase
            size["profile"] = profile_claim_and_submit(project_id, expert_ids[-1])
            sizes.append(size)
    finally:
        server.terminate()
        worker.terminate()
        server.wait(timeout=30)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # A warm shutdown waits for the task at hand: at 100,000 tasks the agreement report that
            # the submissions' (debounced) requests asked for can take longer than that.
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
        redis.Redis.from_url(broker).flushdb()

    def figures(size: dict) -> dict:
        four = size["clients_4"]
        # A phase that stopped on an error has no latencies: it meets nothing.
        return {"next_p95_ms_4": four["next_task"].get("p95_ms", float("inf")),
                "submit_p95_ms_4": four["submit"].get("p95_ms", float("inf")),
                "submissions_per_s_4": four["submissions_per_s"]}

    first, last = figures(sizes[0]), figures(sizes[-1])
    print(json.dumps({
        "bench": "assignment", "build_s": build_s, "experts": len(tokens), "veteran_labels_each": args.labels,
        "submissions_per_phase": args.submissions,
        "warmup_submissions_per_phase": args.warmup, "sizes": sizes,
        "targets": TARGETS,
        "met": {"next_p95_4_under_40ms": all(figures(s)["next_p95_ms_4"] < 40 for s in sizes),
                "submit_p95_4_under_40ms": all(figures(s)["submit_p95_ms_4"] < 40 for s in sizes),
                "submissions_per_s_4_at_least_70": all(figures(s)["submissions_per_s_4"] >= 70 for s in sizes),
                "largest_within_20pct_of_smallest": all(
                    last[k] <= 1.2 * first[k] for k in ("next_p95_ms_4", "submit_p95_ms_4"))
                and last["submissions_per_s_4"] >= 0.8 * first["submissions_per_s_4"]},
        "stack": f"gunicorn -c platform/gunicorn.conf.py (gthread, connections balanced over "
                 f"{os.environ.get('GUNICORN_WORKERS', os.cpu_count())} workers), "
                 "a Celery worker (concurrency 2) consuming the "
                 "follow-up work from Redis, PostgreSQL; all on this machine, clients in this process",
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
