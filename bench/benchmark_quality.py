"""Benchmark: the benchmark quality report at HeartBench scale and ten times that, and its page.

Builds the same data as bench/agreement.py (its builder, in a scratch database of its
own): the 296 HeartBench questions x 14 models (about 43,600 units, three expert labels
and one judge label each), then ten times the questions (about 436,000 units). Measures
`benchmark_report_compute` (read every label, score every model on both sides, 1,000
question resamples, store the report) at both sizes, then the report page rendered from
the stored report through the Django test client. Each measurement runs in a fresh child
process. Target (issue 13, point 8): compute < 8 s at ten times, render < 300 ms.

Prints one JSON line. Usage: .venv/bin/python bench/benchmark_quality.py [--keep]
"""
import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import agreement as base  # noqa: E402

base.DB_NAME = "rubrica_bench_benchmark_quality"
_copy_rows = base.copy_rows


def copy_rows(cursor, table: str, columns: list[str], rows) -> None:
    """bench/agreement.py's COPY, with the assignment's rejection texts (NOT NULL, no database default) filled."""
    from annotation.models import Assignment

    if table == Assignment._meta.db_table:
        extra = [name for name in ("rejected_reason", "rejected_text") if name not in columns]
        _copy_rows(cursor, table, [*columns, *extra], ((*row, *[""] * len(extra)) for row in rows))
        return
    _copy_rows(cursor, table, columns, rows)


# The shared builder calls `copy_rows` through its module, so it picks this one up.
base.copy_rows = copy_rows
TARGETS = {"compute_x10_s": 8.0, "render_x10_ms": 300}


def measure_compute(project_id: int, run_id: int) -> dict:
    """(child process) Compute and store the report twice (cold, then warm)."""
    from django.utils import timezone

    from annotation.benchmark_report.services import benchmark_report_compute
    from annotation.models import JudgeRun, Project

    project = Project.objects.get(pk=project_id)
    run = JudgeRun.objects.get(pk=run_id)
    started = time.perf_counter()
    report = benchmark_report_compute(project=project, run=run, now=timezone.now())
    cold = time.perf_counter() - started
    started = time.perf_counter()
    benchmark_report_compute(project=project, run=run, now=timezone.now())
    warm = time.perf_counter() - started
    human = report.payload["sides"]["human"]
    return {"units": report.units, "compute_s": round(cold, 3), "compute_warm_s": round(warm, 3),
            "stored_duration_ms": report.duration_ms, "models": len(report.payload["models"]),
            "questions": report.payload["n_questions"], "order_keep_share_human": human["order_keep_share"],
            "payload_kb": round(len(json.dumps(report.payload, ensure_ascii=False).encode()) / 1024, 1)}


def measure_render(project_id: int, run_id: int) -> dict:
    """(child process) Render the report page for the project's PM from the stored report."""
    from django.test import Client
    from django.urls import reverse

    from annotation import permissions
    from annotation.models import BenchmarkReport, Project
    from experts.models import Role, User

    project = Project.objects.get(pk=project_id)
    pm, _ = User.objects.get_or_create(username="bench-pm", defaults={"role": Role.PM, "password": "!"})
    permissions.grant_manage(pm, project)
    client = Client()
    client.force_login(pm)
    url = reverse("benchmark_report", args=[project.pk]) + f"?run={run_id}"
    reports_before = BenchmarkReport.objects.filter(project=project).count()
    figures = base.time_page(client, url)
    # The page must have rendered the stored report, not computed a new one.
    assert BenchmarkReport.objects.filter(project=project).count() == reports_before
    return figures


def child(kind: str, *ids: int) -> dict:
    return base.run_child(__file__, kind, *ids)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", action="store_true", help="keep the scratch database afterwards")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        base.setup_django()
        kind, *ids = args.child
        result = measure_compute(*map(int, ids)) if kind == "compute" else measure_render(*map(int, ids))
        print(json.dumps(result))
        return

    base.recreate_database()
    base.setup_django()
    from django.core.management import call_command

    try:
        call_command("migrate", verbosity=0)
        experts = base.make_experts()
        small = base.build_project("hb", 1, experts, seed=1)
        small.update(child("compute", small["project"], small["run"]))
        large = base.build_project("hb10x", 10, experts, seed=2)
        large.update(child("compute", large["project"], large["run"]))
        render = child("render", large["project"], large["run"])
        render["units"] = large["units"]
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            base.drop_database()
    print(json.dumps({
        "bench": "benchmark_quality",
        "heartbench": small,
        "heartbench_x10": large,
        "render_x10": render,
        "targets": TARGETS,
        "met": {"compute_x10": large["compute_s"] < TARGETS["compute_x10_s"],
                "render_x10": render["p50_ms"] < TARGETS["render_x10_ms"]},
        "n_boot": 1000,
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
