"""A judge run cannot be turned against the server: each way issue 15 found, tried again.

A PM chooses a run's URL, so the judge client goes through the guarded outbound client:
loopback, `localhost`, link-local, private addresses, a redirect to loopback and a name
that resolves to loopback are refused before anything reaches them; a PM cannot name
the operator's OPENAI_API_KEY (admins can, on a project granted the variable); and the
run page and API show a failure's error class and HTTP status, never what the target
answered. Only the loopback fakes started here are ever contacted.
"""
import json
from collections.abc import Iterator

import pytest
from django.contrib.admin.sites import site
from django.test import Client, RequestFactory

from annotation.judging.client import ChatClient, JudgeRequestError
from annotation.judging.runs import judge_run_progress, judge_run_start
from annotation.models import JudgeKeyGrant, JudgeRun, JudgeTaskResult, Project
from config.celery import app as celery_app
from core import outbound
from core.errors import DomainError
from tests.factories import make_project_with_tasks
from tests.support.fake_llm import FakeLLMServer
from tests.support.receiver import Receiver

SECRET = "sk-typed-in-by-the-pm-0123456789"
LEAK = "db_password=hunter2 INTERNAL-ONLY"


@pytest.fixture(autouse=True)
def fast_judge(settings, monkeypatch) -> None:
    settings.RUBRICA_JUDGE_TIMEOUT_S = 1.0
    settings.RUBRICA_JUDGE_MAX_RETRIES = 1
    settings.RUBRICA_JUDGE_BACKOFF_BASE_S = 0.01
    settings.RUBRICA_JUDGE_BACKOFF_MAX_S = 0.02
    settings.REDIS_URL = ""
    # Nobody allowed: the guard judges every target by its addresses.
    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = []
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def project(pm) -> Project:
    return make_project_with_tasks(n_questions=2, items_per_question=2, pm=pm)


def client_for(url: str, **options) -> ChatClient:
    return ChatClient(url, SECRET, "m", timeout_s=1, max_retries=2, backoff_base_s=0.001, backoff_max_s=0.001,
                      rps=None, **options)


# --- The client refuses, and says so without retrying ------------------------------------------

@pytest.mark.parametrize("url", [
    "http://127.0.0.1:{port}/v1",                 # loopback
    "http://localhost:{port}/v1",                 # a loopback name
    "https://169.254.169.254/latest",             # link-local: the cloud metadata address
    "https://10.0.0.5/v1",                        # private
    "https://192.168.1.20/v1",                    # private
    "https://[::1]:{port}/v1",                    # IPv6 loopback
])
def test_private_and_loopback_targets_are_refused_before_anything_is_sent(llm, url) -> None:
    client = client_for(url.format(port=llm.port))

    with pytest.raises(JudgeRequestError) as refused:
        client.complete("p")

    assert (refused.value.error_class, refused.value.attempts, refused.value.status) == ("refused", 1, None)
    assert llm.requests == []


def test_a_name_resolving_to_loopback_is_refused(llm, monkeypatch) -> None:
    lookups: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    # The system resolver itself answers with loopback, as a hostile DNS record would.
    monkeypatch.setattr(outbound, "_system_resolve", resolve)
    client = client_for(f"https://judge.attacker.example:{llm.port}/v1")

    with pytest.raises(JudgeRequestError) as refused:
        client.complete("p")

    assert refused.value.error_class == "refused" and lookups == ["judge.attacker.example"]
    assert llm.requests == []


def test_a_redirect_to_loopback_is_refused_after_the_allowed_hop(receiver, settings) -> None:
    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
    receiver.responses = [(307, {"Location": "http://localhost:8000/admin/"})]

    with pytest.raises(JudgeRequestError) as refused:
        client_for(receiver.url("/v1")).complete("p")

    assert refused.value.error_class == "refused"
    assert [path for _, path, _, _ in receiver.received] == ["/v1/chat/completions"]


