"""Importing model responses: plain rows or HeartBench's answer file, all or nothing, idempotent; CLI and API."""
import json
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from annotation.exchange.questions import questions_import
from annotation.exchange.responses import responses_import
from annotation.models import Response, Task
from annotation.services import project_create
from core.errors import DomainError
from rubrics.models import RubricVersion
from tests.factories import ExpertFactory, PMFactory

pytestmark = pytest.mark.django_db

HEARTBENCH = Path(__file__).resolve().parents[2] / ".." / "shared" / "heartbench"
QUESTION_ALL = HEARTBENCH / "question_all.jsonl"
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def jsonl(*rows) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def answer_file(limit: int | None = None) -> bytes:
    """HeartBench's answer file: the question rows plus a response, no model."""
    rows = [json.loads(line) for line in QUESTION_ALL.read_text(encoding="utf-8").splitlines()[:limit]]
    return jsonl(*({**row, "response": f"回答 {row['question_id']}：我能感受到你的压力。"} for row in rows))


def counts() -> tuple[int, int]:
    return Response.objects.count(), Task.objects.count()


@pytest.fixture
def project(pm):
    project = project_create(name="HeartBench", created_by=pm)
    questions_import(project=project, data=QUESTION_ALL.read_bytes(), now=NOW, source="question_all.jsonl")
    return project


@pytest.fixture
def question_ids(project) -> list[str]:
    return list(project.questions.order_by("external_id").values_list("external_id", flat=True)[:3])


@pytest.fixture
def seeded(project, question_ids):
    """One response already imported, so "nothing written" is visible."""
    responses_import(project=project, data=jsonl({"question_id": question_ids[0], "model": "seed-model",
                                                  "response": "我在这里陪着你。"}), model=None, now=NOW)
    return project


def test_plain_rows_import_and_each_response_gets_a_task_on_the_current_version(project, question_ids):
    rows = [{"question_id": qid, "model": model, "response": f"{model} on {qid}"}
            for qid in question_ids for model in ("model-a", "model-b")]

    result = responses_import(project=project, data=jsonl(*rows), model=None, now=NOW)

    current = RubricVersion.objects.get(rubric=project.rubric, status="published")
    assert (result.created, result.skipped, result.tasks_created, result.version) == (6, 0, 6, current.number)
    assert Response.objects.filter(project=project).count() == 6
    assert Task.objects.filter(project=project, rubric_version=current, status="open").count() == 6
    assert Response.objects.get(question__external_id=question_ids[1], model_name="model-b").text == (
        f"model-b on {question_ids[1]}")


def test_the_heartbench_answer_file_imports_as_is_with_a_model_name(project):
    result = responses_import(project=project, data=answer_file(), model="qwen-max", now=NOW,
                              source="answers.jsonl")

    assert (result.created, result.tasks_created) == (296, 296)
    assert set(Response.objects.values_list("model_name", flat=True)) == {"qwen-max"}
    assert Task.objects.filter(project=project).count() == 296


def test_a_rows_own_model_wins_over_the_argument(project, question_ids):
    rows = [{"question_id": question_ids[0], "model": "row-model", "response": "a"},
            {"question_id": question_ids[1], "response": "b"}]

    responses_import(project=project, data=jsonl(*rows), model="argument-model", now=NOW)

    assert sorted(Response.objects.values_list("model_name", flat=True)) == ["argument-model", "row-model"]


def test_reimporting_the_same_file_changes_nothing(project):
    data = answer_file(limit=20)
    responses_import(project=project, data=data, model="qwen-max", now=NOW)
    before = counts()

    result = responses_import(project=project, data=data, model="qwen-max", now=NOW)

    assert (result.created, result.skipped, result.tasks_created) == (0, 20, 0)
    assert counts() == before


def test_the_answer_file_without_a_model_is_refused_line_by_line(seeded):
    before = counts()

    with pytest.raises(DomainError) as caught:
        responses_import(project=seeded, data=answer_file(limit=3), model=None, now=NOW, source="answers.jsonl")

    assert [(e["line"], e["field"]) for e in caught.value.errors] == [(1, "model"), (2, "model"), (3, "model")]
    assert caught.value.message.startswith("answers.jsonl: 3 errors, nothing was imported. First: line 1: "
                                           'field "model": missing')
    assert counts() == before


