"""Live judge runs against a real loopback chat-completions server, with eager Celery.

Covers: every task done; 429 / 500 / garbage / slow retried and then done or recorded
as failed (never dropped: done + failed == total); cancel mid-way and resume asking
only the unfinished tasks; the API key in no table, page, API response or log; the
pages (full and fragment) and the progress API scoped to the project's PM.
"""
import importlib
import json
import os
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.apps import apps
from django.core import serializers
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connections
from django.test import Client
from django.utils import timezone

from annotation.judging import walker
from annotation.judging.prompt import render_rubric_line
from annotation.judging.ratelimit import RedisRateLimiter
from annotation.judging.runs import judge_run_cancel, judge_run_progress, judge_run_resume, judge_run_start
from annotation.judging.secrets import JudgeKeyError, api_key_decrypt, api_key_encrypt
from annotation.judging.walker import judge_run_step, judge_task_execute
from annotation.models import JudgeKeyGrant, JudgeLabel, JudgeRun, JudgeTaskResult, Project, Task
from config.celery import app as celery_app
from core.errors import DomainError
from tests.factories import PMFactory, make_project_with_tasks
from tests.support.fake_llm import FakeLLMServer, default_answer

SECRET = "sk-live-7f3a9c0b1d2e4f5a6b7c8d9e-never-show-me"


@pytest.fixture(autouse=True)
def fast_judge(settings, monkeypatch) -> None:
    """Short timeouts and backoffs, loopback without proxies, a process-local limiter, eager tasks."""
    settings.RUBRICA_JUDGE_TIMEOUT_S = 0.5
    settings.RUBRICA_JUDGE_MAX_RETRIES = 2
    settings.RUBRICA_JUDGE_BACKOFF_BASE_S = 0.01
    settings.RUBRICA_JUDGE_BACKOFF_MAX_S = 0.05
    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.REDIS_URL = ""
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(slow_s=3.0) as server:
        yield server


@pytest.fixture
def project(pm) -> Project:
    """3 questions × 2 models = 6 tasks of 3 rubric items; one of them golden (never judged)."""
    project = make_project_with_tasks(n_questions=3, items_per_question=3, models=2, pm=pm)
    Task.objects.filter(pk=Task.objects.filter(project=project).order_by("-pk").values("pk")[:1]).update(
        is_golden=True)
    return project


def start(project: Project, llm: FakeLLMServer, *, name: str = "run-1", rps: float = 50,
          api_key: str | None = SECRET, api_key_env: str | None = None, created_by=None) -> JudgeRun:
    return judge_run_start(project=project, name=name, base_url=llm.base_url, judge_model="fake-judge",
                           api_key=api_key, api_key_env=api_key_env, requests_per_second=rps,
                           created_by=created_by)


def start_and_run(project: Project, llm: FakeLLMServer, capture, **kwargs) -> JudgeRun:
    """Start a run; the walker queued on commit runs eagerly when the captured callbacks fire."""
    with capture(execute=True):
        run = start(project, llm, **kwargs)
    run.refresh_from_db()
    return run


def progress(run: JudgeRun) -> dict:
    return judge_run_progress(run)


# --- The happy path ------------------------------------------------------------------------

@pytest.mark.django_db
def test_every_non_golden_task_gets_labels(project, llm, django_capture_on_commit_callbacks) -> None:
    run = start_and_run(project, llm, django_capture_on_commit_callbacks)

    assert progress(run) == {"done": 5, "failed": 0, "pending": 0, "total": 5, "superseded": 0, "status": "done"}
    assert (run.source, run.prompt_version, run.rubric_version.number) == ("live", "heartbench-judge-v1", 1)
    assert run.started_at is not None and run.finished_at is not None
    assert len(llm.requests) == 5
    assert not JudgeTaskResult.objects.filter(run=run, task__is_golden=True).exists()
    assert JudgeLabel.objects.filter(run=run).count() == 5 * 3
    assert {h["Authorization"] for h in llm.headers} == {f"Bearer {SECRET}"}
    assert {r["model"] for r in llm.requests} == {"fake-judge"}


