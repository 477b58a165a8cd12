"""Benchmark: the full agreement report from PostgreSQL at HeartBench scale and ten times that.

Builds, in a scratch database, the 296 HeartBench questions x 14 models with their rubric
items (about 43,600 units), three expert labels and one judge label per unit; measures
`agreement_report_compute` (read every label from the database, compute every section,
store the report); then grows to ten times the questions (about 436,000 units) in a
second project and measures again, plus the dashboard page rendered through the Django
test client. Each measurement runs in a fresh child process, so peak RSS belongs to it.
Labels are inserted with COPY; the data carries realistic structure (a latent truth per
unit, experts right 85% of the time, two experts who drift late, a judge right 80%).

Also times the leaderboard's ranking statistics at 2,000 models on synthetic scores (no
database): a project that adds one model per response, as the 100,000-task assignment
world does, ranks thousands of models in each of the 1,000 bootstrap replicates.

Prints one JSON line. Usage: .venv/bin/python bench/agreement.py [--keep]
(`--child ranking` runs the ranking case alone.)
"""
import argparse
import io
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEARTBENCH = ROOT.parent / "shared" / "heartbench" / "question_all.jsonl"
DB_NAME = "rubrica_bench_agreement"
PG = "postgres://postgres@127.0.0.1:5432"
MODELS = 14
EXPERTS = 30
T0 = datetime(2025, 3, 1, tzinfo=UTC)
DAYS = 30
RANKING_MODELS = 2000
RANKING_QUESTIONS = 20
TARGETS = {"report_40k_s": 1.5, "report_400k_s": 8.0, "dashboard_400k_ms": 300}


def setup_django() -> None:
    os.environ["DATABASE_URL"] = f"{PG}/{DB_NAME}"
    # Outside the embedded mode the keys come from the environment (core/checks.py); a bench
    # run, and the gunicorn and Celery processes it starts, use throwaway ones.
    for name in ("SECRET_KEY", "RUBRICA_SECRETS_KEY"):
        os.environ.setdefault(name, secrets.token_urlsafe(48))
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def recreate_database() -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")


def drop_database() -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")


