"""Benchmark: the consensus export in every format at 20,000 and 100,000 task items.

Builds two projects in a scratch PostgreSQL database with bulk_create (HeartBench
dialogues and rubrics, one reply per question, three experts' labels with notes,
consensus, one judge run with reasons), then encodes each export to /dev/null: once
timed, once under tracemalloc for the peak of Python allocations (tables ANALYZEd first). Memory is flat in
rows when the 100k peak is close to the 20k peak. Prints one JSON line.
With --stack it also goes through the real stack on the large project: gunicorn
(2 gthread workers) streams the JSONL download of `GET /api/v1/projects/{id}/export/`,
and a Celery worker (concurrency 1, Redis broker) builds the same export as a job
queued by `POST …/export-jobs/`, timed from the request to the file being ready.
Usage: .venv/bin/python bench/exports.py [--small 20000] [--large 100000] [--formats jsonl] [--reuse] [--stack]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import assignment as shared  # noqa: E402  (the path above makes the project importable)

shared.DB_NAME = "rubrica_bench_exports"
FORMATS = ("jsonl", "csv", "parquet", "heartbench", "hf")
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def build(*, items_wanted: int, tag: str, experts: list) -> int:
    """A project with about `items_wanted` complete task items; returns its id."""
    from annotation.models import (
        Assignment,
        ItemConsensus,
        JudgeLabel,
        JudgeRun,
        JudgeTaskResult,
        Label,
        Question,
        Response,
        Task,
    )
    from annotation.services import project_create
    from rubrics.models import Dimension, RubricItem, RubricVersion

    rows = [json.loads(line) for line in shared.HEARTBENCH.read_text(encoding="utf-8").splitlines() if line.strip()]
    dims = {d.name_zh: d for d in Dimension.objects.all()}
    project = project_create(name=f"bench {tag}", created_by=None, overlap=3)
    version = RubricVersion.objects.create(rubric=project.rubric, number=1)
    questions, items, count, i = [], [], 0, 0
    while count < items_wanted:
        row = rows[i % len(rows)]
        qid = f"{tag}{i:06d}"
        questions.append(Question(project=project, external_id=qid, dialogue=row["dialogue"][:-1],
                                  final_user_turn=row["dialogue"][-1]["content"]))
        for pos, item in enumerate(row["rubric"][:items_wanted - count], start=1):
            items.append(RubricItem(version=version, question_ref=qid, position=pos, item_key=f"{qid}:{pos}",
                                    dimension=dims[item["dimension"]], score=item["score"], content=item["content"]))
        count = len(items)
        i += 1
    Question.objects.bulk_create(questions, batch_size=2000)
    RubricItem.objects.bulk_create(items, batch_size=5000)
    RubricVersion.objects.filter(pk=version.pk).update(status="published", published_at=NOW)
    saved = {q.external_id: q for q in Question.objects.filter(project=project)}
    Response.objects.bulk_create([Response(project=project, question=q, model_name="model-a",
                                           text="听起来你最近很累。愿意多说说是什么让你睡不着吗？")
                                  for q in saved.values()], batch_size=2000)
    responses = list(Response.objects.filter(project=project).select_related("question"))
    Task.objects.bulk_create([Task(project=project, response=r, rubric_version=version, overlap=3, live_count=3,
                                   submitted_count=3, status="complete", shuffle_key=random.getrandbits(62),
                                   completed_at=NOW) for r in responses], batch_size=2000)
    tasks = {t.response.question.external_id: t for t in
             Task.objects.filter(project=project).select_related("response__question")}
    assignments = Assignment.objects.bulk_create(
        [Assignment(task=t, expert=e, slot=s, status="submitted", leased_at=NOW, expires_at=NOW + timedelta(hours=1),
                    submitted_at=NOW + timedelta(minutes=s)) for t in tasks.values()
         for s, e in enumerate(experts, start=1)], batch_size=5000)
    panel = {}
    for a in assignments:
        panel.setdefault(a.task_id, []).append(a)
    run = JudgeRun.objects.create(project=project, rubric_version=version, name="judge", source="imported",
                                  status="done")
    JudgeTaskResult.objects.bulk_create([JudgeTaskResult(run=run, task=t, status="done", reason="覆盖了情绪感知。")
                                         for t in tasks.values()], batch_size=5000)
    labels, consensus, judge = [], [], []
    for item in RubricItem.objects.filter(version=version).only("pk", "question_ref", "position"):
        task = tasks[item.question_ref]
        votes = [(item.pk + s) % 2 for s in range(3)]
        labels += [Label(assignment=a, task=task, rubric_item=item, value=v, note="" if v else "没有追问")
                   for a, v in zip(panel[task.pk], votes)]
        hits = sum(votes)
        consensus.append(ItemConsensus(task=task, rubric_item=item, hit_votes=hits, total_votes=3,
                                       majority=int(hits >= 2), zone="unanimous" if hits in (0, 3) else "split",
                                       computed_at=NOW))
        judge.append(JudgeLabel(run=run, task=task, rubric_item=item, value=item.pk % 2))
        if len(labels) >= 30000:
            Label.objects.bulk_create(labels, batch_size=10000)
            ItemConsensus.objects.bulk_create(consensus, batch_size=10000)
            JudgeLabel.objects.bulk_create(judge, batch_size=10000)
            labels, consensus, judge = [], [], []
    Label.objects.bulk_create(labels, batch_size=10000)
    ItemConsensus.objects.bulk_create(consensus, batch_size=10000)
    JudgeLabel.objects.bulk_create(judge, batch_size=10000)
    return project.pk


def measure(project_id: int, fmt: str) -> dict:
    from annotation.exchange.export import ExportFilters
    from annotation.exchange.export_formats import dataset_export
    from annotation.models import Project

    project = Project.objects.get(pk=project_id)
    counted: list[int] = []
    start = time.perf_counter()
    size = 0
    for chunk in dataset_export(project=project, filters=ExportFilters(), fmt=fmt, snapshot_id="bench",
                                counter=counted.append):
        size += len(chunk)
    seconds = time.perf_counter() - start
    tracemalloc.start()
    for _chunk in dataset_export(project=project, filters=ExportFilters(), fmt=fmt, snapshot_id="bench"):
        pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"rows": counted[0], "s": round(seconds, 2), "mb": round(size / 2**20, 1),
            "peak_py_mb": round(peak / 2**20, 1)}


STACK_PORT = 8766
STACK_REDIS = "redis://127.0.0.1:6379/13"


def through_stack(project_id: int) -> dict:
    """The large project's JSONL through gunicorn (streamed download) and through a Celery worker (job)."""
    import httpx
    import redis

    from annotation import permissions
    from annotation.models import Project
    from experts.models import User
    from experts.services import user_create

    project = Project.objects.get(pk=project_id)
    pm = User.objects.filter(username="bench-export-pm").first()
    if pm is None:
        pm, _ = user_create(username="bench-export-pm", role="pm", password="bench-pass-123")
    permissions.grant_manage(pm, project)
    from rest_framework.authtoken.models import Token

    token, _ = Token.objects.get_or_create(user=pm)
    export_dir = tempfile.mkdtemp(prefix="rubrica-bench-exports-")
    env = {**os.environ, "DATABASE_URL": f"{shared.PG}/{shared.DB_NAME}", "DB_CONN_MAX_AGE": "600",
           "AXES_ENABLED": "0", "CELERY_TASK_ALWAYS_EAGER": "0", "REDIS_URL": STACK_REDIS,
           "RUBRICA_EXPORT_DIR": export_dir}
    server = subprocess.Popen(
        [str(shared.ROOT / ".venv" / "bin" / "gunicorn"), "config.wsgi:application", "-b", f"127.0.0.1:{STACK_PORT}",
         "-w", "2", "-k", "gthread", "--threads", "4", "--timeout", "300", "--log-level", "warning"],
        cwd=shared.ROOT, env=env)
    worker = subprocess.Popen(
        [str(shared.ROOT / ".venv" / "bin" / "celery"), "-A", "config", "worker", "-l", "warning",
         "--concurrency", "1"], cwd=shared.ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{STACK_PORT}", timeout=300,
                              headers={"Authorization": f"Token {token.key}"})
        shared.server_wait(f"http://127.0.0.1:{STACK_PORT}")
        start = time.perf_counter()
        size = lines = 0
        with client.stream("GET", f"/api/v1/projects/{project_id}/export/", params={"format": "jsonl"}) as resp:
            assert resp.status_code == 200, resp.status_code
            first_byte = None
            for chunk in resp.iter_bytes():
                if first_byte is None:
                    first_byte = time.perf_counter() - start
                size += len(chunk)
                lines += chunk.count(b"\n")
        download_s = time.perf_counter() - start
        time.sleep(1.0)  # let the worker come up before the job is timed
        start = time.perf_counter()
        queued = client.post(f"/api/v1/projects/{project_id}/export-jobs/", json={"format": "jsonl"})
        assert queued.status_code == 202, queued.text[:300]
        job_id = queued.json()["id"]
        status = ""
        for _ in range(1200):
            status = client.get(f"/api/v1/export-jobs/{job_id}/").json()["status"]
            if status in ("done", "failed"):
                break
            time.sleep(0.1)
        job_s = time.perf_counter() - start
        job = client.get(f"/api/v1/export-jobs/{job_id}/").json()
    finally:
        server.terminate()
        worker.terminate()
        server.wait(timeout=30)
        worker.wait(timeout=30)
        redis.Redis.from_url(STACK_REDIS).flushdb()
    return {"download": {"rows": lines, "mb": round(size / 2**20, 1), "s": round(download_s, 2),
                         "first_byte_s": round(first_byte or 0.0, 3)},
            "job": {"status": status, "rows": job.get("row_count"), "s_until_ready": round(job_s, 2)},
            "stack": "gunicorn gthread 2x4 + celery worker x1, PostgreSQL, Redis"}


