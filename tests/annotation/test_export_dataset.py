"""The self-contained dataset export: every field, every filter, every format, the job flow,
and the agreement report's counts recomputed from the export alone."""
import csv
import io
import json
import zipfile
from datetime import UTC, datetime, timedelta
from io import StringIO

import pyarrow.parquet as pq
import pytest
import yaml
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotation.agreement.services import agreement_report_compute
from annotation.exchange.export import ExportFilters, consensus_rows
from annotation.exchange.export_formats import csv_cell, dataset_export
from annotation.exchange.export_jobs import export_job_build
from annotation.exchange.judge_labels import judge_labels_import
from annotation.exchange.questions import questions_import
from annotation.models import Assignment, ExportJob, ItemConsensus, Label, Project, Question, Response, Task
from annotation.services import project_create
from rubrics.models import RubricItem, RubricVersion
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
# Votes of the three experts on items 1..3: unanimous hit, split hit, split miss.
VOTES = {1: (1, 1, 1), 2: (1, 0, 1), 3: (0, 0, 1)}
NOTES = {1: "=HYPERLINK(\"https://example.com\")", 2: "回复温暖，但没有追问。"}  # expert slot -> note on every item


def plant(tasks: list[Task], experts: list, *, submitted_at: datetime = NOW) -> None:
    """Submitted assignments (one minute apart), labels with notes, and consensus rows."""
    for task in tasks:
        items = list(RubricItem.objects.filter(version_id=task.rubric_version_id,
                                               question_ref=task.response.question.external_id).order_by("position"))
        panel = [Assignment.objects.create(task=task, expert=e, slot=s, status=Assignment.Status.SUBMITTED,
                                           leased_at=submitted_at, expires_at=submitted_at + timedelta(hours=1),
                                           submitted_at=submitted_at + timedelta(minutes=s))
                 for s, e in enumerate(experts, start=1)]
        for item in items:
            values = VOTES[item.position]
            for assignment, value in zip(panel, values):
                Label.objects.create(assignment=assignment, task=task, rubric_item=item, value=value,
                                     note=NOTES.get(assignment.slot, ""))
            hits = sum(values)
            ItemConsensus.objects.create(task=task, rubric_item=item, hit_votes=hits, total_votes=len(values),
                                         majority=int(2 * hits > len(values)),
                                         zone="unanimous" if hits in (0, len(values)) else "split",
                                         computed_at=submitted_at)
        Task.objects.filter(pk=task.pk).update(status=Task.Status.COMPLETE, live_count=len(experts),
                                               submitted_count=len(experts), completed_at=submitted_at)


def tasks_of(project: Project) -> list[Task]:
    return list(Task.objects.filter(project=project).select_related("response__question").order_by("pk"))


@pytest.fixture
def experts():
    return [ExpertFactory() for _ in range(3)]


@pytest.fixture
def project(pm, experts):
    """Two questions × two models: three tasks complete, one open; two judge runs with reasons."""
    project = make_project_with_tasks(n_questions=2, items_per_question=3, models=2, pm=pm)
    plant(tasks_of(project)[:3], experts)
    first = "\n".join(json.dumps({"question_id": q, "model": m, "detail": [1, 1, 0], "reason": f"r1 {q} {m}"})
                      for q in ("q0", "q1") for m in ("model-0", "model-1"))
    second = json.dumps({"question_id": "q0", "model": "model-0", "detail": [0, 1, 1], "reason": "second look"})
    judge_labels_import(project=project, data=first.encode(), run_name="gpt-run", judge_model="gpt-x", now=NOW)
    judge_labels_import(project=project, data=second.encode(), run_name="claude-run", judge_model="c-y",
                        now=NOW + timedelta(hours=1))
    return project


def rows_of(project: Project, **filters) -> list[dict]:
    return list(consensus_rows(project=project, filters=ExportFilters(**filters)))


def jsonl(project: Project, fmt: str = "jsonl", **filters) -> bytes:
    return b"".join(dataset_export(project=project, filters=ExportFilters(**filters), fmt=fmt, snapshot_id="s"))


