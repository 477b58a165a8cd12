"""Benchmark: running a team through the real HTTP stack (issue 9).

A scratch PostgreSQL database gets a project of N HeartBench-shaped questions with one
reply each (N tasks) and E expert accounts. gunicorn serves the platform on loopback and a
Celery worker consumes the follow-up work, as in production. Through the v1 API a PM then:
adds all E experts in one pasted list, lists the roster, raises the overlap with
"apply to existing tasks" (every task gets a slot), and removes experts who each hold an
open lease (their leases end, the slots return). Prints one JSON line.
Usage: .venv/bin/python -m bench.roster [--questions N] [--experts E]
"""
import argparse
import json
import os
import subprocess
import time

import httpx

from bench.assignment import DB_NAME, PG, ROOT, heartbench_shaped, percentiles, recreate_database, setup_django

PORT = 8766
REDIS = "redis://127.0.0.1:6379/13"


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=5_000)
    parser.add_argument("--experts", type=int, default=300)
    parser.add_argument("--removals", type=int, default=20)
    args = parser.parse_args()

    recreate_database()
    setup_django()
    from django.core.management import call_command
    from django.utils import timezone

    call_command("migrate", verbosity=0)
    from annotation.assignment.services import assignment_claim_next
    from annotation.exchange.questions import questions_import
    from annotation.exchange.responses import responses_import
    from annotation.models import Assignment, Task
    from annotation.services import project_create
    from experts.models import User
    from experts.services import user_create

    project = project_create(name="bench-roster", created_by=None)
    questions_import(project=project, data=heartbench_shaped(args.questions), now=timezone.now())
    responses = "\n".join(json.dumps({"question_id": f"bq{i:06d}", "model": "m0", "response": "我在这里陪着你。"},
                                     ensure_ascii=False) for i in range(args.questions)).encode()
    responses_import(project=project, data=responses, model=None, now=timezone.now())
    pm, pm_token = user_create(username="bench-pm", role="pm", password="bench-pass-123")
    from annotation import permissions
    permissions.grant_manage(pm, project)
    names = []
    for i in range(args.experts):
        user_create(username=f"roster{i:04d}", role="expert", password="bench-pass-123")
        names.append(f"roster{i:04d}")

    env = {**os.environ, "DATABASE_URL": f"{PG}/{DB_NAME}", "DB_CONN_MAX_AGE": "600", "AXES_ENABLED": "0",
           "CELERY_TASK_ALWAYS_EAGER": "0", "REDIS_URL": REDIS}
    server = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "gunicorn"), "config.wsgi:application", "-b", f"127.0.0.1:{PORT}",
         "-w", "2", "-k", "gthread", "--threads", "4", "--log-level", "warning"], cwd=ROOT, env=env)
    worker = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "celery"), "-A", "config", "worker", "-l", "warning", "--concurrency", "1"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"/api/v1/projects/{project.pk}"
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{PORT}", timeout=120,
                              headers={"Authorization": f"Token {pm_token}"})
        for _ in range(100):
            try:
                client.get("/accounts/login/")
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        added, add_s = timed(client.post, f"{base}/members/", json={"users": names})
        assert added.status_code in (200, 201), added.text[:300]
        again, again_s = timed(client.post, f"{base}/members/", json={"users": names})
        listing = []
        for _ in range(20):
            resp, seconds = timed(client.get, f"{base}/members/")
            assert resp.status_code == 200
            listing.append(seconds)

        # Some experts hold a lease each, as on a working day.
        now = timezone.now()
        holders = [User.objects.get(username=n) for n in names[:args.removals]]
        for expert in holders:
            assignment_claim_next(project=project, expert=expert, now=now)
        live_before = sum(Task.objects.filter(project=project).values_list("live_count", flat=True))

        preview, preview_s = timed(client.patch, f"{base}/", json={"overlap": 4, "apply_to_existing": True})
        assert preview.status_code == 200, preview.text[:300]
        tasks_with_4 = Task.objects.filter(project=project, overlap=4).count()

        removal = []
        for expert in holders:
            resp, seconds = timed(client.delete, f"{base}/members/{expert.username}/")
            assert resp.status_code in (200, 204), resp.text[:300]
            removal.append(seconds)
        live_after = sum(Task.objects.filter(project=project).values_list("live_count", flat=True))
        released = Assignment.objects.filter(task__project=project, status="released").count()
    finally:
        server.terminate()
        worker.terminate()
        server.wait(timeout=20)
        worker.wait(timeout=20)
        import redis

        redis.Redis.from_url(REDIS).flushdb()

    print(json.dumps({
        "bench": "roster",
        "tasks": args.questions,
        "experts": args.experts,
        "bulk_add": {"lines": len(names), "seconds": round(add_s, 3),
                     "repeat_seconds": round(again_s, 3), "repeat_status": again.status_code},
        "members_list": percentiles(listing),
        "overlap_raise_apply_to_existing": {"tasks_given_a_slot": tasks_with_4, "seconds": round(preview_s, 3)},
        "remove_member_with_lease": percentiles(removal),
        "live_leases": {"before_removals": live_before, "after": live_after, "released": released},
        "server": "gunicorn gthread 2x4, PostgreSQL 15, Celery worker (1 process) on Redis",
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
