"""Large imports: an upload Django spooled to disk is read line by line, under a 500 MB cap that
the input guard, the API and the page all enforce with the same message."""
import io
import json
from datetime import UTC, datetime

import pytest
from django.core.files.uploadedfile import InMemoryUploadedFile, SimpleUploadedFile, TemporaryUploadedFile
from django.urls import reverse

from annotation.exchange.bulk import CopyBuffer
from annotation.models import Question, Response, Task
from annotation.services import project_create
from rubrics.models import RubricItem, RubricVersion
from tests.annotation.test_import_questions import heartbench_row, jsonl

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
MB = 1024 * 1024
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def project(pm):
    return project_create(name="Large imports", created_by=pm)


def big_rows(n: int, turn_bytes: int) -> list[dict]:
    """n HeartBench rows whose final user turn is about `turn_bytes` of UTF-8."""
    text = "我最近总是睡不着，" * (turn_bytes // 27 + 1)
    return [heartbench_row(f"big-{i}", dialogue=[{"role": "A", "content": f"{i}:{text}"}]) for i in range(n)]


def post_questions(api, pm, project, content: bytes, name: str = "questions.jsonl"):
    api.force_authenticate(pm)
    file = io.BytesIO(content)  # not an UploadedFile: the test client reads it whole to encode the body
    file.name = name
    return api.post(f"/api/v1/projects/{project.pk}/questions/import/", {"file": file}, format="multipart",
                    HTTP_ACCEPT_LANGUAGE="en")


def snapshot(project) -> tuple[list, list]:
    questions = list(Question.objects.filter(project=project).order_by("external_id").values_list(
        "external_id", "dialogue", "final_user_turn", "difficulty", "primary_scene"))
    items = list(RubricItem.objects.filter(version__rubric=project.rubric).order_by("item_key").values_list(
        "item_key", "dimension_id", "score", "content", "tags"))
    return questions, items


def test_a_25_mb_file_imports_through_the_api_with_the_default_settings(api, pm, project):
    content = jsonl(*big_rows(200, 128 * 1024))
    assert 25 * MB <= len(content) < 26 * MB

    response = post_questions(api, pm, project, content)

    assert response.status_code == 201, response.content[:300]
    assert response.json()["questions_created"] == 200 and response.json()["items_created"] == 600
    stored = Question.objects.get(project=project, external_id="big-199")
    assert stored.final_user_turn.startswith("199:我最近总是睡不着")
    assert len(stored.final_user_turn.encode()) > 128 * 1024


def test_a_spooled_upload_gives_the_same_questions_as_the_same_rows_in_memory(api, pm, project):
    rows = jsonl(*(heartbench_row(f"q{i}", primary_scene=f"场景\t{i}\\n") for i in range(50)))
    spooled = rows + b"\n" * (3 * MB)  # blank lines are skipped: same rows, but over FILE_UPLOAD_MAX_MEMORY_SIZE
    other = project_create(name="Small file", created_by=pm)

    small = post_questions(api, pm, other, rows)
    large = post_questions(api, pm, project, spooled)

    assert small.status_code == large.status_code == 201
    assert small.json() == large.json()
    assert snapshot(project) == snapshot(other)


@pytest.mark.parametrize("upload_class", [TemporaryUploadedFile, InMemoryUploadedFile])
def test_the_upload_is_never_read_whole(api, pm, project, monkeypatch, upload_class):
    def read_whole(self, size=-1):
        if size is None or size < 0:
            raise AssertionError("the upload was read whole")
        return self.file.read(size)

    monkeypatch.setattr(upload_class, "read", read_whole)
    rows = jsonl(*(heartbench_row(f"q{i}") for i in range(20)))
    content = rows + b"\n" * (3 * MB) if upload_class is TemporaryUploadedFile else rows

    response = post_questions(api, pm, project, content)

    assert response.status_code == 201 and response.json()["questions_created"] == 20


def test_a_bad_line_deep_in_a_spooled_upload_names_its_line_and_field_and_writes_nothing(api, pm, project):
    rows = [heartbench_row(f"q{i}") for i in range(900)]
    rows[876] = {key: value for key, value in rows[876].items() if key != "rubric"}
    content = jsonl(*rows) + b"\n" * (3 * MB)

    response = post_questions(api, pm, project, content)

    assert response.status_code == 400
    assert response.json()["errors"] == [{"line": 877, "field": "rubric", "code": "field_missing_list",
                                          "params": {"what": "rubric items"},
                                          "message": "missing; expected a non-empty list of rubric items"}]
    assert "line 877" in response.json()["detail"]
    assert (Question.objects.count(), RubricItem.objects.count(), RubricVersion.objects.count()) == (0, 0, 0)


def test_a_file_over_the_cap_is_refused_naming_the_limit_on_the_api_and_the_page(api, pm, project, client,
                                                                                settings):
    settings.RUBRICA_MAX_IMPORT_BYTES = 1 * MB
    content = jsonl(*big_rows(12, 128 * 1024))
    assert len(content) > 1.4 * MB
    client.force_login(pm)
    url = reverse("project_import", args=[project.pk, "questions"])
    on_api = post_questions(api, pm, project, content)
    on_page = client.post(url, {"file": SimpleUploadedFile("q.jsonl", content)}, HTTP_ACCEPT_LANGUAGE="en", **HTMX)
    full_page = client.post(url, {"file": SimpleUploadedFile("q.jsonl", content)}, HTTP_ACCEPT_LANGUAGE="en")

    assert on_api.status_code == 413 and on_api.json()["code"] == "too_large"
    assert "over the import limit of 1.0 MB" in on_api.json()["detail"]
    for response in (on_page, full_page):
        assert response.status_code == 413
        assert "over the import limit of 1.0 MB" in response.content.decode()
    assert Question.objects.count() == 0


def test_a_file_just_over_the_cap_passes_the_guard_and_is_refused_by_the_import(api, pm, project, client, settings):
    # Within the form's allowance for its other fields the guard lets the body through; the
    # import itself then measures the file.
    content = jsonl(*(heartbench_row(f"q{i}") for i in range(20)))
    settings.RUBRICA_MAX_IMPORT_BYTES = len(content) - 10
    client.force_login(pm)
    on_api = post_questions(api, pm, project, content)
    on_page = client.post(reverse("project_import", args=[project.pk, "questions"]),
                          {"file": SimpleUploadedFile("q.jsonl", content)}, HTTP_ACCEPT_LANGUAGE="en", **HTMX)

    assert on_api.status_code == 413 and on_api.json()["code"] == "too_large"
    assert on_page.status_code == 422 and "over the import limit of" in on_page.content.decode()
    assert Question.objects.count() == 0


def test_a_multipart_body_over_the_request_limit_is_still_refused_where_nothing_is_imported(client, pm, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1 * MB
    client.force_login(pm)
    response = client.post(reverse("project_new"), {"name": "x", "file": SimpleUploadedFile("a.bin", b"x" * 2 * MB)},
                           HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 413 and "at most 1.0 MB" in response.content.decode()


def test_a_spooled_responses_upload_imports_and_makes_tasks(api, pm, project):
    questions = jsonl(*(heartbench_row(f"q{i}") for i in range(300)))
    assert post_questions(api, pm, project, questions).status_code == 201
    rows = "".join(json.dumps({"question_id": f"q{i}", "model": "m", "response": "我在这里。" * 800},
                              ensure_ascii=False) + "\n" for i in range(300)).encode()
    assert len(rows) > 3 * MB
    response = api.post(f"/api/v1/projects/{project.pk}/responses/import/",
                        {"file": SimpleUploadedFile("r.jsonl", rows)}, format="multipart")

    assert response.status_code == 201
    assert (response.json()["responses_created"], response.json()["tasks_created"]) == (300, 300)
    assert Response.objects.filter(project=project).count() == Task.objects.filter(project=project).count() == 300


def test_a_responses_file_with_one_bad_line_names_it_and_writes_nothing(api, pm, project):
    assert post_questions(api, pm, project, jsonl(*(heartbench_row(f"q{i}") for i in range(5)))).status_code == 201
    lines = [{"question_id": f"q{i}", "model": "m", "response": "好的。"} for i in range(5)]
    lines.insert(3, {"question_id": "q1", "model": "m", "response": "again"})
    rows = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in lines).encode() + b"\n" * (3 * MB)
    response = api.post(f"/api/v1/projects/{project.pk}/responses/import/",
                        {"file": SimpleUploadedFile("r.jsonl", rows)}, format="multipart")

    assert response.status_code == 400
    assert [(e["line"], e["field"]) for e in response.json()["errors"]] == [(4, "question_id")]
    assert "first on line 2" in response.json()["errors"][0]["message"]
    assert Response.objects.count() == 0


def test_buffered_rows_read_back_as_written_where_there_is_no_copy():
    # The embedded SQLite mode inserts what the buffer holds with bulk_create.
    buffer = CopyBuffer(model=RubricItem, fields=["version_id", "question_ref", "position", "item_key",
                                                 "dimension_id", "score", "content", "tags"])
    rows = [(1, "q\t1", 1, "q\\1:1", 2, None, "line one\nline\\two\r\tend", ["a\\b", "c\td"]),
            (1, "q2", 2, "q2:2", 3, -5, "普通文本", [])]
    buffer.write_row(rows[0])
    buffer.write_rows([rows[1]])
    buffer._file.seek(0)

    decoded = [tuple(row) for row in buffer._decoded()]

    assert decoded == rows and buffer.count == 2