def _built_projects(small: int, large: int) -> tuple[int, int] | None:
    """The ids of the two projects an earlier run built for these sizes, or None."""
    import psycopg

    try:
        with psycopg.connect(f"{shared.PG}/{shared.DB_NAME}") as conn:
            rows = dict(conn.execute("SELECT name, id FROM annotation_project WHERE name IN (%s, %s)",
                                     (f"bench s{small}", f"bench l{large}")).fetchall())
    except psycopg.Error:
        return None
    if len(rows) != 2:
        return None
    return rows[f"bench s{small}"], rows[f"bench l{large}"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=20_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated subset of " + ",".join(FORMATS))
    parser.add_argument("--stack", action="store_true",
                        help="also time the large JSONL through gunicorn (download) and a Celery worker (job)")
    parser.add_argument("--reuse", action="store_true",
                        help="measure the projects an earlier run built (same sizes) instead of rebuilding")
    args = parser.parse_args()
    formats = [f for f in args.formats.split(",") if f]
    if not set(formats) <= set(FORMATS):
        parser.error(f"--formats: expected names from {','.join(FORMATS)}")
    built = None
    if args.reuse:
        built = _built_projects(args.small, args.large)
    if built is None:
        shared.recreate_database()
    shared.setup_django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)  # a reused database may predate the newest migrations
    t0 = time.perf_counter()
    if built is None:
        from tests.factories import ExpertFactory

        experts = [ExpertFactory() for _ in range(3)]
        small = build(items_wanted=args.small, tag=f"s{args.small}", experts=experts)
        large = build(items_wanted=args.large, tag=f"l{args.large}", experts=experts)
    else:
        small, large = built
    build_s = time.perf_counter() - t0
    from django.db import connection

    with connection.cursor() as cursor:
        # Autovacuum would analyze freshly bulk-loaded tables in time; without statistics the
        # planner takes them for empty and picks nested seq scans (10x slower label reads).
        cursor.execute("ANALYZE")
    result = {"bench": "exports", "build_s": round(build_s, 1), "reused": built is not None}
    for fmt in formats:
        result[fmt] = {"20k": measure(small, fmt), "100k": measure(large, fmt)}
    if args.stack:
        result["through_stack_100k_jsonl"] = through_stack(large)
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