def test_a_different_text_for_a_stored_response_is_refused(seeded, question_ids):
    before = counts()
    rows = [{"question_id": question_ids[1], "model": "seed-model", "response": "new"},
            {"question_id": question_ids[0], "model": "seed-model", "response": "改过的回答"}]

    with pytest.raises(DomainError) as caught:
        responses_import(project=seeded, data=jsonl(*rows), model=None, now=NOW)

    assert caught.value.errors == [{
        "line": 2, "field": "response",
        "message": f'model "seed-model" already has a different response to question "{question_ids[0]}"; '
                   "a stored response is never replaced"}]
    assert counts() == before


def good(qid: str, model: str = "m") -> dict:
    return {"question_id": qid, "model": model, "response": "我理解你的感受。"}


BAD_FILES = [
    ("unknown question", lambda ids: [good(ids[0]), good("no-such-question")], "question_id",
     'unknown question "no-such-question"; import the questions first'),
    ("empty response", lambda ids: [good(ids[0]), {**good(ids[1]), "response": "   "}], "response",
     "expected a non-empty string"),
    ("response not a string", lambda ids: [good(ids[0]), {**good(ids[1]), "response": ["a"]}], "response",
     "expected a non-empty string, got a list"),
    ("missing question id", lambda ids: [good(ids[0]), {"model": "m", "response": "x"}], "question_id",
     "missing; expected a string"),
    ("duplicate pair", lambda ids: [good(ids[0]), good(ids[0])], "question_id",
     'duplicate response of model "m" to question'),
    ("model too long", lambda ids: [good(ids[0]), good(ids[1], model="m" * 201)], "model",
     "expected at most 200 characters, got 201"),
]


@pytest.mark.parametrize(("make_rows", "field", "message"), [case[1:] for case in BAD_FILES],
                         ids=[case[0] for case in BAD_FILES])
def test_a_bad_line_is_reported_and_nothing_is_written(seeded, question_ids, make_rows, field, message):
    before = counts()

    with pytest.raises(DomainError) as caught:
        responses_import(project=seeded, data=jsonl(*make_rows(question_ids)), model=None, now=NOW)

    error = caught.value.errors[0]
    assert (error["line"], error["field"]) == (2, field)
    assert message in error["message"]
    assert "line 2" in caught.value.message
    assert counts() == before


@pytest.mark.parametrize(("content", "message"), [
    (b'{"question_id": \n', "not valid JSON"),
    (b'"just a string"\n', 'expected a JSON object, got "just a string"'),
    (b"\xfe\xff\n", "not valid UTF-8"),
], ids=["not json", "not an object", "not utf-8"])
def test_unreadable_lines_are_reported(seeded, content, message):
    before = counts()

    with pytest.raises(DomainError) as caught:
        responses_import(project=seeded, data=content, model="m", now=NOW)

    assert caught.value.errors[0]["line"] == 1
    assert message in caught.value.errors[0]["message"]
    assert counts() == before


def test_an_empty_file_is_refused(seeded):
    with pytest.raises(DomainError, match="the file has no rows"):
        responses_import(project=seeded, data=b"\n\n", model="m", now=NOW)


def test_an_oversized_file_is_refused_before_parsing(seeded, settings):
    settings.RUBRICA_MAX_IMPORT_BYTES = 10

    with pytest.raises(DomainError) as caught:
        responses_import(project=seeded, data=b"{" * 11, model="m", now=NOW)

    assert (caught.value.status, caught.value.code) == (413, "too_large")


# Command line.

