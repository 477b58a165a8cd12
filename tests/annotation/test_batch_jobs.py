"""Large batch operations go to a worker with progress; every batch applies once per confirmation,
whole or not at all."""
import re

import pytest
from django.utils import timezone

from annotation.assignment.manual import assignments_create_by_hand
from annotation.models import AuditEntry, BatchJob, Task
from annotation.services import project_add_member
from annotation.workload import batch, jobs
from annotation.workload.batch import TaskFilter
from annotation.workload.jobs import BatchRequest, batch_job_queue, batch_job_run
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(client):
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = "en"
    return client


@pytest.fixture
def pm_project(settings):
    settings.BATCH_SYNC_MAX_TASKS = 2
    pm = PMFactory()
    return pm, make_project_with_tasks(n_questions=5, pm=pm, overlap=2)


def _token(page) -> str:
    found = re.search(r'name="token" value="([0-9a-f]{32})"', page.content.decode())
    assert found, "the confirmation carries a token"
    return found.group(1)


def test_a_large_batch_is_previewed_then_runs_as_a_job_whose_page_shows_the_summary(
        client, pm_project, monkeypatch, django_capture_on_commit_callbacks):
    pm, project = pm_project
    client.force_login(pm)
    url = f"/projects/{project.pk}/batch/tasks/"
    monkeypatch.setattr(batch, "CHUNK", 2)
    seen = []
    real_set = jobs.cache.set
    monkeypatch.setattr(jobs.cache, "set", lambda key, value, *a: (seen.append(value), real_set(key, value, *a)))

    asked = client.post(url, {"op": "overlap", "value": "3"})
    assert "5 tasks match the filter." in asked.content.decode()
    assert "applied in the background" in asked.content.decode()
    assert Task.objects.filter(overlap=3).count() == 0
    with django_capture_on_commit_callbacks(execute=True):
        confirmed = client.post(url, {"op": "overlap", "value": "3", "confirmed": "yes", "token": _token(asked)})

    job = BatchJob.objects.get()
    assert confirmed.status_code == 302 and confirmed.url == f"/projects/{project.pk}/batch/jobs/{job.pk}/"
    assert (job.status, job.total, job.changed) == ("done", 5, 5)
    assert seen == [2, 4, 5]  # progress after each slice of tasks
    assert set(Task.objects.values_list("overlap", flat=True)) == {3}
    page = client.get(confirmed.url).content.decode()
    assert "Done: 5 tasks changed." in page
    assert 'hx-trigger="every 1s"' not in page
    entry = AuditEntry.objects.get(action="batch.overlap")
    assert (entry.actor_id, entry.project_id, entry.request_id) == (pm.pk, project.pk, confirmed["X-Request-ID"])
    assert entry.object_ids == sorted(Task.objects.values_list("pk", flat=True))


def test_a_queued_job_page_polls_and_shows_how_far_the_worker_is(client, pm_project):
    pm, project = pm_project
    client.force_login(pm)
    job, _ = batch_job_queue(project=project, by=pm, request=BatchRequest(op="priority", task_filter=TaskFilter(),
                                                                          value="4"),
                             token="t1", total=5, now=timezone.now())  # on_commit never runs here: still queued
    jobs.cache.set(jobs._progress_key(job.pk), 2)

    polled = client.get(f"/projects/{project.pk}/batch/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()

    assert 'hx-trigger="every 1s"' in polled
    assert "2 of 5 tasks" in polled
    assert 'value="2"' in polled


def test_a_failing_large_batch_changes_nothing_and_says_why(client, pm_project, monkeypatch,
                                                             django_capture_on_commit_callbacks):
    pm, project = pm_project
    monkeypatch.setattr(batch, "CHUNK", 2)
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    fourth = list(Task.objects.order_by("pk").values_list("pk", flat=True))[3]
    assignments_create_by_hand(project=project, task_ids=[fourth], experts=[expert], by=None, now=timezone.now())
    client.force_login(pm)
    url = f"/projects/{project.pk}/batch/tasks/"
    asked = client.post(url, {"op": "golden"})
    before = AuditEntry.objects.count()

    with django_capture_on_commit_callbacks(execute=True):
        confirmed = client.post(url, {"op": "golden", "confirmed": "yes", "token": _token(asked)})

    job = BatchJob.objects.get()
    assert (job.status, job.error_code) == ("failed", "batch_golden_has_work")
    # The first slice (two tasks) was marked before the fourth task refused: rolled back with it.
    assert not Task.objects.filter(is_golden=True).exists()
    assert AuditEntry.objects.count() == before
    page = client.get(confirmed.url).content.decode()
    assert f"Nothing was changed: Task {fourth} holds regular work" in page


def test_a_double_confirm_of_a_large_batch_queues_and_runs_it_once(client, pm_project,
                                                                     django_capture_on_commit_callbacks):
    pm, project = pm_project
    client.force_login(pm)
    url = f"/projects/{project.pk}/batch/tasks/"
    token = _token(client.post(url, {"op": "priority", "value": "7"}))
    form = {"op": "priority", "value": "7", "confirmed": "yes", "token": token}

    with django_capture_on_commit_callbacks(execute=True) as sent:
        first = client.post(url, form)
        second = client.post(url, form)

    assert len(sent) == 1
    assert first.url == second.url
    assert BatchJob.objects.count() == 1
    assert AuditEntry.objects.filter(action="task.priority").count() == 1
    # A second delivery of the worker's task finds the job done and changes nothing.
    assert batch_job_run(job_id=BatchJob.objects.get().pk) == "done"
    assert AuditEntry.objects.filter(action="task.priority").count() == 1


def test_a_double_confirm_of_a_small_batch_applies_it_once(client, pm_project, settings):
    settings.BATCH_SYNC_MAX_TASKS = 100
    pm, project = pm_project
    client.force_login(pm)
    url = f"/projects/{project.pk}/batch/tasks/"
    token = _token(client.post(url, {"op": "overlap", "value": "3"}))
    form = {"op": "overlap", "value": "3", "confirmed": "yes", "token": token}

    first = client.post(url, form, follow=True).content.decode()
    Task.objects.update(overlap=2)  # were it applied again, the overlap would be raised again
    second = client.post(url, form, follow=True).content.decode()

    assert "Done: 5 tasks changed." in first
    assert "already applied" in second
    assert set(Task.objects.values_list("overlap", flat=True)) == {2}
    assert AuditEntry.objects.filter(action="batch.overlap").count() == 1
    assert BatchJob.objects.get().status == "done"
