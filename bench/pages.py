"""Benchmark: server time of the pages an expert and a PM live on, for a veteran on a large project.

Builds, in a scratch database, a project of --tasks tasks and a veteran expert with about
--labels labels (tests/support/scale.py's `veteran_world`, the golden and peer tallies
counted), a PM who manages it, and a lease the veteran holds. Then renders each page
through Django's test client in this process (server time: routing, middleware, queries,
templates; no network, no gunicorn): one cold request, then --runs warm ones. Issue 14,
point 5: the expert's pages (home, annotation page, draft autosave, earnings) under 50 ms,
the PM's (project, experts, dashboard, board) under 300 ms, with a fixed number of queries
(the query-count tests assert those).

Prints one JSON line: per page the median and p95 ms, the queries of one request and the size.
Usage: .venv/bin/python bench/pages.py [--tasks 100000] [--labels 4000] [--runs 15]
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import assignment as shared  # noqa: E402  (the path above makes the project importable)
from bench.claim_veteran import veteran_scratch  # noqa: E402

shared.DB_NAME = os.environ.get("BENCH_DB", "rubrica_bench_pages")
TARGETS_MS = {"expert": 50, "pm": 300}


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def measure(client, method: str, url: str, runs: int, data: dict | None = None, **headers) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    send = getattr(client, method)
    response = send(url, data or {}, **headers)
    assert response.status_code == 200, (url, response.status_code)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        response = send(url, data or {}, **headers)
        samples.append((time.perf_counter() - started) * 1000)
    with CaptureQueriesContext(connection) as ctx:
        send(url, data or {}, **headers)
    return {"p50_ms": round(statistics.median(samples), 1), "p95_ms": round(_p95(samples), 1),
            "queries": len(ctx.captured_queries), "kb": round(len(response.content) / 1024, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--labels", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    project, expert, built_s = veteran_scratch(tasks=args.tasks, labels=args.labels)
    from django.test import Client
    from django.urls import reverse
    from django.utils import timezone

    from annotation import permissions
    from annotation.agreement.services import agreement_report_compute
    from annotation.assignment.services import assignment_claim_next
    from annotation.models import Label
    from annotation.selectors import rubric_items_for_task
    from experts.models import Role, User

    pm = User.objects.create(username="bench-pm", role=Role.PM, password="!")
    permissions.grant_manage(pm, project)
    agreement_report_compute(project=project, now=timezone.now())  # the dashboard reads a stored report
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    keys = [item.item_key for item in rubric_items_for_task(lease.task)]
    marks = {f"label-{key}": str(n % 2) for n, key in enumerate(keys[: max(1, len(keys) // 2)])}

    as_expert, as_pm = Client(), Client()
    as_expert.force_login(expert)
    as_pm.force_login(pm)
    htmx = {"HTTP_HX_REQUEST": "true"}
    expert_pages = {
        "home": measure(as_expert, "get", reverse("home"), args.runs),
        "annotate": measure(as_expert, "get", reverse("annotate", args=[lease.pk]), args.runs),
        "draft_autosave": measure(as_expert, "post", reverse("draft_save_view", args=[lease.pk]), args.runs,
                                  marks, **htmx),
        "earnings": measure(as_expert, "get", reverse("earnings"), args.runs),
    }
    pm_pages = {
        "project": measure(as_pm, "get", reverse("project_detail", args=[project.pk]), args.runs),
        "experts": measure(as_pm, "get", reverse("quality_experts", args=[project.pk]), args.runs),
        "dashboard": measure(as_pm, "get", reverse("quality_dashboard", args=[project.pk]), args.runs),
        "board": measure(as_pm, "get", reverse("board", args=[project.pk]), args.runs),
    }
    print(json.dumps({
        "bench": "pages", "tasks": args.tasks,
        "veteran_labels": Label.objects.filter(assignment__expert=expert).count(),
        "build_s": built_s, "runs": args.runs, "expert": expert_pages, "pm": pm_pages, "targets_ms": TARGETS_MS,
        "met": {"expert": all(p["p50_ms"] < TARGETS_MS["expert"] for p in expert_pages.values()),
                "pm": all(p["p50_ms"] < TARGETS_MS["pm"] for p in pm_pages.values())},
        "server": "Django test client in one process (server time only), PostgreSQL on the same machine",
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
