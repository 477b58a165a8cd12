"""The consensus export: content, formats, streaming, flat memory, access; CLI and API."""
import csv
import io
import json
import tracemalloc
from datetime import UTC, datetime, timedelta
from io import StringIO

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from annotation.exchange.export import COLUMNS, consensus_rows
from annotation.exchange.export_formats import consensus_export
from annotation.models import Assignment, ItemConsensus, Label, Task
from rubrics.models import RubricItem
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
# Votes of the three experts on items 1..3 of a task: unanimous hit, split hit, split miss.
VOTES = {1: (1, 1, 1), 2: (1, 0, 1), 3: (0, 0, 1)}


def complete(tasks: list[Task], experts: list, votes: dict[int, tuple[int, ...]] = VOTES) -> None:
    """Give each task submitted assignments, labels and consensus rows, as the submission service would."""
    items = {}
    for item in RubricItem.objects.filter(version_id__in={t.rubric_version_id for t in tasks}):
        items.setdefault((item.version_id, item.question_ref), []).append(item)
    assignments = Assignment.objects.bulk_create(
        Assignment(task=task, expert=expert, slot=slot, status=Assignment.Status.SUBMITTED, leased_at=NOW,
                   expires_at=NOW + timedelta(hours=1), submitted_at=NOW)
        for task in tasks for slot, expert in enumerate(experts, start=1))
    labels, consensus = [], []
    for task_index, task in enumerate(tasks):
        task_items = items[task.rubric_version_id, task.response.question.external_id]
        panel = assignments[task_index * len(experts):(task_index + 1) * len(experts)]
        for item in task_items:
            values = votes[item.position]
            labels += [Label(assignment=a, task=task, rubric_item=item, value=v) for a, v in zip(panel, values)]
            hits = sum(values)
            consensus.append(ItemConsensus(
                task=task, rubric_item=item, hit_votes=hits, total_votes=len(values),
                majority=int(2 * hits > len(values)),
                zone="unanimous" if hits in (0, len(values)) else "split", computed_at=NOW))
    Label.objects.bulk_create(labels, batch_size=2000)
    ItemConsensus.objects.bulk_create(consensus, batch_size=2000)
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(status=Task.Status.COMPLETE, live_count=len(experts),
                                                             submitted_count=len(experts), completed_at=NOW)


@pytest.fixture
def experts():
    return [ExpertFactory() for _ in range(3)]


@pytest.fixture
def project(pm, experts):
    """Six tasks: four complete, one golden (complete too), one still open."""
    project = make_project_with_tasks(n_questions=3, items_per_question=3, models=2, pm=pm)
    tasks = list(Task.objects.filter(project=project).select_related("response__question").order_by("pk"))
    complete(tasks[:5], experts)
    Task.objects.filter(pk=tasks[4].pk).update(is_golden=True)
    return project


def parse_jsonl(content: bytes) -> list[dict]:
    return [json.loads(line) for line in content.decode().splitlines()]


def test_rows_hold_the_consensus_the_labels_by_pseudonym_and_the_version(project, experts):
    first = Task.objects.filter(project=project).select_related("response__question").order_by("pk").first()
    item = RubricItem.objects.select_related("dimension").get(
        version=first.rubric_version, item_key=f"{first.response.question.external_id}:2")
    pseudonyms = [e.expert_profile.pseudonym for e in experts]

    rows = list(consensus_rows(project=project))

    assert len(rows) == 4 * 3
    question = first.response.question
    assert rows[1] == {
        "task_id": first.pk,
        "question_id": question.external_id,
        "dialogue": question.dialogue,
        "final_user_turn": question.final_user_turn,
        "response_text": first.response.text,
        "model": first.response.model_name,
        "rubric_item_id": item.item_key,
        "position": 2,
        "item_text": item.content,
        "dimension": item.dimension.name_zh,
        "dimension_code": item.dimension.code,
        "score": item.score,
        "rubric_version": first.rubric_version.number,
        "labels": [{"expert": p, "label": v, "submitted_at": NOW.isoformat(), "note": "", "first_label": v,
                    "revised_label": None, "revision_reason": None}
                   for p, v in zip(pseudonyms, (1, 0, 1))],
        "hit_votes": 2,
        "total_votes": 3,
        "majority": 1,
        "zone": "split",
        "provenance": "majority",
        "judge_label": None,
        "judge_reason": None,
        "judge_runs": [],
        "labels_used": "first",
    }


def test_golden_and_incomplete_tasks_are_left_out(project):
    tasks = list(Task.objects.filter(project=project).order_by("pk").values_list("pk", flat=True))

    exported = {row["task_id"] for row in consensus_rows(project=project)}

    assert exported == set(tasks[:4])


def test_jsonl_has_one_object_per_line_and_no_usernames(project, experts):
    content = b"".join(consensus_export(rows=consensus_rows(project=project), fmt="jsonl"))

    rows = parse_jsonl(content)
    assert len(rows) == 12
    assert [(r["majority"], r["zone"]) for r in rows[:3]] == [(1, "unanimous"), (1, "split"), (0, "split")]
    assert all(e.username not in content.decode() for e in experts)


