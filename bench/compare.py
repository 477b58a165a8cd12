"""Benchmark: two checkouts side by side, their phases interleaved, so that the machine's drift falls on both.

This machine's speed drifts by a third within minutes (bench/assignment.py's `machine_speed_ms`), so
two runs of bench/assignment.py, one after the other, cannot tell a change of 5% from the drift. Here
both stacks run at once, each a copy of the same world in its own database (gunicorn with
`platform/gunicorn.conf.py` and a Celery worker consuming the follow-up work, as deployed), and the
clients alternate between them: a phase of --submissions on A, then one on B, --rounds times. Each
phase's CPU is read per stack (its gunicorn tree, its worker tree, the PostgreSQL sessions of its
database), so the figures per submission compare the code, with the drift spread evenly over both.

--base is the other checkout (a `git worktree` or clone with its own .venv); this checkout is B.
Prints one JSON line: per side, the medians over rounds of CPU ms per submission (web, worker,
database), submissions per second and next-task / submit p95, and B's medians relative to A's.
Usage: .venv/bin/python bench/compare.py --base ../rubrica-base [--tasks 10000] [--clients 4]
"""
import argparse
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import assignment as bench  # noqa: E402

PG = bench.PG
DB_A, DB_B = "rubrica_compare_a", "rubrica_compare_b"
PORTS = {"a": 8771, "b": 8772}
BROKERS = {"a": "redis://127.0.0.1:6379/13", "b": "redis://127.0.0.1:6379/14"}


def loop(port: int, tokens: list[str], project_id: int, submissions: int) -> dict:
    """`len(tokens)` experts loop next-task -> submit on the server at `port` until `submissions` are in.

    Each expert opens one kept-alive connection for the phase: one kept across phases would outlive
    gunicorn's keep-alive while the other side runs (the balanced workers spread the new ones evenly)."""
    from tests.support.scale import agreeing_label

    next_lat: list[float] = []
    submit_lat: list[float] = []
    left, lock, errors = [submissions], threading.Lock(), []

    def worker(token: str) -> None:
        try:
            work(token)
        except (OSError, http.client.HTTPException) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    def work(token: str) -> None:
        rng = random.Random(token)
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            started = time.perf_counter()
            client.request("POST", f"/api/v1/projects/{project_id}/next-task/", body=b"", headers=headers)
            answer = client.getresponse()
            body = answer.read()
            claimed = time.perf_counter()
            if answer.status != 200:
                errors.append(f"next-task {answer.status} {body[:200]!r}")
                return
            lease = json.loads(body)
            labels = {item["id"]: agreeing_label(item["id"], rng) for item in lease["rubric_items"]}
            sent = time.perf_counter()
            client.request("POST", f"/api/v1/assignments/{lease['id']}/submit/", body=json.dumps({"labels": labels}),
                           headers={**headers, "Idempotency-Key": uuid.uuid4().hex})
            answer = client.getresponse()
            body = answer.read()
            done = time.perf_counter()
            if answer.status not in (200, 201):
                errors.append(f"submit {answer.status} {body[:200]!r}")
                return
            with lock:
                next_lat.append(claimed - started)
                submit_lat.append(done - sent)
        client.close()

    elapsed = bench.run_threads(worker, tokens)
    return {"next_p95_ms": bench.percentiles(next_lat).get("p95_ms"),
            "submit_p95_ms": bench.percentiles(submit_lat).get("p95_ms"),
            "submissions_per_s": round(len(submit_lat) / elapsed, 1), "n": len(submit_lat), "errors": errors[:3]}


def backends_of(database: str) -> list[int]:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        return [row[0] for row in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [database])]


def cpu(side: dict) -> dict[str, float]:
    hz = os.sysconf("SC_CLK_TCK")
    return {"web": sum(map(bench._cpu_ticks, bench._tree(side["server"].pid))) / hz,
            "worker": sum(map(bench._cpu_ticks, bench._tree(side["worker"].pid))) / hz,
            "database": sum(map(bench._cpu_ticks, backends_of(side["database"]))) / hz}