def questions_jsonl(copies: int, prefix: str) -> bytes:
    """The real HeartBench questions, `copies` times over under new ids."""
    rows = [json.loads(line) for line in HEARTBENCH.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for c in range(copies):
        for row in rows:
            clone = dict(row)
            clone["question_id"] = f"{prefix}{c:02d}-{row['question_id']}"
            out.append(json.dumps(clone, ensure_ascii=False))
    return ("\n".join(out) + "\n").encode()


def copy_rows(cursor, table: str, columns: list[str], rows) -> None:
    """COPY tab-separated rows into `table` (values are numbers or ISO timestamps, never tabs)."""
    buffer = io.StringIO()
    for row in rows:
        buffer.write("\t".join(str(v) for v in row))
        buffer.write("\n")
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        copy.write(buffer.getvalue())


def build_project(name: str, copies: int, experts: list[int], seed: int) -> dict:
    """A project with `copies` x 296 questions, 14 models, three expert labels and a judge label per unit."""
    import numpy as np
    from django.db import connection
    from django.utils import timezone

    from annotation.exchange.questions import questions_import
    from annotation.models import Assignment, JudgeLabel, JudgeRun, Label, Question, Response, Task
    from annotation.rubric_editing.publishing import tasks_ensure_for_version
    from annotation.selectors import rubric_version_current
    from annotation.services import project_create
    from rubrics.models import RubricItem

    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    project = project_create(name=name, created_by=None)
    questions_import(project=project, data=questions_jsonl(copies, name), now=timezone.now())
    version = rubric_version_current(project)
    questions = list(Question.objects.filter(project=project).values_list("pk", "external_id"))
    Response.objects.bulk_create(
        [Response(project=project, question_id=q, model_name=f"model-{m:02d}", text="我在这里，听你说。")
         for q, _ in questions for m in range(MODELS)], batch_size=5000)
    tasks_ensure_for_version(project=project, version=version)

    items_of: dict[str, list[int]] = {}
    for pk, ref in RubricItem.objects.filter(version=version).order_by("question_ref", "position") \
            .values_list("pk", "question_ref"):
        items_of.setdefault(ref, []).append(pk)
    tasks = list(Task.objects.filter(project=project).values_list("pk", "response__question__external_id"))
    n_tasks = len(tasks)

    # Three distinct experts per task, submitted over a month, in task order with jitter.
    picks = np.argsort(rng.random((n_tasks, len(experts))), axis=1)[:, :3]
    starts = np.sort(rng.uniform(0, DAYS * 86400, n_tasks))[:, None]
    submitted = T0.timestamp() + starts + rng.uniform(0, 3600, (n_tasks, 3))
    seconds = rng.uniform(60, 900, (n_tasks, 3))
    first_id = 1 + (Assignment.objects.order_by("-pk").values_list("pk", flat=True).first() or 0)
    drifting = {experts[0], experts[1]}
    late = T0.timestamp() + 0.7 * DAYS * 86400

    def stamp(ts: float) -> str:
        return datetime.fromtimestamp(ts, UTC).isoformat()

    assignment_rows, label_rows, judge_rows = [], [], []
    expert_ids = np.asarray(experts)
    aid = first_id
    for t, (task_id, ref) in enumerate(tasks):
        items = items_of[ref]
        truth = (rng.random(len(items)) < 0.45).astype(np.int64)
        for slot in range(3):
            expert = int(expert_ids[picks[t, slot]])
            at = float(submitted[t, slot])
            accuracy = 0.70 if expert in drifting and at > late else 0.85
            values = np.where(rng.random(len(items)) < accuracy, truth, 1 - truth)
            at_text = stamp(at)
            assignment_rows.append((aid, task_id, "work", expert, slot + 1, "submitted", stamp(at - seconds[t, slot]),
                                    stamp(at + 3600), at_text, "bronze", "", ""))
            label_rows.extend((aid, task_id, item, int(v), "", at_text) for item, v in zip(items, values))
            aid += 1
        judged = np.where(rng.random(len(items)) < 0.80, truth, 1 - truth)
        judge_rows.extend((task_id, item, int(v)) for item, v in zip(items, judged))

    run = JudgeRun.objects.create(project=project, rubric_version=version, name="judge", judge_model="bench-judge",
                                  source=JudgeRun.Source.IMPORTED, status=JudgeRun.Status.DONE)
    with connection.cursor() as cursor:
        raw = cursor.cursor
        copy_rows(raw, Assignment._meta.db_table,
                  ["id", "task_id", "kind", "expert_id", "slot", "status", "leased_at", "expires_at", "submitted_at",
                   "tier_at_submission", "rejected_reason", "rejected_text"], assignment_rows)
        copy_rows(raw, Label._meta.db_table, ["assignment_id", "task_id", "rubric_item_id", "value", "note",
                                              "created_at"], label_rows)
        copy_rows(raw, JudgeLabel._meta.db_table, ["run_id", "task_id", "rubric_item_id", "value"],
                  ((run.pk, *row) for row in judge_rows))
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{Assignment._meta.db_table}', 'id'), %s)", [aid])
        cursor.execute(f"UPDATE {Task._meta.db_table} SET live_count = 3, submitted_count = 3, status = 'complete', "
                       f"completed_at = %s WHERE project_id = %s", [T0 + timedelta(days=DAYS), project.pk])
        cursor.execute("ANALYZE")
    return {"project": project.pk, "run": run.pk, "questions": len(questions), "models": MODELS, "tasks": n_tasks,
            "units": len(judge_rows), "expert_labels": len(label_rows), "judge_labels": len(judge_rows),
            "build_s": round(time.perf_counter() - started, 1)}


def built_projects() -> tuple[dict, dict]:
    """The two projects a --keep run left (HeartBench and ten times), described as build_project does."""
    from annotation.models import JudgeLabel, JudgeRun, Label, Project, Question, Task

    described = []
    for name in ("hb", "hb10x"):
        project = Project.objects.get(name=name)
        run = JudgeRun.objects.get(project=project)
        judge_labels = JudgeLabel.objects.filter(run=run).count()
        described.append({"project": project.pk, "run": run.pk,
                          "questions": Question.objects.filter(project=project).count(), "models": MODELS,
                          "tasks": Task.objects.filter(project=project).count(), "units": judge_labels,
                          "expert_labels": Label.objects.filter(task__project=project).count(),
                          "judge_labels": judge_labels, "build_s": None})
    return described[0], described[1]


def make_experts() -> list[int]:
    from experts.models import ExpertProfile, Role, User

    users = User.objects.bulk_create([User(username=f"bench-expert-{i}", role=Role.EXPERT, password="!")
                                      for i in range(EXPERTS)])
    ExpertProfile.objects.bulk_create([ExpertProfile(user=u, pseudonym=f"E-BENCH{i:02d}")
                                       for i, u in enumerate(users)])
    return [u.pk for u in users]


def peak_rss_kb() -> int:
    """This process's peak resident set (VmHWM). Unlike ru_maxrss it starts afresh at exec,
    so it does not inherit the parent's peak from the fork that started this child."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measure_report(project_id: int, run_id: int) -> dict:
    """(child process) Compute and store the full report twice: timed, then under tracemalloc."""
    from django.utils import timezone

    from annotation.agreement.services import agreement_report_compute
    from annotation.models import JudgeRun, Project

    project = Project.objects.get(pk=project_id)
    run = JudgeRun.objects.get(pk=run_id)
    rss_before = peak_rss_kb()
    started = time.perf_counter()
    report = agreement_report_compute(project=project, judge_run=run, now=timezone.now())
    seconds = time.perf_counter() - started
    rss_after = peak_rss_kb()
    started = time.perf_counter()
    agreement_report_compute(project=project, judge_run=run, now=timezone.now())
    warm = time.perf_counter() - started
    tracemalloc.start()
    agreement_report_compute(project=project, judge_run=run, now=timezone.now())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"units": report.units, "report_s": round(seconds, 3), "report_warm_s": round(warm, 3),
            "stored_duration_ms": report.duration_ms,
            "peak_python_alloc_mb": round(peak / 2**20, 1),
            "peak_rss_mb": round(rss_after / 1024, 1), "rss_before_report_mb": round(rss_before / 1024, 1),
            "payload_kb": round(len(json.dumps(report.payload, ensure_ascii=False).encode()) / 1024, 1)}


def measure_dashboard(project_id: int) -> dict:
    """(child process) Render the dashboard page for the project's PM through the test client."""
    from django.test import Client
    from django.urls import reverse

    from annotation import permissions
    from annotation.models import Project
    from experts.models import Role, User

    project = Project.objects.get(pk=project_id)
    pm, _ = User.objects.get_or_create(username="bench-pm", defaults={"role": Role.PM, "password": "!"})
    permissions.grant_manage(pm, project)
    client = Client()
    client.force_login(pm)
    url = reverse("quality_dashboard", args=[project.pk])
    return time_page(client, url)


def measure_items(project_id: int, run_id: int) -> dict:
    """(child process) The per-item table (worst first; one dimension by split panels) and the worst item."""
    from django.test import Client
    from django.urls import reverse

    from annotation import permissions
    from annotation.models import AgreementItemStat, Project
    from experts.models import Role, User

    project = Project.objects.get(pk=project_id)
    pm, _ = User.objects.get_or_create(username="bench-pm", defaults={"role": Role.PM, "password": "!"})
    permissions.grant_manage(pm, project)
    client = Client()
    client.force_login(pm)
    stats = AgreementItemStat.objects.filter(report__project=project, report__judge_run_id=run_id)
    worst = stats.order_by("strict", "-units").first()
    items = reverse("judge_items", args=[project.pk])
    return {
        "item_rows": stats.count(),
        "table": time_page(client, f"{items}?run={run_id}"),
        "table_filtered": time_page(client, f"{items}?run={run_id}&dimension={worst.dimension_code}&sort=split"),
        "item": time_page(client, f"{reverse('judge_item', args=[project.pk, worst.rubric_item_id])}?run={run_id}"),
    }


def measure_ranking_scale() -> dict:
    """(child process) Ranks and Kendall's tau-b over 1,000 replicates of 2,000 models, on synthetic scores.

    First the two statistics alone on (1,000, 2,000) overall scores with ties (best of three),
    then the whole `rank_stability_bootstrap` on 2,000 models x 20 questions x 4 dimensions,
    each question having 3 of them: about the shape of the 100,000-task world's leaderboard.
    Comparing all n^2 pairs, as these statistics once did, took 84 s (tau) and 5.3 s (ranks)
    on the same (1,000, 2,000) arrays, in blocks of 50 replicates.
    """
    import numpy as np

    from annotation.agreement import scoring

    rng = np.random.default_rng(0)
    human = np.round(rng.uniform(0, 100, (1000, RANKING_MODELS)), 1)
    judge = np.round(human + rng.normal(0, 10, human.shape), 1)

    def best_of_three(call) -> float:
        samples = []
        for _ in range(3):
            started = time.perf_counter()
            call()
            samples.append(time.perf_counter() - started)
        return round(min(samples), 3)

    dims = 4
    norms = np.full((2, RANKING_MODELS, RANKING_QUESTIONS, dims), np.nan)
    levels = [0.0, 38.7, 61.3, 77.4, 100.0]
    for q in range(RANKING_QUESTIONS):
        # A few norm levels per question, so that many models tie; the judge redraws a fifth of them.
        panel = rng.choice(levels, size=(RANKING_MODELS, 3))
        judged = np.where(rng.random(panel.shape) < 0.2, rng.choice(levels, size=panel.shape), panel)
        norms[:, :, q, rng.choice(dims, 3, replace=False)] = np.stack([panel, judged])
    started = time.perf_counter()
    result = scoring.rank_stability_bootstrap(norms[0], norms[1], n_boot=1000, seed=0)
    bootstrap = time.perf_counter() - started
    return {"models": RANKING_MODELS, "replicates": 1000,
            # The statistics themselves are private to the module; timed here as the report uses them.
            "tau_b_s": best_of_three(lambda: scoring._kendall_tau_b(human, judge)),
            "competition_ranks_s": best_of_three(lambda: scoring._competition_ranks(human)),
            "rank_stability_bootstrap_s": round(bootstrap, 3), "tau": round(result.tau, 3)}


CELERY_REDIS = "redis://127.0.0.1:6379/12"


def measure_on_celery(project_id: int, run_id: int) -> dict:
    """Ask for the report the way the platform does (a task on Redis) and time it on a real worker.

    A `celery -A config worker` process (solo pool) on the scratch database consumes the
    task; the figure is from sending the task to the stored row being done, plus the
    duration the worker stored. The worker is warmed by one report first.
    """
    from django.utils import timezone

    from annotation.models import AgreementReport

    env = {**os.environ, "DATABASE_URL": f"{PG}/{DB_NAME}", "REDIS_URL": CELERY_REDIS,
           "CELERY_BROKER_URL": CELERY_REDIS, "CELERY_RESULT_BACKEND": CELERY_REDIS, "CELERY_TASK_ALWAYS_EAGER": "0"}
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
                               "--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from config.celery import app

        app.conf.broker_url = CELERY_REDIS
        app.conf.task_always_eager = False
        samples = []
        for _ in range(3):
            before = AgreementReport.objects.filter(project_id=project_id).order_by("-pk").values_list(
                "pk", flat=True).first() or 0
            started = time.perf_counter()
            app.send_task("annotation.agreement_report_compute",
                          kwargs={"project_id": project_id, "judge_run_id": run_id})
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                done = AgreementReport.objects.filter(project_id=project_id, pk__gt=before,
                                                      status=AgreementReport.Status.DONE).first()
                if done is not None:
                    samples.append((time.perf_counter() - started, done.duration_ms))
                    break
                time.sleep(0.05)
            else:
                raise RuntimeError("the worker did not finish the report in 300 s")
        timed = samples[1:]  # the first one also warms the worker's imports
        return {"worker_wall_s": [round(wall, 2) for wall, _ in timed],
                "worker_stored_ms": [ms for _, ms in timed], "at": timezone.now().isoformat()}
    finally:
        worker.terminate()
        worker.wait(30)


def time_page(client, url: str) -> dict:
    """One cold request, 10 warm ones and 5 htmx fragments of `url`, in milliseconds (both page benches)."""
    started = time.perf_counter()
    response = client.get(url)
    cold = time.perf_counter() - started
    assert response.status_code == 200, response.status_code
    samples = []
    for _ in range(10):
        started = time.perf_counter()
        response = client.get(url)
        samples.append(time.perf_counter() - started)
    fragment = []
    for _ in range(5):
        started = time.perf_counter()
        client.get(url, HTTP_HX_REQUEST="true")
        fragment.append(time.perf_counter() - started)
    return {"first_ms": round(cold * 1000, 1), "p50_ms": round(statistics.median(samples) * 1000, 1),
            "max_ms": round(max(samples) * 1000, 1), "fragment_p50_ms": round(statistics.median(fragment) * 1000, 1),
            "html_kb": round(len(response.content) / 1024, 1)}


def run_child(script: str, kind: str, *ids: int) -> dict:
    """Run `script --child kind ids…` in a fresh process (cold caches) and read its last JSON line."""
    out = subprocess.run([sys.executable, script, "--child", kind, *map(str, ids)], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-4000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def child(kind: str, *ids: int) -> dict:
    return run_child(__file__, kind, *ids)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", action="store_true", help="keep the scratch database afterwards")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--reuse", action="store_true",
                        help="measure on the database a --keep run left, without building it again")
    args = parser.parse_args()
    if args.child:
        setup_django()
        kind, *ids = args.child
        measure = {"report": measure_report, "dashboard": measure_dashboard, "items": measure_items,
                   "celery": measure_on_celery, "ranking": measure_ranking_scale}[kind]
        result = measure(*map(int, ids))
        print(json.dumps(result))
        return

    if not args.reuse:
        recreate_database()
    setup_django()
    from django.core.management import call_command

    try:
        if args.reuse:
            small, large = built_projects()
        else:
            call_command("migrate", verbosity=0)
            experts = make_experts()
            small = build_project("hb", 1, experts, seed=1)
            large = build_project("hb10x", 10, experts, seed=2)
        small.update(child("report", small["project"], small["run"]))
        large.update(child("report", large["project"], large["run"]))
        large["on_celery"] = child("celery", large["project"], large["run"])
        dashboard = child("dashboard", large["project"])
        dashboard["units"] = large["units"]
        items = child("items", large["project"], large["run"])
        ranking = child("ranking")
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database()
    print(json.dumps({
        "bench": "agreement",
        "heartbench": small,
        "heartbench_x10": large,
        "dashboard_x10": dashboard,
        "items_x10": items,
        "ranking_2000_models": ranking,
        "targets": TARGETS,
        "met": {"report_40k": small["report_s"] < TARGETS["report_40k_s"],
                "report_400k": large["report_s"] < TARGETS["report_400k_s"],
                "report_400k_on_celery": max(large["on_celery"]["worker_wall_s"]) < TARGETS["report_400k_s"],
                "dashboard_400k": dashboard["p50_ms"] < TARGETS["dashboard_400k_ms"],
                "items_400k": max(items[k]["p50_ms"] for k in ("table", "table_filtered", "item"))
                < TARGETS["dashboard_400k_ms"]},
        "n_boot": 1000,
        "database": "PostgreSQL; each big read is one query returning packed binary columns",
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