def test_the_command_imports_the_answer_file_with_model(project, tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_bytes(answer_file())
    out = StringIO()

    call_command("import_responses", str(project.pk), str(answers), "--model", "qwen-max", stdout=out)

    assert out.getvalue().strip() == f"Imported 296 responses into project {project.pk} (296 new tasks); 0 skipped."
    assert Response.objects.filter(model_name="qwen-max").count() == 296


def test_the_command_without_model_prints_the_line_errors_and_fails(project, tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_bytes(answer_file(limit=2))
    err = StringIO()

    with pytest.raises(CommandError, match="answers.jsonl: 2 errors, nothing was imported"):
        call_command("import_responses", str(project.pk), str(answers), stderr=err)

    assert err.getvalue().splitlines() == [
        'line 1: field "model": missing; the row names no model and none was given (--model, or the form field '
        "model)",
        'line 2: field "model": missing; the row names no model and none was given (--model, or the form field '
        "model)",
    ]
    assert Response.objects.count() == 0


def test_the_command_reports_a_missing_file(project, tmp_path):
    with pytest.raises(CommandError, match="Cannot read"):
        call_command("import_responses", str(project.pk), str(tmp_path / "nope.jsonl"), "--model", "m")


# API.

def upload(content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile("answers.jsonl", content, content_type="application/x-ndjson")


def test_the_pm_imports_the_answer_file_with_the_model_field(api, pm, project):
    api.force_authenticate(pm)

    response = api.post(f"/api/v1/projects/{project.pk}/responses/import/",
                        {"file": upload(answer_file(limit=5)), "model": "qwen-max"}, format="multipart")

    assert response.status_code == 201
    assert response.json() == {"responses_created": 5, "tasks_created": 5, "skipped": 0, "version": 1}


def test_a_bad_file_through_the_api_is_400_with_line_errors(api, pm, project):
    api.force_authenticate(pm)

    response = api.post(f"/api/v1/projects/{project.pk}/responses/import/",
                        {"file": upload(answer_file(limit=2))}, format="multipart")

    assert response.status_code == 400
    assert [(e["line"], e["field"]) for e in response.json()["errors"]] == [(1, "model"), (2, "model")]
    assert Response.objects.count() == 0


def test_another_pms_project_is_404_and_untouched(api, project):
    api.force_authenticate(PMFactory())

    response = api.post(f"/api/v1/projects/{project.pk}/responses/import/",
                        {"file": upload(answer_file(limit=2)), "model": "m"}, format="multipart")

    assert response.status_code == 404
    assert Response.objects.count() == 0


def test_a_missing_project_is_404(api, pm):
    api.force_authenticate(pm)

    response = api.post("/api/v1/projects/999999/responses/import/", {"file": upload(b"{}\n"), "model": "m"},
                        format="multipart")

    assert response.status_code == 404


def test_an_expert_gets_404_and_writes_nothing(api, project):
    api.force_authenticate(ExpertFactory())

    response = api.post(f"/api/v1/projects/{project.pk}/responses/import/",
                        {"file": upload(answer_file(limit=2)), "model": "m"}, format="multipart")

    assert response.status_code == 404
    assert Response.objects.count() == 0


def test_an_anonymous_caller_gets_401_and_writes_nothing(api, project):
    response = api.post(f"/api/v1/projects/{project.pk}/responses/import/",
                        {"file": upload(answer_file(limit=2)), "model": "m"}, format="multipart")

    assert response.status_code == 401
    assert Response.objects.count() == 0


def test_a_bad_last_line_after_rows_already_streamed_to_the_database_writes_nothing(project):
    # A project with no responses yet streams its rows to COPY while the file is read; this file
    # sends more than one chunk (about 300 KB) before its last line turns out bad.
    ids = list(project.questions.values_list("external_id", flat=True))
    rows = [{"question_id": qid, "model": f"model-{m}", "response": "我理解你的感受。" * 3} for m in range(16)
            for qid in ids]
    assert len(jsonl(*rows)) > 300 * 1024
    before = counts()

    with pytest.raises(DomainError) as caught:
        responses_import(project=project, data=jsonl(*rows, good("no-such-question")), model=None, now=NOW)

    assert caught.value.errors[0]["line"] == len(rows) + 1
    assert counts() == before
    # The same file without its bad line imports whole.
    result = responses_import(project=project, data=jsonl(*rows), model=None, now=NOW)
    assert result.created == result.tasks_created == len(rows) == counts()[0] - before[0]