# Fields.

def test_a_row_carries_question_reply_item_labels_votes_and_every_judge_run(project, experts):
    task = tasks_of(project)[0]
    question, response = task.response.question, task.response
    item = RubricItem.objects.select_related("dimension").get(version=task.rubric_version,
                                                               item_key=f"{question.external_id}:2")

    row = next(r for r in rows_of(project) if r["task_id"] == task.pk and r["position"] == 2)

    assert (row["question_id"], row["dialogue"], row["final_user_turn"]) == (
        question.external_id, question.dialogue, question.final_user_turn)
    assert (row["response_text"], row["model"]) == (response.text, response.model_name)
    assert (row["rubric_item_id"], row["item_text"], row["dimension"], row["dimension_code"], row["score"]) == (
        item.item_key, item.content, item.dimension.name_zh, item.dimension.code, item.score)
    assert row["rubric_version"] == 1
    unrevised = {"revised_label": None, "revision_reason": None}
    assert row["labels"] == [
        {"expert": experts[0].expert_profile.pseudonym, "label": 1,
         "submitted_at": (NOW + timedelta(minutes=1)).isoformat(), "note": NOTES[1], "first_label": 1, **unrevised},
        {"expert": experts[1].expert_profile.pseudonym, "label": 0,
         "submitted_at": (NOW + timedelta(minutes=2)).isoformat(), "note": NOTES[2], "first_label": 0, **unrevised},
        {"expert": experts[2].expert_profile.pseudonym, "label": 1,
         "submitted_at": (NOW + timedelta(minutes=3)).isoformat(), "note": "", "first_label": 1, **unrevised},
    ]
    assert (row["hit_votes"], row["total_votes"], row["majority"], row["zone"], row["provenance"]) == (
        2, 3, 1, "split", "majority")
    assert row["judge_runs"] == [
        {"run": "gpt-run", "judge_model": "gpt-x", "label": 1, "reason": f"r1 q0 {response.model_name}"},
        {"run": "claude-run", "judge_model": "c-y", "label": 1, "reason": "second look"},
    ]
    assert (row["judge_label"], row["judge_reason"]) == (1, "second look")


def test_the_judge_label_is_filled_for_every_judged_row(project):
    rows = rows_of(project)

    assert len(rows) == 9
    assert [r["judge_label"] for r in rows if r["task_id"] != tasks_of(project)[0].pk] == [1, 1, 0] * 2


def test_a_stored_zone_passes_through_and_a_tie_has_no_majority_nor_derived_provenance(project):
    task = tasks_of(project)[1]
    ItemConsensus.objects.filter(task=task, rubric_item__position=2).update(zone="tied", majority=None, provenance="")

    row = next(r for r in rows_of(project) if r["task_id"] == task.pk and r["position"] == 2)

    assert (row["zone"], row["majority"], row["provenance"]) == ("tied", None, None)


def test_no_username_reaches_the_export(project, experts):
    content = jsonl(project).decode()

    assert all(e.username not in content for e in experts)


# Filters.

def add_version_two(project: Project, experts: list) -> Task:
    """A second published version whose q0 reply of model-0 has a complete task, submitted a month later."""
    version = RubricVersion.objects.create(rubric=project.rubric, number=2)
    for item in RubricItem.objects.filter(version__number=1, version__rubric=project.rubric, question_ref="q0"):
        RubricItem.objects.create(version=version, question_ref="q0", position=item.position,
                                  item_key=item.item_key, dimension=item.dimension, score=item.score,
                                  content=item.content + " (v2)")
    RubricVersion.objects.filter(pk=version.pk).update(status="published", published_at=NOW)
    response = Response.objects.get(project=project, question__external_id="q0", model_name="model-0")
    task = Task.objects.create(project=project, response=response, rubric_version=version, overlap=3, shuffle_key=1)
    plant([Task.objects.select_related("response__question").get(pk=task.pk)], experts,
          submitted_at=NOW + timedelta(days=30))
    return task


