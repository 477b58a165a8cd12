"""Benchmark: next-task and submit latency through the real HTTP stack, and import speed.

Creates a scratch PostgreSQL database, imports 10,000 HeartBench-shaped questions
(~100,000 rubric items) with the real importer, gives them responses so there are
10,000 tasks, serves the platform with gunicorn on loopback and drives it with 1 and 8
concurrent experts; then grows the pool to 100,000 tasks and measures next-task again.
Prints one JSON line. Usage: .venv/bin/python bench/assignment.py [--questions N]
"""
import argparse
import json
import os
import random
import secrets
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


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    if not ordered:
        return {"n": 0}

    def pick(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000, 2)

    return {"p50_ms": pick(0.50), "p95_ms": pick(0.95), "p99_ms": pick(0.99), "n": len(ordered)}


def drive(tokens: list[str], project_id: int, rounds: int) -> dict:
    """Each expert thread loops next-task → submit `rounds` times."""
    next_lat: list[float] = []
    submit_lat: list[float] = []
    lock = threading.Lock()
    errors: list[str] = []

    def worker(token: str) -> None:
        headers = {"Authorization": f"Token {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{PORT}", headers=headers, timeout=30) as client:
            for _ in range(rounds):
                t0 = time.perf_counter()
                resp = client.post(f"/api/v1/projects/{project_id}/next-task/")
                t1 = time.perf_counter()
                if resp.status_code != 200:
                    errors.append(f"next-task {resp.status_code}")
                    return
                lease = resp.json()
                labels = {item["id"]: random.randint(0, 1) for item in lease["rubric_items"]}
                t2 = time.perf_counter()
                sub = client.post(f"/api/v1/assignments/{lease['id']}/submit/", json={"labels": labels},
                                  headers={"Idempotency-Key": uuid.uuid4().hex})
                t3 = time.perf_counter()
                if sub.status_code not in (200, 201):
                    errors.append(f"submit {sub.status_code} {sub.text[:200]}")
                    return
                with lock:
                    next_lat.append(t1 - t0)
                    submit_lat.append(t3 - t2)

    threads = [threading.Thread(target=worker, args=(t,)) for t in tokens]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    return {"next_task": percentiles(next_lat), "submit": percentiles(submit_lat),
            "throughput_loops_per_s": round(len(submit_lat) / elapsed, 1), "errors": errors[:3]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()

    recreate_database()
    setup_django()
    from django.core.management import call_command
    from django.utils import timezone

    call_command("migrate", verbosity=0)
    from annotation.exchange.questions import questions_import
    from annotation.exchange.responses import responses_import
    from annotation.models import Question, Response, Task
    from annotation.rubric_editing.publishing import tasks_ensure_for_version
    from annotation.selectors import rubric_version_current
    from annotation.services import project_add_member, project_create
    from experts.services import user_create
    from rubrics.models import RubricItem

    project = project_create(name="bench", created_by=None)
    data = heartbench_shaped(args.questions)
    t0 = time.perf_counter()
    questions_import(project=project, data=data, now=timezone.now())
    import_s = time.perf_counter() - t0
    items = RubricItem.objects.filter(version__rubric=project.rubric).count()

    responses = "\n".join(json.dumps({"question_id": f"bq{i:06d}", "model": "m0", "response": "我在这里陪着你。"},
                                     ensure_ascii=False) for i in range(args.questions)).encode()
    t0 = time.perf_counter()
    responses_import(project=project, data=responses, model=None, now=timezone.now())
    responses_s = time.perf_counter() - t0

    tokens = []
    for i in range(8):
        user, token = user_create(username=f"bench{i}", role="expert", password="bench-pass-123")
        project_add_member(project=project, user=user)
        tokens.append(token)

    # The server queues follow-up work (earnings, tier evaluation, agreement) on Redis as in
    # production, where a Celery worker runs it; the bench measures the request path only.
    env = {**os.environ, "DATABASE_URL": f"{PG}/{DB_NAME}", "DB_CONN_MAX_AGE": "600", "AXES_ENABLED": "0",
           "CELERY_TASK_ALWAYS_EAGER": "0", "REDIS_URL": "redis://127.0.0.1:6379/12"}
    server = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "gunicorn"), "config.wsgi:application", "-b", f"127.0.0.1:{PORT}",
         "-w", str(args.workers), "-k", "gthread", "--threads", "4", "--log-level", "warning"],
        cwd=ROOT, env=env)
    try:
        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{PORT}/accounts/login/", timeout=5)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        tasks_10k = Task.objects.filter(project=project).count()
        one = drive(tokens[:1], project.pk, args.rounds)
        eight = drive(tokens, project.pk, args.rounds)

        # Grow to ~100,000 tasks: nine more anonymous models answer every question.
        question_ids = list(Question.objects.filter(project=project).values_list("pk", flat=True))
        for m in range(1, 10):
            Response.objects.bulk_create(
                [Response(project=project, question_id=q, model_name=f"m{m}", text="嗯，我听到了。")
                 for q in question_ids], batch_size=5000)
        tasks_ensure_for_version(project=project, version=rubric_version_current(project))
        tasks_100k = Task.objects.filter(project=project).count()
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        eight_100k = drive(tokens, project.pk, args.rounds)
    finally:
        server.terminate()
        server.wait(timeout=20)
        import redis

        redis.Redis.from_url("redis://127.0.0.1:6379/12").flushdb()

    print(json.dumps({
        "bench": "assignment",
        "import_questions": {"questions": args.questions, "rubric_items": items, "seconds": round(import_s, 2)},
        "import_responses": {"responses": args.questions, "seconds": round(responses_s, 2)},
        "tasks": tasks_10k,
        "one_expert": one,
        "eight_experts": eight,
        "tasks_grown": tasks_100k,
        "eight_experts_grown": eight_100k,
        "server": f"gunicorn gthread {args.workers}x4, PostgreSQL",
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
