"""Benchmark: the follow-up work one submission queues, measured task by task, for a veteran.

Builds, in a scratch database, a project of --tasks tasks and a veteran expert with about
--labels labels (tests/support/scale.py's `veteran_world`, with a share of control tasks),
then lets the veteran claim and submit --submissions tasks through the real services. The
tasks each submission sends after commit (tier evaluation, earning, review flags, agreement
request) are caught instead of sent, then run one by one in this process, as a worker would
run them; each one's CPU time (`time.process_time`) and wall time are recorded. Issue 14,
point 2: under 5 ms of CPU each at any history length.

Prints one JSON line: per task name, how many ran and the median and p95 CPU and wall ms.
Usage: .venv/bin/python bench/follow_ups.py [--tasks 10000] [--labels 4000] [--submissions 40]
"""
import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import assignment as shared  # noqa: E402  (the path above makes the project importable)
from bench.claim_veteran import veteran_scratch  # noqa: E402

shared.DB_NAME = os.environ.get("BENCH_DB", "rubrica_bench_follow_ups")
TARGET_CPU_MS = 5.0


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--labels", type=int, default=4000)
    parser.add_argument("--submissions", type=int, default=40)
    args = parser.parse_args()

    project, expert, built_s = veteran_scratch(tasks=args.tasks, labels=args.labels, control_rate_pct=10)
    from django.db import transaction
    from django.utils import timezone

    import annotation.submission.services as submission
    from annotation.assignment.services import assignment_claim_next
    from annotation.models import Label, Project
    from annotation.selectors import rubric_items_for_task
    from config.celery import app

    history = Label.objects.filter(assignment__expert=expert).count()

    caught: list[tuple[str, dict]] = []
    submission.task_send_on_commit = lambda name, **kwargs: caught.append((name, kwargs))  # type: ignore[assignment]
    rng = random.Random(14)
    cpu: dict[str, list[float]] = {}
    wall: dict[str, list[float]] = {}
    for _ in range(args.submissions):
        fresh = Project.objects.get(pk=project.pk)
        lease = assignment_claim_next(project=fresh, expert=expert, now=timezone.now(), rng=rng)
        if lease is None:
            break
        labels = {item.item_key: rng.randint(0, 1) for item in rubric_items_for_task(lease.task)}
        caught.clear()
        with transaction.atomic():
            submission.labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
        for name, kwargs in list(caught):
            task = app.tasks[name]
            started_cpu, started_wall = time.process_time(), time.perf_counter()
            task(**kwargs)
            cpu.setdefault(name, []).append((time.process_time() - started_cpu) * 1000)
            wall.setdefault(name, []).append((time.perf_counter() - started_wall) * 1000)

    per_task = {name: {"n": len(values), "cpu_p50_ms": round(statistics.median(values), 2),
                       "cpu_p95_ms": round(_p95(values), 2),
                       "wall_p50_ms": round(statistics.median(wall[name]), 2),
                       "wall_p95_ms": round(_p95(wall[name]), 2)}
                for name, values in sorted(cpu.items())}
    print(json.dumps({"bench": "follow_ups", "tasks": args.tasks, "veteran_labels": history,
                      "build_s": round(built_s, 1), "target_cpu_ms": TARGET_CPU_MS, "follow_ups": per_task,
                      "all_under_target": all(v["cpu_p95_ms"] < TARGET_CPU_MS for v in per_task.values())}))


if __name__ == "__main__":
    main()