def test_the_rubric_version_filter_keeps_one_version(project, experts):
    task = add_version_two(project, experts)

    assert {r["task_id"] for r in rows_of(project, rubric_version=2)} == {task.pk}
    assert {r["rubric_version"] for r in rows_of(project, rubric_version=1)} == {1}
    assert len(rows_of(project)) == 12


def test_the_submitted_after_filter_keeps_later_submissions(project, experts):
    task = add_version_two(project, experts)

    assert {r["task_id"] for r in rows_of(project, submitted_after=(NOW + timedelta(days=10)).date())} == {task.pk}


def test_the_zone_filter_keeps_only_items_in_that_zone(project):
    assert {(r["position"], r["zone"]) for r in rows_of(project, zone="split")} == {(2, "split"), (3, "split")}
    assert {r["position"] for r in rows_of(project, zone="unanimous")} == {1}
    assert rows_of(project, zone="tied") == []


def test_the_dimension_filter_keeps_only_that_dimensions_items(project):
    item = RubricItem.objects.select_related("dimension").filter(position=2).first()

    rows = rows_of(project, dimension=item.dimension.code)

    assert rows and {r["dimension_code"] for r in rows} == {item.dimension.code}
    assert {r["position"] for r in rows} == {2}


def test_the_model_filter_keeps_only_that_models_replies(project):
    rows = rows_of(project, model="model-1")

    assert {r["model"] for r in rows} == {"model-1"}
    assert len(rows) == 3


def test_completion_all_adds_the_unfinished_task_without_votes(project):
    open_task = tasks_of(project)[3]

    rows = rows_of(project, completion="all")

    assert len(rows) == 12
    unfinished = [r for r in rows if r["task_id"] == open_task.pk]
    assert [(r["labels"], r["zone"], r["majority"], r["hit_votes"]) for r in unfinished] == [([], None, None, None)] * 3


def test_filters_work_through_the_api_and_are_recorded(api, pm, project):
    api.force_authenticate(pm)

    response = api.get(f"/api/v1/projects/{project.pk}/export/", {"format": "jsonl", "model": "model-1",
                                                                    "zone": "split"})

    rows = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert {(r["model"], r["zone"]) for r in rows} == {("model-1", "split")}
    job = ExportJob.objects.get(snapshot_id=response["X-Rubrica-Snapshot"])
    assert (job.owner, job.delivery, job.row_count, job.status) == (pm, "stream", len(rows), "done")
    assert (job.filters["model"], job.filters["zone"], job.filters["completion"]) == ("model-1", "split", "complete")


def test_filters_work_through_the_command(project):
    out, err = StringIO(), StringIO()

    call_command("export_consensus", str(project.pk), "--format", "jsonl", "--model", "model-0",
                 "--dimension", RubricItem.objects.filter(position=1).first().dimension.code, stdout=out, stderr=err)

    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["model"], r["position"]) for r in rows] == [("model-0", 1)] * 2
    assert ExportJob.objects.get().row_count == 2


BAD_FILTERS = [
    ("rubric_version", "7", "1"),
    ("zone", "contested", "unanimous, split, tied, single"),
    ("dimension", "kindness", "warmth"),
    ("model", "gpt-9", "model-0, model-1"),
    ("completion", "half", "complete, all"),
    ("submitted_after", "last week", "2026-03-01"),
]


@pytest.mark.parametrize(("name", "value", "expected"), BAD_FILTERS)
def test_an_unknown_filter_value_is_a_400_naming_the_filter_and_the_values(api, pm, project, name, value, expected):
    api.force_authenticate(pm)

    response = api.get(f"/api/v1/projects/{project.pk}/export/", {"format": "csv", name: value})

    assert response.status_code == 400
    body = response.json()
    assert body["errors"][0]["field"] == name
    assert name in body["detail"] and value in body["detail"] and expected in body["detail"]
    assert not ExportJob.objects.exists()


@pytest.mark.parametrize(("name", "value", "expected"), BAD_FILTERS)
def test_an_unknown_filter_value_is_a_command_error(project, name, value, expected):
    with pytest.raises(CommandError, match=name) as refused:
        call_command("export_consensus", str(project.pk), "--format", "jsonl", f"--{name.replace('_', '-')}", value,
                     stdout=StringIO())

    assert expected in str(refused.value)


