"""Benchmark: one claim ("next task") for a veteran expert on a large project, before and after the golden tally.

Builds, in a scratch database, a project of --tasks tasks (200 golden) and a veteran with about
--labels labels (a passed calibration, 150 control tasks, the rest regular work), written with
bulk_create. Then measures, each as the median of --runs tries inside a rolled-back transaction:

* strengths: matching's expert strengths from the whole history (`golden_counts_by_dimension`, what
  every claim did before) and from the stored tally (one query, what it does now);
* claim: `assignment_claim_next` with the old strengths patched in and with the new ones, for the
  "finish started tasks first" fill order and for "spread evenly"; with the queries each makes.

Prints one JSON line. Usage: .venv/bin/python bench/claim_veteran.py [--tasks 100000] [--labels 4000]
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

shared.DB_NAME = os.environ.get("BENCH_DB", "rubrica_bench_claim")


class Rollback(Exception):
    pass


def timed(fn, runs: int) -> tuple[float, int]:
    """Median milliseconds of `fn()` run inside a transaction that is rolled back, and its queries."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    times, queries = [], 0
    for _ in range(runs):
        try:
            with transaction.atomic():
                with CaptureQueriesContext(connection) as ctx:
                    start = time.perf_counter()
                    fn()
                    times.append((time.perf_counter() - start) * 1000)
                queries = len(ctx.captured_queries)
                raise Rollback
        except Rollback:
            pass
    return round(statistics.median(times), 2), queries


def veteran_scratch(*, tasks: int, labels: int, **settings):
    """A fresh scratch database, migrated, holding `veteran_world`'s project and veteran (ANALYZEd,
    as autovacuum would after a bulk load: the plans depend on it); returns them and the build time."""
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/11")
    shared.recreate_database()
    shared.setup_django()
    from django.core.management import call_command
    from django.db import connection

    from tests.support.scale import veteran_world

    call_command("migrate", verbosity=0)
    built = time.perf_counter()
    project, expert = veteran_world(tasks=tasks, labels=labels, **settings)
    built_s = time.perf_counter() - built
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return project, expert, built_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--labels", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=25)
    args = parser.parse_args()

    project, expert, built_s = veteran_scratch(tasks=args.tasks, labels=args.labels, control_rate_pct=0)
    import random

    from django.utils import timezone

    from annotation.assignment import matching
    from annotation.assignment.services import assignment_claim_next
    from annotation.models import FillOrder, Label, Project
    from experts.models import ExpertProfile
    from tests.support.scale import strengths_from_history

    profile = ExpertProfile.objects.get(user=expert)
    labels = Label.objects.filter(assignment__expert=expert).count()
    rng = random.Random(1)
    result: dict = {"bench": "claim_veteran", "tasks": args.tasks, "veteran_labels": labels,
                    "build_s": round(built_s, 1)}
    assert strengths_from_history(profile, expert) == matching.expert_strengths(profile, expert)
    result["strengths_old_ms"], result["strengths_old_queries"] = timed(lambda: strengths_from_history(profile, expert),
                                                                        args.runs)
    result["strengths_new_ms"], result["strengths_new_queries"] = timed(
        lambda: matching.expert_strengths(profile, expert), args.runs)

    def claim() -> None:
        fresh = Project.objects.get(pk=project.pk)
        assert assignment_claim_next(project=fresh, expert=expert, now=timezone.now(), rng=rng) is not None

    new_strengths = matching.expert_strengths
    for order in (FillOrder.FINISH_STARTED, FillOrder.SPREAD_EVENLY):
        Project.objects.filter(pk=project.pk).update(fill_order=order)
        matching.expert_strengths = strengths_from_history  # type: ignore[assignment]
        result[f"claim_{order}_old_strengths_ms"], _ = timed(claim, args.runs)
        matching.expert_strengths = new_strengths
        result[f"claim_{order}_ms"], result[f"claim_{order}_queries"] = timed(claim, args.runs)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
