"""Load: 50 simulated experts pull and submit against the real stack for a bounded time.

Builds a scratch PostgreSQL database (bench/assignment.py's helpers: HeartBench-shaped
questions through the real importer), serves it with gunicorn (platform/gunicorn.conf.py)
on loopback, runs a Celery worker on Redis, and lets `--experts` threads loop next-task →
submit for `--seconds`. Some loops click "next task" twice at once (two tabs) and some
send a submission again with its Idempotency-Key (a retry). When time is up the worker
drains the outbox and the database is checked: no task over its overlap, no expert with
two submissions of one task or more leases at once than their limit, every acknowledged
submission stored with exactly the labels sent, consensus equal to a recomputation from
the labels, the ledger reconciled. Prints one JSON line.

Usage: .venv/bin/python bench/load.py [--seconds 180] [--experts 50] [--questions 1500]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import assignment as shared  # noqa: E402

DB_NAME = "rubrica_faults_load"
PORT = 8660
REDIS_URL = os.environ.get("RUBRICA_LOAD_REDIS_URL", "redis://127.0.0.1:6379/6")
DOUBLE_CLICK = 0.10
RETRY = 0.10


class Recorder:
    """What the simulated experts saw: latencies per endpoint, errors, acknowledged submissions."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.error_samples: list[str] = []
        self.submitted: dict[int, dict[str, int]] = {}  # assignment id -> labels acknowledged
        self.replay_mismatch = 0
        self.two_leases_seen = 0
        self.empty = 0

    def time(self, endpoint: str, seconds: float) -> None:
        with self.lock:
            self.latency[endpoint].append(seconds)

    def error(self, endpoint: str, what: str) -> None:
        with self.lock:
            self.errors[endpoint] += 1
            if len(self.error_samples) < 5:
                self.error_samples.append(f"{endpoint}: {what}"[:300])


def _call(rec: Recorder, client: httpx.Client, endpoint: str, method: str, url: str, **kwargs) -> httpx.Response | None:
    started = time.perf_counter()
    try:
        response = client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        rec.error(endpoint, f"{type(exc).__name__}: {exc}")
        return None
    rec.time(endpoint, time.perf_counter() - started)
    return response


def expert_loop(rec: Recorder, token: str, project_id: int, deadline: float, seed: int) -> None:
    rng = random.Random(seed)
    headers = {"Authorization": f"Token {token}"}
    next_url = f"/api/v1/projects/{project_id}/next-task/"
    with httpx.Client(base_url=f"http://127.0.0.1:{PORT}", headers=headers, timeout=60) as client:
        while time.monotonic() < deadline:
            if rng.random() < DOUBLE_CLICK:
                # Two tabs ask at once: they must get the one lease the limit allows.
                answers: list[httpx.Response | None] = [None, None]

                def click(i: int, answers: list = answers) -> None:
                    answers[i] = _call(rec, client, "next_task", "POST", next_url)

                clicks = [threading.Thread(target=click, args=(i,)) for i in range(2)]
                for c in clicks:
                    c.start()
                for c in clicks:
                    c.join()
                leases = [a for a in answers if a is not None and a.status_code == 200]
                if len({a.json()["id"] for a in leases}) > 1:
                    with rec.lock:
                        rec.two_leases_seen += 1
                lease = leases[0] if leases else next((a for a in answers if a is not None), None)
            else:
                lease = _call(rec, client, "next_task", "POST", next_url)
            if lease is None:
                continue
            if lease.status_code == 204:
                with rec.lock:
                    rec.empty += 1
                time.sleep(0.5)
                continue
            if lease.status_code != 200:
                rec.error("next_task", f"{lease.status_code} {lease.text}")
                continue
            body = lease.json()
            labels = {str(item["id"]): rng.randint(0, 1) for item in body["rubric_items"]}
            key = uuid.uuid4().hex
            url = f"/api/v1/assignments/{body['id']}/submit/"
            answer = _call(rec, client, "submit", "POST", url, json={"labels": labels},
                           headers={"Idempotency-Key": key})
            if answer is None:
                continue
            if answer.status_code not in (200, 201):
                rec.error("submit", f"{answer.status_code} {answer.text}")
                continue
            with rec.lock:
                rec.submitted[body["id"]] = labels
            if rng.random() < RETRY:
                replay = _call(rec, client, "submit_retry", "POST", url, json={"labels": labels},
                               headers={"Idempotency-Key": key})
                if replay is not None and (replay.status_code, replay.json()) != (answer.status_code, answer.json()):
                    with rec.lock:
                        rec.replay_mismatch += 1