def test_an_unknown_filter_value_is_an_error_on_the_page_in_chinese(client, pm, project):
    client.force_login(pm)

    response = client.get(f"/projects/{project.pk}/exports/download/", {"zone": "contested"},
                          HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert response.status_code == 422
    text = response.content.decode()
    assert "导出筛选条件" in text and "contested" in text and "tied" in text
    assert 'value="contested"' not in text  # the select keeps only real choices


def test_the_page_downloads_the_filtered_dataset(client, pm, project):
    client.force_login(pm)

    response = client.get(f"/projects/{project.pk}/exports/download/", {"format": "jsonl", "model": "model-0"})

    assert response.status_code == 200
    rows = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert {r["model"] for r in rows} == {"model-0"} and len(rows) == 6


# Formats.

def test_csv_has_a_bom_guards_formulas_and_parses_back_to_the_jsonl_rows(project):
    raw = jsonl(project, "csv")
    reference = [json.loads(line) for line in jsonl(project).decode().splitlines()]

    assert raw.startswith(b"\xef\xbb\xbf")
    parsed = list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"))))
    assert len(parsed) == len(reference)
    labels = json.loads(parsed[0]["labels"])
    assert labels[0]["note"] == NOTES[1]  # inside a JSON cell, which starts with "[", nothing to guard
    assert [dict(row["labels"][0]) for row in reference[:1]] == [labels[0]]
    assert json.loads(parsed[0]["dialogue"]) == reference[0]["dialogue"]
    assert parsed[0]["response_text"] == reference[0]["response_text"]
    assert int(parsed[2]["score"]) == reference[2]["score"] < 0  # a negative number is data, not a formula


@pytest.mark.parametrize("text", ["=1+1", "+1", "-cmd", "@SUM(A1)", "\tx", "\rx"])
def test_a_text_cell_that_looks_like_a_formula_gets_an_apostrophe(text):
    assert csv_cell(text) == "'" + text
    assert csv_cell("a=b") == "a=b" and csv_cell(-3) == -3 and csv_cell(None) == ""


def test_a_reply_that_looks_like_a_formula_is_guarded_in_the_file(project):
    Response.objects.filter(project=project).update(text="=cmd|' /C calc'!A0")

    parsed = list(csv.DictReader(io.StringIO(jsonl(project, "csv").decode("utf-8-sig"))))

    assert {row["response_text"] for row in parsed} == {"'=cmd|' /C calc'!A0"}


def test_parquet_holds_the_same_rows_as_jsonl(project):
    reference = [json.loads(line) for line in jsonl(project).decode().splitlines()]

    table = pq.read_table(io.BytesIO(jsonl(project, "parquet")))

    assert table.to_pylist() == reference


def test_heartbench_questions_reimport_to_the_same_questions(project, pm):
    exported = jsonl(project, "heartbench")
    target = project_create(name="copy", created_by=pm)

    result = questions_import(project=target, data=exported, now=timezone.now())
    again = questions_import(project=project, data=exported, now=timezone.now())

    assert (result.created, result.items_created) == (2, 6)
    assert (again.created, again.skipped) == (0, 2)

    def shape(p: Project) -> list:
        return [(q.external_id, q.full_dialogue(), q.difficulty, q.primary_scene, q.secondary_scene,
                 list(RubricItem.objects.filter(version__rubric=p.rubric, version__status="published",
                                                question_ref=q.external_id)
                      .order_by("position").values_list("position", "dimension_id", "score", "content")))
                for q in Question.objects.filter(project=p).order_by("external_id")]
    assert shape(target) == shape(project)


def test_the_hugging_face_layout_has_parquet_files_and_a_dataset_card(project):
    agreement_report_compute(project=project, now=NOW)

    archive = zipfile.ZipFile(io.BytesIO(jsonl(project, "hf", model="model-0")))

    assert sorted(archive.namelist()) == ["README.md", "data/consensus.parquet", "data/questions.parquet"]
    consensus = pq.read_table(io.BytesIO(archive.read("data/consensus.parquet")))
    questions = pq.read_table(io.BytesIO(archive.read("data/questions.parquet")))
    assert consensus.num_rows == 6 and "dialogue" not in consensus.column_names
    assert sorted(questions.column("question_id").to_pylist()) == ["q0", "q1"]
    card = archive.read("README.md").decode()
    assert card.startswith("---\n")
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["license"] == "other"
    assert [c["data_files"] for c in meta["configs"]] == ["data/consensus.parquet", "data/questions.parquet"]
    rubrica = meta["rubrica"]
    assert rubrica["rubric_version"] == [1]
    assert rubrica["row_counts"] == {"consensus": 6, "questions": 2}
    assert rubrica["filters"]["model"] == "model-0"
    judge = rubrica["agreement"]["judge_vs_majority"]
    assert judge["n"] > 0 and len(judge["agreement_ci"]) == 2
    assert rubrica["agreement"]["experts"]["n"] == 9


# Jobs.

def test_a_job_is_built_by_the_worker_and_its_file_downloaded_by_its_owner(client, pm, project, settings, tmp_path,
                                                                           django_capture_on_commit_callbacks):
    settings.RUBRICA_EXPORT_DIR = str(tmp_path)
    client.force_login(pm)

    with django_capture_on_commit_callbacks(execute=True) as sent:
        started = client.post(f"/projects/{project.pk}/exports/jobs/", {"format": "jsonl", "zone": "split"})

    job = ExportJob.objects.get()
    assert len(sent) == 1
    assert started.status_code == 302 and started["Location"] == f"/exports/{job.pk}/"
    assert (job.status, job.delivery, job.row_count, job.progress_done, job.progress_total) == (
        "done", "file", 6, 3, 3)
    assert job.expires_at - job.created_at == timedelta(hours=24)
    page = client.get(f"/exports/{job.pk}/")
    assert f'href="/exports/{job.pk}/download/"' in page.content.decode()
    assert "every 1s" not in page.content.decode()
    download = client.get(f"/exports/{job.pk}/download/")
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == jsonl(project, zone="split")


def test_a_waiting_job_polls_its_progress(client, pm, project):
    job = ExportJob.objects.create(project=project, owner=pm, fmt="csv", created_at=timezone.now(),
                                   expires_at=timezone.now() + timedelta(hours=1), progress_total=3)
    client.force_login(pm)

    fragment = client.get(f"/exports/{job.pk}/", HTTP_HX_REQUEST="true")
    full = client.get(f"/exports/{job.pk}/")

    assert 'hx-trigger="every 1s"' in fragment.content.decode()
    assert "<html" not in fragment.content.decode() and "<html" in full.content.decode()
    assert client.get(f"/exports/{job.pk}/download/").status_code == 409


def test_building_a_job_twice_writes_it_once(pm, project, settings, tmp_path):
    settings.RUBRICA_EXPORT_DIR = str(tmp_path)
    job = ExportJob.objects.create(project=project, owner=pm, fmt="parquet", created_at=timezone.now(),
                                   expires_at=timezone.now() + timedelta(hours=1), progress_total=3)

    export_job_build(job_id=job.pk)
    finished = ExportJob.objects.get(pk=job.pk).finished_at
    export_job_build(job_id=job.pk)

    assert ExportJob.objects.get(pk=job.pk).finished_at == finished
    assert pq.read_table(ExportJob.objects.get(pk=job.pk).file_path).num_rows == 9


def test_the_api_queues_a_job_and_serves_the_file_to_its_owner_only(api, pm, project, settings, tmp_path,
                                                                   django_capture_on_commit_callbacks):
    settings.RUBRICA_EXPORT_DIR = str(tmp_path)
    api.force_authenticate(pm)

    with django_capture_on_commit_callbacks(execute=True):
        created = api.post(f"/api/v1/projects/{project.pk}/export-jobs/", {"format": "hf"}, format="json")
    job_id = created.json()["id"]
    status = api.get(f"/api/v1/export-jobs/{job_id}/").json()
    file = api.get(f"/api/v1/export-jobs/{job_id}/download/")
    api.force_authenticate(PMFactory())
    stranger = api.get(f"/api/v1/export-jobs/{job_id}/download/")

    assert created.status_code == 202
    assert (status["status"], status["row_count"]) == ("done", 9)
    assert zipfile.ZipFile(io.BytesIO(b"".join(file.streaming_content))).testzip() is None
    assert stranger.status_code == 404


def test_another_user_or_another_project_gets_404_for_a_job(client, pm, project, settings, tmp_path,
                                                         django_capture_on_commit_callbacks):
    settings.RUBRICA_EXPORT_DIR = str(tmp_path)
    client.force_login(pm)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/projects/{project.pk}/exports/jobs/", {"format": "csv"})
    job = ExportJob.objects.get()
    other_pm = PMFactory()
    other_project = make_project_with_tasks(pm=other_pm)
    foreign = ExportJob.objects.create(project=other_project, owner=pm, fmt="csv", created_at=timezone.now(),
                                       expires_at=timezone.now() + timedelta(hours=1))

    client.force_login(other_pm)
    assert client.get(f"/exports/{job.pk}/download/").status_code == 404
    assert client.get(f"/exports/{job.pk}/").status_code == 404
    client.force_login(pm)
    # The owner's own job, in a project they do not manage: as if it did not exist.
    assert client.get(f"/exports/{foreign.pk}/").status_code == 404
    assert client.get("/exports/999999/download/").status_code == 404


def test_an_expired_download_says_so(client, pm, project, settings, tmp_path, django_capture_on_commit_callbacks):
    settings.RUBRICA_EXPORT_DIR = str(tmp_path)
    client.force_login(pm)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/projects/{project.pk}/exports/jobs/", {"format": "csv"})
    ExportJob.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    job = ExportJob.objects.get()

    download = client.get(f"/exports/{job.pk}/download/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    page = client.get(f"/exports/{job.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert download.status_code == 410
    assert "过期，请在导出页面重新生成" in download.content.decode()
    assert f"/exports/{job.pk}/download/" not in page.content.decode()
    assert "过期，请在导出页面重新生成" in page.content.decode()


def test_a_bad_filter_on_the_job_form_writes_no_job(client, pm, project):
    client.force_login(pm)

    response = client.post(f"/projects/{project.pk}/exports/jobs/", {"format": "jsonl", "completion": "half"})

    assert response.status_code == 422
    assert not ExportJob.objects.exists()


def test_the_export_page_is_404_for_another_pm(client, project):
    client.force_login(PMFactory())

    assert client.get(f"/projects/{project.pk}/exports/").status_code == 404


# The report recomputed from the export alone.

def test_the_reports_counts_are_recomputed_from_the_export_alone(project):
    report = agreement_report_compute(project=project, now=NOW).payload
    rows = [json.loads(line) for line in jsonl(project).decode().splitlines()]

    complete = [r for r in rows if r["total_votes"] == len(r["labels"]) == 3]
    unanimous = sum(r["hit_votes"] in (0, r["total_votes"]) for r in complete)
    judged = [r for r in complete if any(run["run"] == report["judge_run"]["name"] for run in r["judge_runs"])]
    judge_of = {id(r): next(run["label"] for run in r["judge_runs"] if run["run"] == report["judge_run"]["name"])
                for r in judged}
    agree = sum(judge_of[id(r)] == r["majority"] for r in judged)

    assert report["panel"]["overall"]["n"] == len(complete)
    assert (report["panel"]["overall"]["unanimous"], report["panel"]["overall"]["split"]) == (
        unanimous, len(complete) - unanimous)
    assert report["judge"]["overall"]["n"] == len(judged)
    assert report["judge"]["overall"]["agreement"] == round(agree / len(judged), 4)  # the report stores 4 places
    assert report["progress"]["submissions"] == len({(r["task_id"], label["expert"])
                                                     for r in rows for label in r["labels"]})
