"""An export reads one state of the database, says how it ended, and its leftovers are swept.

- while an export runs, a PM's change to a task it has not reached yet does not show in it
  (and, read without the snapshot, the same change does: the test can tell);
- the database snapshot is recorded on the export;
- a streamed download the client abandons is marked failed, not left "running";
- the sweep deletes expired files and orphaned partial files, fails what stopped silently,
  leaves live work alone, and does nothing the second time.
"""
import re
import threading
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import connection, connections, transaction
from django.utils import timezone

from annotation.exchange.export import ExportFilters, consensus_rows
from annotation.exchange.export_jobs import (
    ABANDONED,
    INTERRUPTED,
    export_job_build,
    export_stream_start,
    exports_sweep,
)
from annotation.exchange.snapshot import consistent_read, export_progress_set
from annotation.models import ExportJob, ItemConsensus, Label
from tests.annotation.test_export_dataset import plant, tasks_of
from tests.factories import ExpertFactory, make_project_with_tasks

SNAPSHOT = re.compile(r"^\d+:\d+:[\d,]*$")


@pytest.fixture
def experts(db):
    return [ExpertFactory() for _ in range(3)]


@pytest.fixture
def project(pm, experts):
    project = make_project_with_tasks(n_questions=3, items_per_question=3, models=1, pm=pm)
    plant(tasks_of(project), experts)
    return project


def _read_while_changed(project, *, note: str, snapshot: bool) -> list[dict]:
    """Read the rows one task at a time; after the first task, another connection changes the last task."""
    last = tasks_of(project)[-1]

    def change() -> None:
        try:
            Label.objects.filter(task=last).update(note=note)
            ItemConsensus.objects.filter(task=last).update(zone="tied", majority=None, provenance="")
        finally:
            connections.close_all()

    with consistent_read() if snapshot else transaction.atomic():
        rows = consensus_rows(project=project, filters=ExportFilters(), task_chunk=1)
        first = next(rows)
        writer = threading.Thread(target=change)
        writer.start()
        writer.join(timeout=30)
        return [first, *rows]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_change_made_while_an_export_runs_does_not_reach_it(project):
    assert connection.vendor == "postgresql"
    last = tasks_of(project)[-1].pk

    kept = _read_while_changed(project, note="changed during the export", snapshot=True)
    # Without the snapshot the same kind of change does show: the first read can tell.
    seen = _read_while_changed(project, note="changed again", snapshot=False)

    kept_last = [r for r in kept if r["task_id"] == last]
    assert len(kept) == 9 and {r["zone"] for r in kept_last} == {"unanimous", "split"}
    assert all(label["note"] != "changed during the export" for r in kept_last for label in r["labels"])
    seen_last = [r for r in seen if r["task_id"] == last]
    assert {r["zone"] for r in seen_last} == {"tied"}
    assert {label["note"] for r in seen_last for label in r["labels"]} == {"changed again"}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_job_and_a_download_record_the_snapshot_they_read(project, pm, settings, tmp_path):
    settings.RUBRICA_EXPORT_DIR = str(tmp_path)
    job = ExportJob.objects.create(project=project, owner=pm, fmt="jsonl", created_at=timezone.now(),
                                   expires_at=timezone.now() + timedelta(hours=1), progress_total=3)

    built = export_job_build(job_id=job.pk)
    streamed, chunks = export_stream_start(project=project, owner=pm, fmt="csv", filters=ExportFilters(),
                                           now=timezone.now())
    b"".join(chunks)
    streamed.refresh_from_db()

    assert built.status == "done" and SNAPSHOT.match(built.db_snapshot), built.db_snapshot
    assert (streamed.status, streamed.row_count) == ("done", 9)
    assert SNAPSHOT.match(streamed.db_snapshot), streamed.db_snapshot


@pytest.mark.django_db
def test_a_download_the_client_abandons_is_marked_failed(pm, project):
    job, chunks = export_stream_start(project=project, owner=pm, fmt="jsonl", filters=ExportFilters(),
                                      now=timezone.now())

    next(chunks)
    # When the client goes away the WSGI server closes the response, which closes its
    # iterator (Django's StreamingHttpResponse registers the iterator's close()).
    chunks.close()

    job.refresh_from_db()
    assert (job.status, job.error, job.row_count) == ("failed", ABANDONED, None)
    assert job.finished_at is not None