@pytest.mark.django_db
def test_prompt_has_the_heartbench_structure_and_labels_follow_the_answer(
        project, llm, django_capture_on_commit_callbacks) -> None:
    run = start_and_run(project, llm, django_capture_on_commit_callbacks)

    result = JudgeTaskResult.objects.filter(run=run).select_related("task__response__question").order_by("pk")[0]
    task = result.task
    items = list(task.rubric_version.items.filter(question_ref=task.response.question.external_id)
                 .select_related("dimension").order_by("position"))
    prompt = llm.requests[0]["messages"][0]["content"]
    for item in items:
        line = render_rubric_line({"dimension": item.dimension.name_zh, "score": item.score, "content": item.content})
        assert f"\n{line}\n" in prompt
        assert line.startswith(f"[{item.dimension.name_zh}][{item.score}] ")
    assert task.response.question.final_user_turn in prompt and task.response.text in prompt
    answer = json.loads(default_answer(prompt))
    stored = list(JudgeLabel.objects.filter(run=run, task=task).order_by("rubric_item__position")
                  .values_list("value", flat=True))
    assert stored == answer["detail"]
    assert result.reason == answer["reason"] and result.attempts == 1


# --- Misbehaving endpoints ------------------------------------------------------------------

@pytest.mark.django_db
def test_429_500_garbage_and_slow_are_retried_then_done_or_recorded(
        project, llm, django_capture_on_commit_callbacks) -> None:
    # With 3 HTTP attempts per ask and one re-ask after an unparseable answer:
    llm.reset([
        "429", "ok",              # task 1: rate limited, retried, done
        "500", "500", "500",      # task 2: three server errors, failed
        "garbage", "garbage",     # task 3: unparseable twice, failed
        "slow", "ok",             # task 4: timed out, retried, done
    ])                            # task 5: ok

    run = start_and_run(project, llm, django_capture_on_commit_callbacks)

    counts = progress(run)
    assert counts == {"done": 3, "failed": 2, "pending": 0, "total": 5, "superseded": 0, "status": "failed"}
    assert counts["done"] + counts["failed"] == counts["total"]
    assert llm.served == ["429", "ok", "500", "500", "500", "garbage", "garbage", "slow", "ok", "ok"]
    results = list(JudgeTaskResult.objects.filter(run=run).order_by("pk"))
    assert [r.status for r in results] == ["done", "failed", "failed", "done", "done"]
    assert "gave up after 3 attempts" in results[1].error and "HTTP 500" in results[1].error
    assert "not a JSON object" in results[2].error
    assert all(r.error == "" for r in results if r.status == "done")
    assert JudgeLabel.objects.filter(run=run).count() == 3 * 3
    assert not JudgeLabel.objects.filter(run=run, task_id__in=[results[1].task_id, results[2].task_id]).exists()

    with django_capture_on_commit_callbacks(execute=True):
        judge_run_resume(run=run, now=timezone.now())

    assert progress(run) == {"done": 5, "failed": 0, "pending": 0, "total": 5, "superseded": 0, "status": "done"}
    assert len(llm.requests) == 12  # only the two failed tasks were asked again
    assert [r.attempts for r in JudgeTaskResult.objects.filter(run=run).order_by("pk")] == [1, 2, 2, 1, 1]


@pytest.mark.django_db
def test_a_rejected_key_fails_each_task_without_showing_the_key(
        project, django_capture_on_commit_callbacks) -> None:
    with FakeLLMServer(api_key="the-right-key") as llm:  # echoes the wrong key, as OpenAI does
        run = start_and_run(project, llm, django_capture_on_commit_callbacks)

    assert progress(run)["failed"] == 5
    errors = list(JudgeTaskResult.objects.filter(run=run).values_list("error", flat=True))
    # The status, never the endpoint's answer (which echoed the key).
    assert all("HTTP 401" in e and "Incorrect API key" not in e for e in errors)
    assert set(JudgeTaskResult.objects.filter(run=run).values_list("error_class", "http_status")) == {
        ("http_status", 401)}
    assert not any(SECRET in e for e in errors)
    assert len(llm.requests) == 5  # a 401 is not retried