def start(side: str, root: Path, database: str) -> dict:
    server, worker = bench.stack_start(root, database, BROKERS[side], PORTS[side])
    return {"server": server, "worker": worker, "database": database, "root": str(root)}


def stop(side: dict) -> None:
    side["server"].terminate()
    side["worker"].terminate()
    side["server"].wait(timeout=30)
    try:
        side["worker"].wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(side["worker"].pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the other checkout (A), with its own .venv")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--submissions", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=150)
    args = parser.parse_args()

    import psycopg
    import redis

    bench.DB_NAME = DB_A
    bench.recreate_database()
    bench.setup_django()
    from django.db import connections
    from rest_framework.authtoken.models import Token

    project_id, expert_ids = bench.build_world(args.tasks, 8, 4000)
    tokens = [Token.objects.get_or_create(user_id=e)[0].key for e in expert_ids][:args.clients]
    connections.close_all()
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_B} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_B} TEMPLATE {DB_A}")
    for broker in BROKERS.values():
        redis.Redis.from_url(broker).flushdb()
    sides = {"a": start("a", Path(args.base).resolve(), DB_A), "b": start("b", bench.ROOT, DB_B)}
    rounds: dict[str, list[dict]] = {"a": [], "b": []}
    try:
        for name in sides:
            bench.server_wait(f"http://127.0.0.1:{PORTS[name]}")
            loop(PORTS[name], tokens, project_id, args.warmup)
            bench.queue_drained(BROKERS[name])
        for n in range(args.rounds):
            # A then B, then B then A: neither side always runs first after the other's follow-ups.
            for name in ("a", "b") if n % 2 == 0 else ("b", "a"):
                side = sides[name]
                before = cpu(side)
                figures = loop(PORTS[name], tokens, project_id, args.submissions)
                bench.queue_drained(BROKERS[name])  # the worker's share of this phase, drained
                after = cpu(side)
                figures["cpu_ms_per_submission"] = {k: round(1000 * (after[k] - before[k]) / max(1, figures["n"]), 2)
                                                    for k in before}
                rounds[name].append(figures)
                if figures["errors"]:
                    print(f"{name}: {figures['errors']}", file=sys.stderr)
    finally:
        for side in sides.values():
            stop(side)
        for broker in BROKERS.values():
            redis.Redis.from_url(broker).flushdb()

    def medians(rows: list[dict]) -> dict:
        rows = [r for r in rows if r["n"]] or [{**rows[0], "next_p95_ms": 0, "submit_p95_ms": 0}]
        return {"cpu_ms_per_submission": {k: round(statistics.median(r["cpu_ms_per_submission"][k] for r in rows), 2)
                                          for k in ("web", "worker", "database")},
                **{k: round(statistics.median(r[k] for r in rows), 1)
                   for k in ("submissions_per_s", "next_p95_ms", "submit_p95_ms")},
                "errors": [e for r in rows for e in r["errors"]][:3]}

    a, b = medians(rounds["a"]), medians(rounds["b"])
    total = {side: sum(m["cpu_ms_per_submission"].values()) for side, m in (("a", a), ("b", b))}
    print(json.dumps({
        "bench": "compare", "tasks": args.tasks, "clients": args.clients, "rounds": args.rounds,
        "submissions_per_phase": args.submissions, "a": {"root": sides["a"]["root"], **a},
        "b": {"root": sides["b"]["root"], **b},
        "b_vs_a": {"cpu_ms_per_submission": round(total["b"] / total["a"], 3),
                   **{k: round(b[k] / a[k], 3) for k in ("submissions_per_s", "next_p95_ms", "submit_p95_ms")}},
        "stack": "both stacks at once (gunicorn + Celery worker each, PostgreSQL shared), phases alternated",
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
