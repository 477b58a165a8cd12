"""Benchmark: the PM's board at 100,000 tasks, through gunicorn.

Builds one project in a scratch PostgreSQL database with bulk_create: 20,000 HeartBench
questions (dialogues cloned from the real rows) × 5 models = 100,000 tasks, 4 rubric
items per question, and work in every state (60% complete with three experts' labels'
consensus, 2% of those tied, in progress, skipped, open, golden). VACUUM ANALYZE, then
gunicorn (2 gthread workers) on port 8651 serves `GET /projects/{id}/board/` to a PM's
session: the first page, a filtered page (state, model, zone) and two searches over the
dialogue (a common word and a rare phrase). Prints one JSON line with p50/p95 per case.
Every filter is measured alone (scene, difficulty, dimension, model, rubric version, expert,
zone, each state), with two combinations, searches of 1, 2, 3 and 10 characters, a search that
matches nothing, a search under a rare state, and a page half-way down the list.
Usage: .venv/bin/python bench/board.py [--questions 20000] [--rounds 30] [--reuse]
       [--port 8651] [--redis redis://127.0.0.1:6379/11] [--db rubrica_bench_board]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import assignment as shared  # noqa: E402  (the path above makes the project importable)

shared.DB_NAME = "rubrica_bench_board"
PORT = 8651
REDIS = "redis://127.0.0.1:6379/11"
MODELS = 5
ITEMS = 4
EXPERTS = 30
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NAME = "bench board"


def build(*, n_questions: int) -> int:
    """The project with n_questions × 5 tasks; returns its id."""
    from annotation.models import Assignment, ItemConsensus, Question, Response, Task, TaskSkip
    from annotation.services import project_add_member, project_create
    from rubrics.models import Dimension, RubricItem, RubricVersion
    from tests.factories import ExpertFactory

    rows = [json.loads(line) for line in shared.HEARTBENCH.read_text(encoding="utf-8").splitlines() if line.strip()]
    dims = {d.name_zh: d for d in Dimension.objects.all()}
    project = project_create(name=NAME, created_by=None, overlap=3)
    experts = [ExpertFactory() for _ in range(EXPERTS)]
    for e in experts:
        project_add_member(project=project, user=e)
    version = RubricVersion.objects.create(rubric=project.rubric, number=1)
    questions, items = [], []
    for i in range(n_questions):
        row = rows[i % len(rows)]
        qid = f"b{i:06d}"
        questions.append(Question(project=project, external_id=qid, dialogue=row["dialogue"][:-1],
                                  final_user_turn=row["dialogue"][-1]["content"],
                                  difficulty=row.get("difficulty") or "normal",
                                  primary_scene=row.get("primary_scene", ""),
                                  secondary_scene=row.get("secondary_scene", "")))
        for pos, item in enumerate(row["rubric"][:ITEMS], start=1):
            items.append(RubricItem(version=version, question_ref=qid, position=pos, item_key=f"{qid}:{pos}",
                                    dimension=dims[item["dimension"]], score=item["score"], content=item["content"]))
    Question.objects.bulk_create(questions, batch_size=2000)
    RubricItem.objects.bulk_create(items, batch_size=5000)
    RubricVersion.objects.filter(pk=version.pk).update(status="published", published_at=NOW)
    Response.objects.bulk_create([Response(project=project, question=q, model_name=f"model-{m}", text="……")
                                  for q in Question.objects.filter(project=project) for m in range(MODELS)],
                                 batch_size=5000)
    tasks = []
    for n, r in enumerate(Response.objects.filter(project=project).order_by("pk").only("pk")):
        kind = n % 10
        complete = kind < 6
        tasks.append(Task(project=project, response_id=r.pk, rubric_version=version, overlap=3,
                          live_count=3 if complete else int(kind == 6), submitted_count=3 if complete else 0,
                          status="complete" if complete else "open", is_golden=n % 100 == 9,
                          shuffle_key=random.getrandbits(62), completed_at=NOW if complete else None))
    Task.objects.bulk_create(tasks, batch_size=5000)
    by_question: dict[str, list[RubricItem]] = {}
    for item in RubricItem.objects.filter(version=version).only("pk", "question_ref"):
        by_question.setdefault(item.question_ref, []).append(item)
    assignments, skips_for, consensus = [], [], []
    saved = list(Task.objects.filter(project=project).order_by("pk")
                 .values_list("pk", "status", "live_count", "response__question__external_id"))
    for n, (task_id, status, live, qid) in enumerate(saved):
        kind = n % 10
        if status == "complete":
            for s in range(3):
                assignments.append(Assignment(task_id=task_id, expert=experts[(n + 7 * s) % EXPERTS], slot=s + 1,
                                              status="submitted", leased_at=NOW, expires_at=NOW + timedelta(hours=1),
                                              submitted_at=NOW))
            for j, item in enumerate(by_question[qid]):
                if n % 50 == 0 and j == 0:
                    consensus.append(ItemConsensus(task_id=task_id, rubric_item=item, hit_votes=1, total_votes=2,
                                                   majority=None, zone="tied", provenance="", computed_at=NOW))
                    continue
                hits = (n + j) % 4
                consensus.append(ItemConsensus(task_id=task_id, rubric_item=item, hit_votes=hits, total_votes=3,
                                               majority=int(hits >= 2), zone="unanimous" if hits in (0, 3) else "split",
                                               provenance="unanimous" if hits in (0, 3) else "majority",
                                               computed_at=NOW))
        elif live:
            assignments.append(Assignment(task_id=task_id, expert=experts[n % EXPERTS], slot=1, status="leased",
                                          leased_at=NOW, expires_at=NOW + timedelta(hours=1)))
        elif kind == 8:
            assignments.append(Assignment(task_id=task_id, expert=experts[n % EXPERTS], slot=1, status="released",
                                          leased_at=NOW, expires_at=NOW + timedelta(hours=1)))
            skips_for.append(len(assignments) - 1)
        if len(consensus) >= 40000:
            ItemConsensus.objects.bulk_create(consensus, batch_size=10000)
            consensus = []
    ItemConsensus.objects.bulk_create(consensus, batch_size=10000)
    made = Assignment.objects.bulk_create(assignments, batch_size=10000)
    TaskSkip.objects.bulk_create([TaskSkip(assignment=made[i], project=project, task_id=made[i].task_id,
                                           expert=made[i].expert, reason="not_my_field", created_at=NOW)
                                  for i in skips_for], batch_size=5000)
    return project.pk


def _built() -> int | None:
    import psycopg

    try:
        with psycopg.connect(f"{shared.PG}/{shared.DB_NAME}") as conn:
            row = conn.execute("SELECT id FROM annotation_project WHERE name = %s", (NAME,)).fetchone()
    except psycopg.Error:
        return None
    return row[0] if row else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--reuse", action="store_true", help="measure the project an earlier run built")
    parser.add_argument("--port", type=int, default=PORT, help="where gunicorn listens")
    parser.add_argument("--redis", default=REDIS, help="the Redis database the server uses")
    parser.add_argument("--db", default=shared.DB_NAME, help="the scratch PostgreSQL database")
    parser.add_argument("--only", default="", help="comma-separated case names to measure (default: all)")
    args = parser.parse_args()
    shared.DB_NAME = args.db
    port, redis = args.port, args.redis
    built = _built() if args.reuse else None
    if built is None:
        shared.recreate_database()
    os.environ["REDIS_URL"] = redis
    shared.setup_django()
    import httpx
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    call_command("migrate", verbosity=0)
    t0 = time.perf_counter()
    project_id = built or build(n_questions=args.questions)
    build_s = time.perf_counter() - t0
    with connection.cursor() as cursor:
        # What autovacuum does to freshly loaded tables in time: statistics, and the visibility map
        # that lets the zone and state lists come from index-only scans.
        cursor.execute("VACUUM ANALYZE")
    from annotation import permissions
    from annotation.models import Project, Task
    from experts.models import User
    from experts.services import user_create

    project = Project.objects.get(pk=project_id)
    pm = User.objects.filter(username="bench-board-pm").first()
    if pm is None:
        pm, _ = user_create(username="bench-board-pm", role="pm", password="bench-pass-123")
    permissions.grant_manage(pm, project)
    session = Client()
    session.force_login(pm)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    common = "工作"
    rare = project.questions.order_by("external_id").values_list("final_user_turn", flat=True).first()[:10]
    ids = list(Task.objects.filter(project=project).order_by("pk").values_list("pk", flat=True))
    expert = str(project_experts_first(project))
    cases = {
        "first_page": {},
        "filtered": {"state": "complete", "model": "model-2", "zone": "split"},
        "filtered_deep": {"dimension": "emotional-perception", "expert": expert},
        "scene": {"scene": "家庭关系"},
        "difficulty": {"difficulty": "hard"},
        "dimension": {"dimension": "emotional-perception"},
        "model": {"model": "model-2"},
        "version": {"version": "1"},
        "expert": {"expert": expert},
        "zone_split": {"zone": "split"},
        "zone_tied": {"zone": "tied"},
        **{f"state_{state}": {"state": state}
           for state in ("open", "in_progress", "tied", "complete", "golden", "skipped")},
        "search_1": {"q": "我"},
        "search_3": {"q": "不知道"},
        "search_common": {"q": common},
        "search_rare": {"q": rare},
        "search_none": {"q": "无此之词"},
        "search_in_state": {"q": common, "state": "skipped"},
        "search_filtered": {"q": "压力", "scene": "职场心理", "difficulty": "hard"},
        "second_page": {"after": str(ids[49])},
        "page_half": {"after": str(ids[len(ids) // 2])},
        "page_filtered_n": {"model": "model-3", "after": str(ids[len(ids) // 2])},
    }
    if args.only:
        cases = {name: params for name, params in cases.items() if name in args.only.split(",")}
    env = {**os.environ, "DATABASE_URL": f"{shared.PG}/{shared.DB_NAME}", "DB_CONN_MAX_AGE": "600",
           "AXES_ENABLED": "0", "CELERY_TASK_ALWAYS_EAGER": "1", "REDIS_URL": redis}
    server = subprocess.Popen(
        [str(shared.ROOT / ".venv" / "bin" / "gunicorn"), "config.wsgi:application", "-b", f"127.0.0.1:{port}",
         "-w", "2", "-k", "gthread", "--threads", "2", "--log-level", "warning"], cwd=shared.ROOT, env=env)
    result: dict = {"bench": "board", "tasks": Task.objects.filter(project=project).count(),
                    "build_s": round(build_s, 1), "reused": built is not None,
                    "stack": "gunicorn gthread 2x2, PostgreSQL, session of the project's PM"}
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60,
                              cookies={settings.SESSION_COOKIE_NAME: cookie})
        shared.server_wait(f"http://127.0.0.1:{port}")
        url = f"/projects/{project_id}/board/"
        for name, params in cases.items():
            for _ in range(3):  # warm both workers' connections and caches
                warm = client.get(url, params=params)
                assert warm.status_code == 200, (name, warm.status_code)
            samples = []
            for _ in range(args.rounds):
                start = time.perf_counter()
                resp = client.get(url, params=params)
                samples.append(time.perf_counter() - start)
                assert resp.status_code == 200
            shown = resp.text.count('<tr data-href="')
            result[name] = {**shared.percentiles(samples), "rows": shown, "params": params}
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(json.dumps(result, ensure_ascii=False))


def project_experts_first(project) -> int:
    from annotation.selectors import project_experts

    return project_experts(project).values_list("pk", flat=True).first()


if __name__ == "__main__":
    main()
