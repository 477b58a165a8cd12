"""Benchmark: importing HeartBench-shaped questions and their responses through the API, as a PM would.

Builds the files in a temporary directory (the real HeartBench rows cloned under new ids, each
copy's final user turn and response varied so no two rows are the same), creates a scratch
PostgreSQL database, and serves the platform with gunicorn and `platform/gunicorn.conf.py`
(default settings: the 500 MB cap, Django's 2 MB in-memory upload limit; one gthread worker,
so its peak RSS is the import's). For each size a fresh server and project take
`POST /api/v1/projects/{id}/questions/import/` then `.../responses/import/` with the PM's token,
the file streamed from disk. Follow-up work (writing the board's search rows) is queued on Redis db 5
as in production, where a Celery worker runs it; the bench measures the request path.
Prints one JSON line: per size the best of `--repeat` runs (seconds per request and together,
rows per second, file sizes, the worker's peak RSS (VmHWM), the worker-side search indexing) and
every run's total. After each run the bench writes the search rows as the worker would.
Usage: .venv/bin/python bench/imports.py [--sizes 10000,100000] [--repeat 3,2] [--port 8702]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import assignment as shared  # noqa: E402  (the path above makes the project importable)

shared.DB_NAME = "rubrica_imports_bench"
PORT = 8702
REDIS = "redis://127.0.0.1:6379/5"
REPLIES = ["我听到了你的疲惫，这段时间你一个人扛了很多。", "能和我说说，最让你难受的是哪一刻吗？",
           "你愿意把这些说出来，本身就很不容易。", "我们可以先一起看看，今晚你能为自己做点什么。"]


def build_files(directory: Path, n: int) -> tuple[Path, Path]:
    """n questions and one response per question, written row by row (never held whole)."""
    rows = [json.loads(line) for line in shared.HEARTBENCH.read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(n)
    questions, responses = directory / f"questions-{n}.jsonl", directory / f"responses-{n}.jsonl"
    with questions.open("w", encoding="utf-8") as q_out, responses.open("w", encoding="utf-8") as r_out:
        for i in range(n):
            row = rows[i % len(rows)]
            qid = f"bi{i:07d}"
            dialogue = [dict(turn) for turn in row["dialogue"]]
            dialogue[-1]["content"] += f"（第{i // len(rows) + 1}次）"
            q_out.write(json.dumps({**row, "question_id": qid, "dialogue": dialogue}, ensure_ascii=False) + "\n")
            reply = "".join(rng.choice(REPLIES) for _ in range(rng.randint(6, 14)))
            r_out.write(json.dumps({"question_id": qid, "model": "model-a", "response": reply},
                                   ensure_ascii=False) + "\n")
    return questions, responses


def worker_pid(master: int) -> int:
    for _ in range(100):
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.1)
    raise RuntimeError("gunicorn started no worker")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmHWM")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS")


def upload(client: httpx.Client, url: str, path: Path, data: dict | None = None) -> tuple[float, dict]:
    with path.open("rb") as file:
        started = time.perf_counter()
        response = client.post(url, files={"file": (path.name, file, "application/jsonl")}, data=data or {})
        seconds = time.perf_counter() - started
    assert response.status_code == 201, (response.status_code, response.text[:500])
    return seconds, response.json()


def measure(*, n: int, directory: Path, port: int, token: str, pm_id: int) -> dict:
    from annotation import permissions
    from annotation.services import project_create
    from experts.models import User

    questions, responses = build_files(directory, n)
    project = project_create(name=f"bench imports {n}", created_by=None)
    permissions.grant_manage(User.objects.get(pk=pm_id), project)
    env = {**os.environ, "DATABASE_URL": f"{shared.PG}/{shared.DB_NAME}", "DB_CONN_MAX_AGE": "600",
           "AXES_ENABLED": "0", "CELERY_TASK_ALWAYS_EAGER": "0", "REDIS_URL": REDIS,
           "GUNICORN_BIND": f"127.0.0.1:{port}", "GUNICORN_WORKERS": "1", "GUNICORN_THREADS": "2"}
    env.pop("RUBRICA_MAX_IMPORT_BYTES", None)  # the default cap
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # set even empty, the metrics would write files into the checkout
    server = subprocess.Popen([str(shared.ROOT / ".venv" / "bin" / "gunicorn"), "config.wsgi:application",
                               "-c", "platform/gunicorn.conf.py", "--access-logfile", "/dev/null",
                               "--log-level", "warning"], cwd=shared.ROOT, env=env)
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300,
                              headers={"Authorization": f"Token {token}"})
        shared.server_wait(f"http://127.0.0.1:{port}")
        worker = worker_pid(server.pid)
        client.get(f"/api/v1/projects/{project.pk}/")  # warm: imports, the connection, the token
        idle = rss_mb(worker)
        q_s, q_body = upload(client, f"/api/v1/projects/{project.pk}/questions/import/", questions)
        after_questions = peak_rss_mb(worker)
        r_s, r_body = upload(client, f"/api/v1/projects/{project.pk}/responses/import/", responses)
        peak = peak_rss_mb(worker)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert q_body["questions_created"] == n and r_body["responses_created"] == n, (q_body, r_body)
    # What the Celery worker does after the import commits: write the board's search rows.
    from annotation.exchange.tasks import question_search_index_task

    started = time.perf_counter()
    indexed = question_search_index_task()
    merge_s = time.perf_counter() - started
    return {
        "questions": n, "rubric_items": q_body["items_created"], "tasks": r_body["tasks_created"],
        "questions_mb": round(questions.stat().st_size / 2**20, 1),
        "responses_mb": round(responses.stat().st_size / 2**20, 1),
        "questions_s": round(q_s, 2), "responses_s": round(r_s, 2), "total_s": round(q_s + r_s, 2),
        "questions_per_s": round(n / q_s), "rows_per_s": round(2 * n / (q_s + r_s)),
        "worker_rss_idle_mb": idle, "worker_peak_rss_after_questions_mb": after_questions,
        "worker_peak_rss_mb": peak, "search_index_in_worker_s": round(merge_s, 2),
        "search_rows_written_by_worker": indexed,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated numbers of questions")
    parser.add_argument("--port", type=int, default=PORT, help="where gunicorn listens (8700-8710)")
    parser.add_argument("--repeat", default="3,2", help="runs per size (comma-separated, one per size): "
                                                        "this machine is shared, the best run is the figure")
    args = parser.parse_args()
    shared.recreate_database()
    os.environ["REDIS_URL"] = REDIS
    shared.setup_django()
    os.environ.pop("RUBRICA_MAX_IMPORT_BYTES", None)  # set by shared.setup_django for its own bench
    from django.core.management import call_command

    from experts.services import user_create

    call_command("migrate", verbosity=0)
    pm, token = user_create(username="bench-imports-pm", role="pm", password="bench-pass-123")
    result: dict = {"bench": "imports", "stack": "gunicorn (platform/gunicorn.conf.py, 1 gthread worker x2), "
                                                 "PostgreSQL, default settings, API with a PM token"}
    with tempfile.TemporaryDirectory(prefix="rubrica-bench-imports-") as tmp:
        sizes = [int(s) for s in args.sizes.split(",")]
        repeats = [int(r) for r in args.repeat.split(",")]
        for i, n in enumerate(sizes):
            runs = [measure(n=n, directory=Path(tmp), port=args.port, token=token, pm_id=pm.pk)
                    for _ in range(repeats[min(i, len(repeats) - 1)])]
            best = min(runs, key=lambda run: run["total_s"])
            result[str(n)] = {**best, "total_s_all_runs": [run["total_s"] for run in runs],
                              "worker_peak_rss_mb_all_runs": [run["worker_peak_rss_mb"] for run in runs]}
            for leftover in Path(tmp).iterdir():
                leftover.unlink()
    import redis

    # The queued follow-ups (no worker consumes them here) are this bench's only rows in its Redis db.
    redis.Redis.from_url(REDIS).delete("celery")
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