@pytest.mark.parametrize("status", [400, 403, 500])
def test_an_error_body_never_reaches_the_error_message(receiver, settings, caplog, status) -> None:
    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
    receiver.responses = [(status, {"Content-Type": "text/plain"})]
    receiver.body = f"{LEAK} echo {SECRET}".encode()

    with caplog.at_level("WARNING", logger="annotation.judging.client"), pytest.raises(JudgeRequestError) as info:
        client_for(receiver.url("/v1")).complete("p")

    assert (info.value.error_class, info.value.status) == ("http_status", status)
    assert f"HTTP {status}" in str(info.value)
    assert "hunter2" not in str(info.value) and "hunter2" not in repr(info.value)
    # The log keeps a short excerpt for the operator, with the key blacked out.
    excerpts = [record.excerpt for record in caplog.records if hasattr(record, "excerpt")]
    assert excerpts and all("hunter2" in e and SECRET not in e for e in excerpts)


# --- A run: refused at the start where possible, and failures shown without the body ----------

@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://localhost/v1", "https://169.254.169.254/",
                                 "https://10.1.2.3/v1", "https://[fe80::1]/v1"])
def test_a_pm_cannot_start_a_run_against_a_private_target(project, pm, url) -> None:
    with pytest.raises(DomainError) as refused:
        judge_run_start(project=project, name="r", base_url=url, judge_model="m", api_key=SECRET, api_key_env=None,
                        requests_per_second=1, created_by=pm)

    assert {(e["field"], e["code"]) for e in refused.value.errors} == {("base_url", "url_not_allowed")}
    assert JudgeRun.objects.count() == 0


@pytest.mark.django_db
def test_a_run_whose_name_resolves_to_loopback_fails_with_the_class_and_no_request(
        project, pm, llm, monkeypatch, django_capture_on_commit_callbacks) -> None:
    monkeypatch.setattr(outbound, "_system_resolve", lambda host, port: ["127.0.0.1"])

    with django_capture_on_commit_callbacks(execute=True):
        run = judge_run_start(project=project, name="r", base_url=f"https://llm.rebind.example:{llm.port}/v1",
                              judge_model="m", api_key=SECRET, api_key_env=None, requests_per_second=50,
                              created_by=pm)

    assert judge_run_progress(run)["failed"] == 2
    assert set(JudgeTaskResult.objects.filter(run=run).values_list("error_class", "http_status")) == {
        ("refused", None)}
    assert llm.requests == []


@pytest.mark.django_db
def test_the_run_page_and_api_show_class_and_status_never_the_body(
        project, pm, api, receiver, settings, django_capture_on_commit_callbacks) -> None:
    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
    receiver.responses = [(403, {"Content-Type": "application/json"})]
    receiver.body = json.dumps({"error": LEAK}).encode()
    with django_capture_on_commit_callbacks(execute=True):
        run = judge_run_start(project=project, name="r", base_url=receiver.url("/v1"), judge_model="m",
                              api_key=SECRET, api_key_env=None, requests_per_second=50, created_by=pm)
    page = Client()
    page.force_login(pm)
    api.force_authenticate(pm)

    html = page.get(f"/judge-runs/{run.pk}/").content.decode()
    body = api.get(f"/api/v1/judge-runs/{run.pk}/").json()

    assert "http_status" in html and "403" in html and "hunter2" not in html
    assert body["failed"] == 2 and "hunter2" not in json.dumps(body)
    assert {(f["error_class"], f["http_status"]) for f in body["failures"]} == {("http_status", 403)}
    assert all("HTTP 403" in f["error"] for f in body["failures"])


# --- Keys from the environment are for admins, on a granted project ------------------------------

@pytest.mark.django_db
def test_a_pm_naming_openai_api_key_is_refused_in_the_service_the_page_and_the_api(
        project, pm, api, llm, monkeypatch, settings) -> None:
    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-operators-own")
    # Even a grant for the project does not open it to a PM.
    JudgeKeyGrant.objects.create(project=project, env_name="OPENAI_API_KEY")
    fields = {"name": "r", "base_url": llm.base_url, "judge_model": "m", "api_key_env": "OPENAI_API_KEY",
              "requests_per_second": 1}

    with pytest.raises(DomainError) as refused:
        judge_run_start(project=project, api_key=None, created_by=pm, **fields)
    page = Client()
    page.force_login(pm)
    form = page.get(f"/projects/{project.pk}/judge-runs/").content.decode()
    posted = page.post(f"/projects/{project.pk}/judge-runs/", {**fields, "api_key": ""}, HTTP_ACCEPT_LANGUAGE="en")
    api.force_authenticate(pm)
    answered = api.post(f"/api/v1/projects/{project.pk}/judge-runs/", fields, format="json")

    assert [e["code"] for e in refused.value.errors] == ["key_env_admin_only"]
    assert 'name="api_key_env"' not in form  # not offered to a PM at all
    assert posted.status_code == 422 and "for admins" in posted.content.decode()
    assert answered.status_code == 400 and answered.json()["code"] == "invalid_run"
    assert [e["code"] for e in answered.json()["errors"]] == ["key_env_admin_only"]
    assert JudgeRun.objects.count() == 0 and llm.requests == []