def build(questions: int, experts: int) -> tuple[int, list[str], int]:
    """The scratch database: a project with `questions` × 2 tasks and `experts` members."""
    shared.DB_NAME = DB_NAME
    shared.recreate_database()
    shared.setup_django()
    from django.core.management import call_command
    from django.utils import timezone

    call_command("migrate", verbosity=0)
    from annotation.exchange.questions import questions_import
    from annotation.exchange.responses import responses_import
    from annotation.models import Task
    from annotation.services import project_add_member, project_create
    from experts.services import user_create

    project = project_create(name="load", created_by=None)
    questions_import(project=project, data=shared.heartbench_shaped(questions), now=timezone.now())
    for model in ("m0", "m1"):
        responses = "\n".join(json.dumps({"question_id": f"bq{i:06d}", "model": model, "response": "我在这里陪着你。"},
                                         ensure_ascii=False) for i in range(questions)).encode()
        responses_import(project=project, data=responses, model=None, now=timezone.now())
    tokens = []
    for i in range(experts):
        user, token = user_create(username=f"load{i}", role="expert")
        project_add_member(project=project, user=user)
        tokens.append(token)
    return project.pk, tokens, Task.objects.filter(project=project).count()


def invariants(rec: Recorder, project_id: int) -> dict:
    """Count every broken rule; all zero is a pass."""
    from django.db.models import Count, F, Q
    from django.utils import timezone

    from annotation.models import Assignment, Label, Task
    from annotation.selectors import rubric_items_for_task
    from experts.models import ExpertProfile
    from payments.reconciliation import ledger_reconcile
    from tests.support.faults import expected_consensus, stored_consensus

    live = Q(assignments__status__in=[Assignment.Status.LEASED, Assignment.Status.SUBMITTED])
    over = Task.objects.filter(project_id=project_id).annotate(live=Count("assignments", filter=live)).filter(
        live__gt=F("overlap")).count()
    duplicates = (Assignment.objects.filter(task__project_id=project_id, status=Assignment.Status.SUBMITTED)
                  .values("task_id", "expert_id").annotate(n=Count("pk")).filter(n__gt=1).count())
    stored: dict[int, dict[str, int]] = defaultdict(dict)
    # The API names rubric items by their key.
    for assignment_id, item_key, value in Label.objects.filter(task__project_id=project_id).values_list(
            "assignment_id", "rubric_item__item_key", "value"):
        stored[assignment_id][item_key] = value
    submitted = set(Assignment.objects.filter(task__project_id=project_id, status=Assignment.Status.SUBMITTED)
                    .values_list("pk", flat=True))
    lost = sum(1 for a, labels in rec.submitted.items() if a not in submitted or stored.get(a) != labels)
    # Partial submissions: a submitted assignment whose labels are not all of its task's items.
    partial = 0
    for assignment in Assignment.objects.filter(pk__in=submitted).select_related("task"):
        if len(stored.get(assignment.pk, {})) != len(rubric_items_for_task(assignment.task)):
            partial += 1
    # Lease limit: at no instant did an expert hold more leases than their limit.
    limits = dict(ExpertProfile.objects.values_list("user_id", "max_concurrent_leases"))
    now = timezone.now()
    breaches = 0
    spans: dict[int, list[tuple]] = defaultdict(list)
    for expert_id, leased_at, submitted_at, status in Assignment.objects.filter(
            task__project_id=project_id).values_list("expert_id", "leased_at", "submitted_at", "status"):
        end = submitted_at if status == Assignment.Status.SUBMITTED else now
        spans[expert_id].append((leased_at, end))
    for expert_id, intervals in spans.items():
        events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
        held = 0
        for _, step in events:
            held += step
            if held > limits.get(expert_id, 1):
                breaches += 1
                break
    expected, actual = expected_consensus(), stored_consensus()
    return {
        "over_assignment": over, "duplicate_submissions": duplicates, "lost_labels": lost,
        "partial_submissions": partial, "lease_limit_breaches": breaches,
        "two_leases_seen_by_clients": rec.two_leases_seen, "retry_answer_mismatch": rec.replay_mismatch,
        "consensus_mismatch": sum(1 for k in expected.keys() | actual.keys() if expected.get(k) != actual.get(k)),
        "ledger_problems": len(ledger_reconcile()),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=180)
    parser.add_argument("--experts", type=int, default=50)
    parser.add_argument("--questions", type=int, default=1500)
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--drain-seconds", type=int, default=300)
    args = parser.parse_args()
    args.seconds = max(5, min(args.seconds, 1800))  # bounded: at most half an hour

    setup_started = time.perf_counter()
    project_id, tokens, tasks = build(args.questions, args.experts)
    setup_s = time.perf_counter() - setup_started
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    env = {**os.environ, "DATABASE_URL": f"{shared.PG}/{DB_NAME}", "DB_CONN_MAX_AGE": "600", "AXES_ENABLED": "0",
           "CELERY_TASK_ALWAYS_EAGER": "0", "REDIS_URL": REDIS_URL, "GUNICORN_BIND": f"127.0.0.1:{PORT}",
           "GUNICORN_WORKERS": str(args.web_workers), "GUNICORN_THREADS": "8"}
    server = subprocess.Popen([str(shared.ROOT / ".venv" / "bin" / "gunicorn"), "-c", "platform/gunicorn.conf.py",
                               "config.wsgi:application"], cwd=shared.ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency", "2",
                               "--loglevel", "WARNING", "-n", f"load{os.getpid()}@%h"], cwd=shared.ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    rec = Recorder()
    try:
        for _ in range(300):
            try:
                httpx.get(f"http://127.0.0.1:{PORT}/healthz", timeout=5)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        # Warm every web worker (URL configuration, first connections) before the clock starts.
        warm = [threading.Thread(target=lambda: httpx.get(f"http://127.0.0.1:{PORT}/healthz", timeout=60))
                for _ in range(8 * args.web_workers)]
        for t in warm:
            t.start()
        for t in warm:
            t.join()
        started = time.monotonic()
        deadline = started + args.seconds
        threads = [threading.Thread(target=expert_loop, args=(rec, t, project_id, deadline, i))
                   for i, t in enumerate(tokens)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started

        from core.models import OutboxTask

        drain_started = time.monotonic()
        while (OutboxTask.objects.filter(done_at__isnull=True).exists()
               and time.monotonic() - drain_started < args.drain_seconds):
            time.sleep(1)
        drain_s = time.monotonic() - drain_started
        outbox_pending = OutboxTask.objects.filter(done_at__isnull=True).count()
    finally:
        for process in (server, worker):
            if process.poll() is None:
                os.killpg(process.pid, 15)
        for process in (server, worker):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait(timeout=30)
        redis.Redis.from_url(REDIS_URL).flushdb()

    checks = invariants(rec, project_id)
    checks["outbox_pending_after_drain"] = outbox_pending
    submissions = len(rec.submitted)
    requests = sum(len(v) for v in rec.latency.values())
    print(json.dumps({
        "bench": "load",
        "experts": args.experts, "seconds": round(elapsed, 1), "tasks": tasks, "setup_s": round(setup_s, 1),
        "throughput": {"submissions": submissions, "submissions_per_s": round(submissions / elapsed, 1),
                       "requests_per_s": round(requests / elapsed, 1), "no_task_answers": rec.empty},
        "latency": {endpoint: shared.percentiles(samples) for endpoint, samples in sorted(rec.latency.items())},
        "errors": {"total": sum(rec.errors.values()), **rec.errors, "samples": rec.error_samples},
        "follow_up_drain_s": round(drain_s, 1),
        "invariants": checks,
        "all_zero": not any(checks.values()) and not rec.errors,
        "server": f"gunicorn gthread {args.web_workers}x8 (platform/gunicorn.conf.py), PostgreSQL, Redis, "
                  "Celery worker prefork x2",
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