@pytest.mark.django_db
def test_rate_limit_spaces_requests(project, llm, django_capture_on_commit_callbacks) -> None:
    start_and_run(project, llm, django_capture_on_commit_callbacks, rps=10)

    arrivals = llm.received_at
    assert len(arrivals) == 5
    assert arrivals[-1] - arrivals[0] >= 0.35  # 4 gaps of 1/10 s, minus scheduling noise


# --- Cancel and resume ---------------------------------------------------------------------

def taxonomy_ensure() -> None:
    """Put back the migrated dimension taxonomy, which an earlier transactional test's flush removed."""
    migration = importlib.import_module("rubrics.migrations.0002_taxonomy_and_immutability")
    migration.load_taxonomy(apps, None)


# Committed for real: the fake server's thread cancels the run over its own connection.
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_cancel_mid_way_then_resume_asks_only_unfinished_tasks(pm) -> None:
    taxonomy_ensure()
    project = make_project_with_tasks(n_questions=4, items_per_question=3, models=2, pm=pm)
    asked: list[str] = []
    lock = threading.Lock()

    def answer_then_cancel(prompt: str) -> str:
        # Runs on the fake server's thread: the PM presses "cancel" while answer 3 is on its way.
        with lock:
            asked.append(prompt)
            if len(asked) == 3:
                judge_run_cancel(run=JudgeRun.objects.get(name="run-1"), now=timezone.now())
                connections.close_all()
        return default_answer(prompt)

    with FakeLLMServer(answer_fn=answer_then_cancel) as llm:
        run = start(project, llm)  # committed at once: the eager walker runs inside this call
        assert progress(run) == {"done": 3, "failed": 0, "pending": 5, "total": 8, "superseded": 0,
                                 "status": "cancelled"}
        assert len(llm.requests) == 3

        judge_run_resume(run=run, now=timezone.now())

        assert progress(run) == {"done": 8, "failed": 0, "pending": 0, "total": 8, "superseded": 0, "status": "done"}
        assert len(llm.requests) == 8
    assert JudgeLabel.objects.filter(run=run).count() == 8 * 3
    assert set(JudgeTaskResult.objects.filter(run=run).values_list("attempts", flat=True)) == {1}


@pytest.mark.django_db
def test_cancel_and_resume_refuse_what_makes_no_sense(project, llm, django_capture_on_commit_callbacks) -> None:
    run = start_and_run(project, llm, django_capture_on_commit_callbacks)

    with pytest.raises(DomainError) as cancelled:
        judge_run_cancel(run=run, now=timezone.now())
    with pytest.raises(DomainError) as resumed:
        judge_run_resume(run=run, now=timezone.now())

    assert (cancelled.value.code, resumed.value.code) == ("run_finished", "nothing_to_resume")
    assert len(llm.requests) == 5


@pytest.mark.django_db
def test_cancelling_twice_is_harmless_and_a_cancelled_run_asks_nothing(project, llm) -> None:
    run = start(project, llm)  # no commit in this test transaction: nothing queued yet
    judge_run_cancel(run=run, now=timezone.now())
    judge_run_cancel(run=run, now=timezone.now())

    step = judge_run_step(run_id=run.pk, clock=timezone.now, budget_s=10)

    assert step.state == "stopped"
    assert llm.requests == []
    assert progress(run) == {"done": 0, "failed": 0, "pending": 5, "total": 5, "superseded": 0, "status": "cancelled"}