@pytest.mark.django_db
def test_a_download_read_to_the_end_is_done_with_its_row_count(client, pm, project):
    client.force_login(pm)

    response = client.get(f"/projects/{project.pk}/exports/download/?format=jsonl")
    body = b"".join(response.streaming_content)  # the test client closes the response after the last chunk

    job = ExportJob.objects.get()
    assert (job.status, job.row_count, job.error) == ("done", 9, "")
    assert body.count(b"\n") == 9


@pytest.mark.django_db
def test_a_running_job_shows_the_progress_its_worker_reports(client, pm, project):
    job = ExportJob.objects.create(project=project, owner=pm, fmt="csv", status="running", created_at=timezone.now(),
                                   started_at=timezone.now(), expires_at=timezone.now() + timedelta(hours=1),
                                   progress_total=3)
    export_progress_set(job.pk, 2)
    client.force_login(pm)

    page = client.get(f"/exports/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()

    assert 'id="export-done">2 / 3<' in page
    assert 'hx-trigger="every 1s"' in page


def _job(project, pm, **fields) -> ExportJob:
    now = timezone.now()
    values = {"fmt": "jsonl", "created_at": now, "started_at": now, "expires_at": now + timedelta(hours=24),
              **fields}
    return ExportJob.objects.create(project=project, owner=pm, **values)


@pytest.mark.django_db
def test_the_sweep_deletes_expired_files_and_leftovers_and_fails_what_stopped(client, pm, project, settings,
                                                                              tmp_path):
    settings.RUBRICA_EXPORT_DIR = str(tmp_path)
    now = timezone.now()
    expired = _job(project, pm, status="done", expires_at=now - timedelta(minutes=1))
    expired_file = tmp_path / f"{expired.snapshot_id}.jsonl"
    expired_file.write_text("{}\n")
    ExportJob.objects.filter(pk=expired.pk).update(file_path=str(expired_file))
    live = _job(project, pm, status="done")
    live_file = tmp_path / f"{live.snapshot_id}.jsonl"
    live_file.write_text("{}\n")
    ExportJob.objects.filter(pk=live.pk).update(file_path=str(live_file))
    building = _job(project, pm, status="running", started_at=now - timedelta(minutes=5))
    building_part = tmp_path / f"{building.snapshot_id}.jsonl.part"
    building_part.write_text("{")
    orphan_part = tmp_path / "0b7f8f3e-0000-4000-8000-000000000000.csv.part"
    orphan_part.write_text("a,")
    lost_worker = _job(project, pm, status="running", started_at=now - timedelta(hours=2))
    lost_stream = _job(project, pm, status="running", delivery="stream", started_at=now - timedelta(hours=7))
    young_stream = _job(project, pm, status="running", delivery="stream", started_at=now - timedelta(hours=1))

    first = exports_sweep(now=now)
    second = exports_sweep(now=now)

    assert first == {"files_deleted": 1, "partials_deleted": 1, "interrupted": 2}
    assert second == {"files_deleted": 0, "partials_deleted": 0, "interrupted": 0}
    assert not expired_file.exists() and live_file.exists() and building_part.exists()
    assert not orphan_part.exists()
    assert ExportJob.objects.get(pk=expired.pk).file_path == ""
    statuses = dict(ExportJob.objects.values_list("pk", "status"))
    assert statuses[lost_worker.pk] == statuses[lost_stream.pk] == "failed"
    assert statuses[building.pk] == statuses[young_stream.pk] == "running"
    assert ExportJob.objects.get(pk=lost_worker.pk).error == INTERRUPTED
    client.force_login(pm)
    assert client.get(f"/exports/{expired.pk}/download/").status_code == 410
    assert client.get(f"/exports/{live.pk}/download/").status_code == 200


def test_the_beat_schedule_sweeps_exports():
    scheduled = {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}

    assert "annotation.exports_sweep" in scheduled