@pytest.mark.django_db
def test_an_admin_uses_an_environment_key_only_on_a_granted_project(
        project, admin_user, api, llm, monkeypatch, settings, django_capture_on_commit_callbacks) -> None:
    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-operators-own")
    api.force_authenticate(admin_user)
    fields = {"name": "r", "base_url": llm.base_url, "judge_model": "m", "api_key_env": "OPENAI_API_KEY",
              "requests_per_second": 50}

    ungranted = api.post(f"/api/v1/projects/{project.pk}/judge-runs/", fields, format="json")
    JudgeKeyGrant.objects.create(project=project, env_name="OPENAI_API_KEY", granted_by=admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        started = api.post(f"/api/v1/projects/{project.pk}/judge-runs/", fields, format="json")

    assert [e["code"] for e in ungranted.json()["errors"]] == ["key_env_not_granted"]
    assert started.status_code == 201 and started.json()["name"] == "r"
    assert {h["Authorization"] for h in llm.headers} == {"Bearer sk-the-operators-own"}
    assert judge_run_progress(JudgeRun.objects.get())["done"] == 2


@pytest.mark.django_db
def test_revoking_the_grant_stops_a_run_at_its_next_request(
        project, admin_user, llm, monkeypatch, settings, django_capture_on_commit_callbacks) -> None:
    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
    monkeypatch.setenv("RUBRICA_JUDGE_KEY_A", "sk-a")
    grant = JudgeKeyGrant.objects.create(project=project, env_name="RUBRICA_JUDGE_KEY_A")
    with django_capture_on_commit_callbacks(execute=False) as queued:
        run = judge_run_start(project=project, name="r", base_url=llm.base_url, judge_model="m", api_key=None,
                              api_key_env="RUBRICA_JUDGE_KEY_A", requests_per_second=50, created_by=admin_user)
    grant.delete()
    for callback in queued:
        callback()

    assert set(JudgeTaskResult.objects.filter(run=run).values_list("error_class", flat=True)) == {"key"}
    assert llm.requests == []


@pytest.mark.django_db
def test_the_grant_admin_is_for_admins_and_checks_the_operators_list(project, admin_user, pm, settings) -> None:
    pm.is_staff = True
    pm.save(update_fields=["is_staff"])
    model_admin = site._registry[JudgeKeyGrant]
    request = RequestFactory().get("/admin/")
    request.user = pm
    form_class = model_admin.get_form(RequestFactory().get("/admin/"), None)

    refused = form_class(data={"project": project.pk, "env_name": "DATABASE_URL"})
    accepted = form_class(data={"project": project.pk, "env_name": "OPENAI_API_KEY"})

    assert not model_admin.has_view_permission(request) and not model_admin.has_add_permission(request)
    request.user = admin_user
    assert model_admin.has_add_permission(request)
    assert not refused.is_valid() and "env_name" in refused.errors
    assert accepted.is_valid()


def test_granting_and_revoking_an_environment_key_in_the_admin_is_audited(client, project, admin_user) -> None:
    from annotation.models import AuditEntry

    client.force_login(admin_user)
    added = client.post("/admin/annotation/judgekeygrant/add/",
                        {"project": project.pk, "env_name": "OPENAI_API_KEY"})
    grant = JudgeKeyGrant.objects.get(project=project)
    removed = client.post(f"/admin/annotation/judgekeygrant/{grant.pk}/delete/", {"post": "yes"})

    assert (added.status_code, removed.status_code) == (302, 302)
    assert not JudgeKeyGrant.objects.exists()
    granted, revoked = AuditEntry.objects.filter(action="permission.change").order_by("id")
    assert (granted.actor_id, granted.project_id) == (admin_user.pk, project.pk)
    assert granted.details["changes"]["env_name"]["new"] == "OPENAI_API_KEY"
    assert (revoked.project_id, revoked.details["deleted"]) == (project.pk, True)