@pytest.mark.django_db
def test_a_done_or_claimed_task_is_never_asked_again(project, llm, django_capture_on_commit_callbacks) -> None:
    run = start(project, llm)
    first, second = JudgeTaskResult.objects.filter(run=run).order_by("pk")[:2]
    now = timezone.now()
    assert judge_task_execute(result_id=first.pk, now=now).status == "done"
    JudgeTaskResult.objects.filter(pk=second.pk).update(claimed_until=now + timedelta(minutes=5))

    assert judge_task_execute(result_id=first.pk, now=now) is None
    assert judge_task_execute(result_id=second.pk, now=now) is None
    step = judge_run_step(run_id=run.pk, clock=timezone.now, budget_s=10)

    assert step.state == "wait" and step.wait_s > 200  # another worker holds task 2
    assert len(llm.requests) == 4  # task 1 once, tasks 3-5 by the walker; never task 2
    assert progress(run) == {"done": 4, "failed": 0, "pending": 1, "total": 5, "superseded": 0, "status": "running"}


@pytest.mark.django_db
def test_walker_hands_over_when_its_budget_is_spent(project, llm) -> None:
    run = start(project, llm)

    step = judge_run_step(run_id=run.pk, clock=timezone.now, budget_s=0)

    assert step.state == "more"
    assert len(llm.requests) == 1
    assert judge_run_step(run_id=run.pk, clock=timezone.now, budget_s=60).state == "finished"
    assert progress(run)["done"] == 5


# --- Validation and keys --------------------------------------------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize(("overrides", "field"), [
    ({"base_url": "ftp://example.com/v1"}, "base_url"),
    ({"base_url": "not a url"}, "base_url"),
    ({"requests_per_second": 0}, "requests_per_second"),
    ({"requests_per_second": 50.5}, "requests_per_second"),
    ({"requests_per_second": float("nan")}, "requests_per_second"),
    ({"name": ""}, "name"),
    ({"judge_model": ""}, "judge_model"),
    ({"api_key": None, "api_key_env": None}, "api_key"),
    ({"api_key": SECRET, "api_key_env": "OPENAI_API_KEY"}, "api_key"),
    ({"api_key": None, "api_key_env": "DATABASE_URL"}, "api_key_env"),
    ({"api_key": None, "api_key_env": "BAD-NAME"}, "api_key_env"),
])
def test_start_refuses_bad_settings_and_writes_nothing(project, overrides, field) -> None:
    kwargs = {"project": project, "name": "r", "base_url": "http://127.0.0.1:9/v1", "judge_model": "m",
              "api_key": SECRET, "api_key_env": None, "requests_per_second": 2, "created_by": None,
              **overrides}

    with pytest.raises(DomainError) as info:
        judge_run_start(**kwargs)

    assert field in {e["field"] for e in info.value.errors}
    assert SECRET not in str(info.value.message) + json.dumps(info.value.errors)
    assert JudgeRun.objects.count() == 0


@pytest.mark.django_db
def test_run_names_are_unique_per_project(project, llm) -> None:
    start(project, llm)

    with pytest.raises(DomainError) as info:
        start(project, llm)

    assert info.value.errors[0]["code"] == "name_taken"
    assert JudgeRun.objects.count() == 1


@pytest.mark.django_db
def test_key_from_an_allowed_environment_variable(project, llm, monkeypatch, admin_user,
                                                  django_capture_on_commit_callbacks) -> None:
    monkeypatch.setenv("RUBRICA_JUDGE_KEY_TEST", "sk-from-the-environment")
    JudgeKeyGrant.objects.create(project=project, env_name="RUBRICA_JUDGE_KEY_TEST", granted_by=admin_user)

    run = start_and_run(project, llm, django_capture_on_commit_callbacks, api_key=None,
                        api_key_env="RUBRICA_JUDGE_KEY_TEST", created_by=admin_user)

    assert run.api_key_encrypted == "" and run.api_key_env == "RUBRICA_JUDGE_KEY_TEST"
    assert progress(run)["done"] == 5
    assert {h["Authorization"] for h in llm.headers} == {"Bearer sk-from-the-environment"}