def test_csv_starts_with_a_byte_order_mark_then_a_header_and_the_labels_as_json(project, experts):
    raw = b"".join(consensus_export(rows=consensus_rows(project=project), fmt="csv"))

    assert raw.startswith(b"\xef\xbb\xbf") and not raw[3:].startswith(b"\xef\xbb\xbf")
    rows = list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"))))
    assert list(rows[0])[0] == COLUMNS[0]
    assert len(rows) == 12
    assert {label["expert"]: label["label"] for label in json.loads(rows[2]["labels"])} == {
        e.expert_profile.pseudonym: v for e, v in zip(experts, (0, 0, 1))}
    assert (rows[2]["majority"], rows[2]["zone"], rows[2]["judge_label"]) == ("0", "split", "")


def test_parquet_reads_back_with_a_labels_map(project, experts):
    content = b"".join(consensus_export(rows=consensus_rows(project=project), fmt="parquet"))

    table = pq.read_table(io.BytesIO(content))
    assert table.num_rows == 12
    assert {label["expert"]: label["label"] for label in table.column("labels")[0].as_py()} == {
        e.expert_profile.pseudonym: 1 for e in experts}
    assert table.column("judge_label").null_count == 12


def test_rows_come_in_task_chunks_without_gaps_or_repeats(project):
    everything = list(consensus_rows(project=project))

    chunked = list(consensus_rows(project=project, task_chunk=1))

    assert chunked == everything


def peak_export_bytes(project) -> int:
    tracemalloc.start()
    for _chunk in consensus_export(rows=consensus_rows(project=project, task_chunk=50), fmt="jsonl"):
        pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_memory_stays_flat_when_the_export_grows_tenfold(experts):
    small = make_project_with_tasks(n_questions=10, items_per_question=3, models=10)
    large = make_project_with_tasks(n_questions=100, items_per_question=3, models=10)
    complete(list(Task.objects.filter(project=small).select_related("response__question")), experts)
    complete(list(Task.objects.filter(project=large).select_related("response__question")), experts)
    peak_export_bytes(small)  # warms caches (query compilation, imports) so they do not count against either run

    small_peak = peak_export_bytes(small)
    large_peak = peak_export_bytes(large)

    assert sum(1 for _ in consensus_rows(project=large)) == 10 * sum(1 for _ in consensus_rows(project=small)) == 3000
    assert large_peak < 3 * small_peak


# Command line.

def test_the_command_writes_jsonl_to_stdout_and_the_summary_to_stderr(project):
    out, err = StringIO(), StringIO()

    call_command("export_consensus", str(project.pk), "--format", "jsonl", stdout=out, stderr=err)

    assert len(parse_jsonl(out.getvalue().encode())) == 12
    assert err.getvalue().strip().startswith(f"Exported 12 rows of project {project.pk} as jsonl (snapshot ")


def test_the_command_writes_parquet_to_a_file(project, tmp_path):
    target = tmp_path / "consensus.parquet"
    out = StringIO()

    call_command("export_consensus", str(project.pk), "--format", "parquet", "--output", str(target), stdout=out)

    assert pq.read_table(target).num_rows == 12
    assert out.getvalue().strip().startswith(f"Exported 12 rows of project {project.pk} as parquet to {target} (")


def test_the_command_refuses_parquet_on_stdout(project):
    with pytest.raises(CommandError, match="--output"):
        call_command("export_consensus", str(project.pk), "--format", "parquet")


# API.

def test_the_pm_streams_jsonl(api, pm, project):
    api.force_authenticate(pm)

    response = api.get(f"/api/v1/projects/{project.pk}/export/", {"format": "jsonl"})

    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "application/x-ndjson; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="project-{project.pk}-consensus.jsonl"'
    assert len(parse_jsonl(b"".join(response.streaming_content))) == 12


def test_the_pm_streams_csv(api, pm, project):
    api.force_authenticate(pm)

    response = api.get(f"/api/v1/projects/{project.pk}/export/", {"format": "csv"})

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    raw = b"".join(response.streaming_content)
    assert raw[:3] == b"\xef\xbb\xbf"
    assert len(list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"))))) == 12


def test_an_admin_streams_parquet(api, admin_user, project):
    api.force_authenticate(admin_user)

    response = api.get(f"/api/v1/projects/{project.pk}/export/", {"format": "parquet"})

    assert response.status_code == 200
    assert pq.read_table(io.BytesIO(b"".join(response.streaming_content))).num_rows == 12


def test_jsonl_is_the_default_format(api, pm, project):
    api.force_authenticate(pm)

    response = api.get(f"/api/v1/projects/{project.pk}/export/")

    assert response["Content-Type"] == "application/x-ndjson; charset=utf-8"


def test_an_unknown_format_is_400(api, pm, project):
    api.force_authenticate(pm)

    response = api.get(f"/api/v1/projects/{project.pk}/export/", {"format": "xlsx"})

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"line": None, "field": "format",
         "message": 'expected one of jsonl, csv, parquet, heartbench, hf, audit, got "xlsx"'}]


def test_another_pms_project_is_404(api, project):
    api.force_authenticate(PMFactory())

    response = api.get(f"/api/v1/projects/{project.pk}/export/", {"format": "jsonl"})

    assert response.status_code == 404


def test_a_missing_project_is_404(api, pm):
    api.force_authenticate(pm)

    response = api.get("/api/v1/projects/999999/export/", {"format": "csv"})

    assert response.status_code == 404


def test_an_expert_gets_404(api, project, experts):
    api.force_authenticate(experts[0])

    response = api.get(f"/api/v1/projects/{project.pk}/export/", {"format": "jsonl"})

    assert response.status_code == 404


def test_an_anonymous_caller_gets_401(api, project):
    response = api.get(f"/api/v1/projects/{project.pk}/export/", {"format": "jsonl"})

    assert response.status_code == 401