@pytest.mark.django_db
def test_an_unset_environment_variable_fails_every_task_with_a_clear_error(
        project, llm, monkeypatch, admin_user, django_capture_on_commit_callbacks) -> None:
    monkeypatch.delenv("RUBRICA_JUDGE_KEY_MISSING", raising=False)
    JudgeKeyGrant.objects.create(project=project, env_name="RUBRICA_JUDGE_KEY_MISSING")

    run = start_and_run(project, llm, django_capture_on_commit_callbacks, api_key=None,
                        api_key_env="RUBRICA_JUDGE_KEY_MISSING", created_by=admin_user)

    assert progress(run) == {"done": 0, "failed": 5, "pending": 0, "total": 5, "superseded": 0, "status": "failed"}
    assert set(JudgeTaskResult.objects.filter(run=run).values_list("error", flat=True)) == {
        "the environment variable RUBRICA_JUDGE_KEY_MISSING is not set on the worker"}
    assert llm.requests == []


def test_key_encryption_survives_a_rotation_of_its_own_key_with_fallbacks(settings) -> None:
    token = api_key_encrypt(SECRET)
    assert SECRET not in token and api_key_decrypt(token) == SECRET

    # SECRET_KEY rotates on its own: stored judge keys do not depend on it.
    settings.SECRET_KEY = "a-brand-new-secret-key-for-rubrica-tests-" + "x" * 20
    assert api_key_decrypt(token) == SECRET
    old = settings.RUBRICA_SECRETS_KEY
    settings.RUBRICA_SECRETS_KEY = "a-brand-new-secrets-key-for-rubrica-tests-" + "y" * 20
    settings.RUBRICA_SECRETS_KEY_FALLBACKS = [old]
    assert api_key_decrypt(token) == SECRET

    settings.RUBRICA_SECRETS_KEY_FALLBACKS = []
    with pytest.raises(JudgeKeyError) as info:
        api_key_decrypt(token)
    assert SECRET not in str(info.value)


def test_a_key_stored_before_the_secrets_key_existed_still_decrypts(settings) -> None:
    from annotation.judging.secrets import _fernet

    legacy = _fernet(settings.SECRET_KEY).encrypt(SECRET.encode()).decode()  # how keys were stored before

    assert api_key_decrypt(legacy) == SECRET
    assert api_key_decrypt(api_key_encrypt(SECRET)) == SECRET
    assert _fernet(settings.RUBRICA_SECRETS_KEY).decrypt(api_key_encrypt(SECRET).encode()).decode() == SECRET


# --- The key stays secret everywhere ----------------------------------------------------------

def every_row_as_json() -> str:
    return "".join(serializers.serialize("json", model._default_manager.all()) for model in apps.get_models())


@pytest.mark.django_db
def test_api_key_never_appears_in_db_pages_api_or_logs(pm, project, llm, caplog,
                                                       django_capture_on_commit_callbacks) -> None:
    caplog.set_level("DEBUG")
    client = Client()
    client.force_login(pm)
    llm.reset(["500", "500", "500"])  # one failure, so the failures table renders too
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/projects/{project.pk}/judge-runs/", {
            "name": "secret-run", "base_url": llm.base_url, "judge_model": "fake-judge", "api_key": SECRET,
            "api_key_env": "", "requests_per_second": "50"})
    run = JudgeRun.objects.get(name="secret-run")
    assert response.status_code == 302 and response["Location"] == f"/judge-runs/{run.pk}/"
    assert run.api_key_encrypted and SECRET not in run.api_key_encrypted

    pages = [
        client.get(f"/projects/{project.pk}/judge-runs/"),
        client.get(f"/judge-runs/{run.pk}/"),
        client.get(f"/judge-runs/{run.pk}/", HTTP_HX_REQUEST="true"),
        client.get(f"/api/v1/judge-runs/{run.pk}/"),
        # A refused form comes back without the key it was given.
        client.post(f"/projects/{project.pk}/judge-runs/", {
            "name": "secret-run", "base_url": "nope", "judge_model": "m", "api_key": SECRET,
            "requests_per_second": "2"}),
    ]
    assert [p.status_code for p in pages] == [200, 200, 200, 200, 422]
    assert "gave up after 3 attempts" in pages[1].content.decode()
    for page in pages:
        assert SECRET not in page.content.decode()
    assert SECRET not in every_row_as_json()
    assert SECRET not in caplog.text


# --- Pages ---------------------------------------------------------------------------------

@pytest.fixture
def pm_client(pm) -> Client:
    client = Client()
    client.force_login(pm)
    client.cookies.load({"django_language": "en"})
    return client


@pytest.mark.django_db
def test_runs_page_full_and_fragment(pm_client, project, llm, django_capture_on_commit_callbacks) -> None:
    start_and_run(project, llm, django_capture_on_commit_callbacks, name="nightly")

    full = pm_client.get(f"/projects/{project.pk}/judge-runs/")
    fragment = pm_client.get(f"/projects/{project.pk}/judge-runs/", HTTP_HX_REQUEST="true")

    assert full.status_code == fragment.status_code == 200
    html = full.content.decode()
    assert "<html" in html and "nightly" in html and 'type="password"' in html
    # A PM types a key in; the environment is for admins.
    assert 'name="api_key_env"' not in html and 'name="requests_per_second"' in html
    assert "<html" not in fragment.content.decode() and "nightly" in fragment.content.decode()
    assert 'id="judge-start"' not in fragment.content.decode()


@pytest.mark.django_db
def test_run_page_polls_while_active_and_stops_when_finished(pm_client, project, llm,
                                                             django_capture_on_commit_callbacks) -> None:
    run = start(project, llm)  # not committed: still pending, nothing asked yet

    active = pm_client.get(f"/judge-runs/{run.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 1s"' in active and 'id="judge-progress"' in active and "<html" not in active
    assert '<progress id="judge-progress-bar" max="5" value="0"' in active
    assert "/cancel/" in active and "/resume/" not in active

    judge_run_step(run_id=run.pk, clock=timezone.now, budget_s=60)
    finished = pm_client.get(f"/judge-runs/{run.pk}/").content.decode()

    assert "<html" in finished and 'hx-trigger="every 1s"' not in finished
    assert '<progress id="judge-progress-bar" max="5" value="5"' in finished
    assert 'id="judge-done">5<' in finished and 'id="judge-remaining">0<' in finished
    assert "/cancel/" not in finished and "/resume/" not in finished
    assert " style=" not in finished and "<script>" not in finished  # strict CSP: no inline style or JS


@pytest.mark.django_db
def test_cancel_and_resume_buttons_answer_htmx_with_the_fragment(pm_client, project, llm,
                                                                 django_capture_on_commit_callbacks) -> None:
    run = start(project, llm)

    cancelled = pm_client.post(f"/judge-runs/{run.pk}/cancel/", HTTP_HX_REQUEST="true")
    assert cancelled.status_code == 200
    html = cancelled.content.decode()
    assert 'data-status="cancelled"' in html and "/resume/" in html and 'hx-trigger="every 1s"' not in html

    with django_capture_on_commit_callbacks(execute=True):
        resumed = pm_client.post(f"/judge-runs/{run.pk}/resume/")
    assert resumed.status_code == 302
    assert progress(run)["done"] == 5

    again = pm_client.post(f"/judge-runs/{run.pk}/resume/", HTTP_HX_REQUEST="true")
    assert again.status_code == 422 and "nothing to resume" in again.content.decode()


@pytest.mark.django_db
def test_start_form_shows_field_errors(pm_client, project) -> None:
    response = pm_client.post(f"/projects/{project.pk}/judge-runs/", {
        "name": "r", "base_url": "ftp://x", "judge_model": "m", "api_key": "", "api_key_env": "",
        "requests_per_second": "80"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 422
    html = response.content.decode()
    assert 'id="judge-start"' in html and "<html" not in html
    assert "Enter an http(s) URL such as https://api.openai.com/v1." in html
    assert "Enter a rate above 0 and at most 50 requests per second." in html
    assert "Give either an API key or the name of an environment variable holding it." in html
    assert JudgeRun.objects.count() == 0


@pytest.mark.django_db
def test_htmx_start_redirects_the_browser_to_the_run(pm_client, project, llm,
                                                     django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = pm_client.post(f"/projects/{project.pk}/judge-runs/", {
            "name": "r", "base_url": llm.base_url, "judge_model": "m", "api_key": SECRET,
            "requests_per_second": "50"}, HTTP_HX_REQUEST="true")

    run = JudgeRun.objects.get()
    assert response.status_code == 200 and response["HX-Redirect"] == f"/judge-runs/{run.pk}/"
    assert progress(run)["status"] == "done"


@pytest.mark.django_db
def test_labels_import_page_shows_line_errors_and_success(pm_client, project) -> None:
    bad = SimpleUploadedFile("j.jsonl", b'{"question_id": "q0", "model": "model-0", "detail": [1, 0]}\n')
    refused = pm_client.post(f"/projects/{project.pk}/judge-runs/import/", {"file": bad, "run": "imp"},
                             HTTP_HX_REQUEST="true")
    assert refused.status_code == 422
    assert "expected 3 values (one per rubric item), got 2" in refused.content.decode()

    good = SimpleUploadedFile("j.jsonl", b'{"question_id": "q0", "model": "model-0", "detail": [1, 0, 1]}\n')
    done = pm_client.post(f"/projects/{project.pk}/judge-runs/import/", {"file": good, "run": "imp"},
                          HTTP_HX_REQUEST="true")
    html = done.content.decode()
    assert done.status_code == 200 and 'hx-swap-oob="true"' in html and "imp" in html
    assert JudgeLabel.objects.count() == 3

    again = SimpleUploadedFile("j.jsonl", b'{"question_id": "q0", "model": "model-0", "detail": [1, 0, 1]}\n')
    full = pm_client.post(f"/projects/{project.pk}/judge-runs/import/", {"file": again, "run": "imp"})
    assert full.status_code == 200 and "<html" in full.content.decode()
    assert "0 judged responses (0 labels) added" in full.content.decode()
    assert JudgeLabel.objects.count() == 3


@pytest.mark.django_db
def test_pages_and_api_are_404_for_another_pm_and_for_experts(project, llm, expert) -> None:
    run = start(project, llm)
    other_pm = PMFactory()
    make_project_with_tasks(pm=other_pm)
    for user in (other_pm, expert):
        client = Client()
        client.force_login(user)
        assert client.get(f"/projects/{project.pk}/judge-runs/").status_code == 404
        assert client.get(f"/judge-runs/{run.pk}/").status_code == 404
        assert client.post(f"/judge-runs/{run.pk}/cancel/").status_code == 404
        assert client.get(f"/api/v1/judge-runs/{run.pk}/").status_code == 404
    assert JudgeRun.objects.get().status == "pending"


@pytest.mark.django_db
def test_progress_api_for_the_projects_pm(api, pm, project, llm, django_capture_on_commit_callbacks) -> None:
    run = start_and_run(project, llm, django_capture_on_commit_callbacks)
    api.force_authenticate(pm)

    body = api.get(f"/api/v1/judge-runs/{run.pk}/").json()

    assert {k: body[k] for k in ("id", "name", "status", "done", "failed", "pending", "total")} == {
        "id": run.pk, "name": "run-1", "status": "done", "done": 5, "failed": 0, "pending": 0, "total": 5}
    assert not {"api_key", "api_key_encrypted", "api_key_env", "base_url"} & set(body)


# --- Rate limit shared through Redis ------------------------------------------------------------

def test_redis_rate_limiter_spaces_requests_across_processes() -> None:
    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15"
    key = f"rubrica:test:judge-rps:{os.getpid()}:{time.monotonic_ns()}"
    # Two limiters stand for two worker processes sharing one run's budget of 20 requests/s.
    first = RedisRateLimiter(url=url, key=key, rps=20)
    second = RedisRateLimiter(url=url, key=key, rps=20)

    started = time.monotonic()
    for _ in range(4):
        first.acquire()
        second.acquire()
    elapsed = time.monotonic() - started

    assert elapsed >= 7 / 20 - 0.01  # 8 requests need 7 gaps of 1/20 s, whichever process sends them


def test_process_clients_are_shared_per_run(settings) -> None:
    run = JudgeRun(pk=10_001, base_url="http://127.0.0.1:9/v1", judge_model="m",
                   api_key_encrypted=api_key_encrypt(SECRET), requests_per_second=5)

    first = walker._process_client(run)
    again = walker._process_client(run)
    run.requests_per_second = 6
    changed = walker._process_client(run)

    assert first is again and changed is not first
    assert SECRET not in repr(first.client)


# --- Runs asked with a judge configuration version --------------------------------------------

CUSTOM_TEMPLATE = ("你是严格的评审。\n对话：\n{dialogue}\n回复：\n{response}\n标准：\n{rubric}\nrubric条数：\n{count}\n"
                   '只输出JSON：{{"reason": "...", "detail": [0或1 × {count}]}}')


@pytest.mark.django_db
def test_a_run_with_a_configuration_version_sends_its_prompt_temperature_and_parameters(
        project, llm, pm, django_capture_on_commit_callbacks) -> None:
    from annotation.judging.configs import judge_config_create

    version = judge_config_create(project=project, name="strict", prompt_template=CUSTOM_TEMPLATE,
                                  judge_model="fake-judge", temperature=0.7, params={"max_tokens": 300},
                                  created_by=pm, now=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        run = judge_run_start(project=project, name="strict-1", base_url=llm.base_url, judge_model="",
                              api_key=SECRET, api_key_env=None, requests_per_second=50, created_by=pm,
                              config_version=str(version.pk))
    run.refresh_from_db()

    assert run.config_version_id == version.pk and run.judge_model == "fake-judge"
    assert progress(run)["done"] == 5
    bodies = llm.requests
    assert {(b["temperature"], b["max_tokens"], b["model"]) for b in bodies} == {(0.7, 300, "fake-judge")}
    prompt = bodies[0]["messages"][0]["content"]
    assert prompt.startswith("你是严格的评审。\n对话：\n") and "rubric条数：\n3\n" in prompt
    assert prompt.endswith('只输出JSON：{"reason": "...", "detail": [0或1 × 3]}')


@pytest.mark.django_db
def test_a_run_without_a_version_keeps_the_built_in_prompt_at_temperature_0(
        project, llm, django_capture_on_commit_callbacks) -> None:
    run = start_and_run(project, llm, django_capture_on_commit_callbacks)

    assert {b["temperature"] for b in llm.requests} == {0.0}
    assert run.config_version.temperature == 0 and run.config_version.params == {}
    assert llm.requests[0]["messages"][0]["content"].startswith("你是")


@pytest.mark.django_db
def test_a_version_of_another_project_or_one_that_contradicts_the_form_is_refused(project, llm, pm) -> None:
    from annotation.judging.configs import judge_config_create

    other = make_project_with_tasks(n_questions=1, items_per_question=1, pm=pm)
    theirs = judge_config_create(project=other, name="theirs", prompt_template=CUSTOM_TEMPLATE, created_by=pm,
                                 now=timezone.now())
    ours = judge_config_create(project=project, name="ours", prompt_template=CUSTOM_TEMPLATE,
                               judge_model="gpt-judge", created_by=pm, now=timezone.now())
    cases = [(theirs.pk, "fake-judge", "config_version", "config_version_unknown"),
             ("not-a-number", "fake-judge", "config_version", "config_version_unknown"),
             (ours.pk, "another-model", "judge_model", "config_version_differs")]
    for version, model, field, code in cases:
        with pytest.raises(DomainError) as caught:
            judge_run_start(project=project, name="x", base_url=llm.base_url, judge_model=model, api_key=SECRET,
                            api_key_env=None, requests_per_second=5, created_by=pm, config_version=version)
        assert [(e["field"], e["code"]) for e in caught.value.errors] == [(field, code)]
    assert not JudgeRun.objects.filter(project=project).exists()
