"""Importing questions: HeartBench and HealthBench JSONL, all or nothing, idempotent; CLI and API."""
import json
import time
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from annotation.exchange.questions import questions_import
from annotation.exchange.tasks import question_search_index_task, question_search_merge_task
from annotation.models import Question, QuestionSearch, Task
from annotation.services import project_create
from core.errors import DomainError
from rubrics.models import RubricItem, RubricVersion
from tests.factories import ExpertFactory, PMFactory

pytestmark = pytest.mark.django_db

HEARTBENCH = Path(__file__).resolve().parents[2] / ".." / "shared" / "heartbench"
QUESTION_ALL = HEARTBENCH / "question_all.jsonl"
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def heartbench_row(question_id: str = "q1", **changes) -> dict:
    row = {
        "question_id": question_id,
        "dialogue": [{"role": "A", "content": "最近总是睡不着。"},
                     {"role": "B", "content": "能多说说是什么让你睡不着吗？"},
                     {"role": "A", "content": "工作压力很大，一闭眼就想到明天的汇报。"}],
        "rubric": [{"dimension": "温暖", "score": 3, "content": "AI表达对用户压力的理解和共情"},
                   {"dimension": "言语表达", "score": -10, "content": "AI一次性提供8条或以上的建议"},
                   {"dimension": "其他", "score": None, "content": "AI扮演用户本身进行发言"}],
        "difficulty": "hard",
        "primary_scene": "职场心理",
        "secondary_scene": "压力管理",
    }
    row.update(changes)
    return row


def healthbench_row(**changes) -> dict:
    row = {
        "prompt": [{"role": "system", "content": "You are a careful assistant."},
                   {"role": "user", "content": "I have had a headache for three days."},
                   {"role": "assistant", "content": "How severe is it, and do you have a fever?"},
                   {"role": "user", "content": "Mild, no fever. Should I worry?"}],
        "rubrics": [{"criterion": "Asks about warning signs such as vision changes", "points": 6,
                     "tags": ["level:example", "axis:context_awareness"]},
                    {"criterion": "Is written in plain language", "points": 3,
                     "tags": ["level:example", "axis:communication_quality"]},
                    {"criterion": "States a diagnosis with certainty", "points": -5,
                     "tags": ["level:example", "axis:accuracy"]},
                    {"criterion": "Responds warmly", "points": 2, "tags": ["axis:温暖"]}],
        "example_tags": ["theme:context_seeking", "difficulty:hard"],
        "prompt_id": "hb-prompt-0001",
    }
    row.update(changes)
    return row


def jsonl(*rows) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def with_item(row: dict, index: int, **changes) -> dict:
    rubric = [dict(item) for item in row["rubric"]]
    rubric[index].update(changes)
    return {**row, "rubric": rubric}


def counts() -> tuple[int, int, int, int]:
    return (Question.objects.count(), RubricItem.objects.count(), RubricVersion.objects.count(),
            Task.objects.count())


@pytest.fixture
def project(pm):
    return project_create(name="HeartBench", created_by=pm)


@pytest.fixture
def seeded(project):
    """A project that already holds one imported question, so "nothing written" is visible."""
    questions_import(project=project, data=jsonl(heartbench_row("seed")), now=NOW, source="seed.jsonl")
    return project


# HeartBench, the real file.

def test_the_heartbench_file_imports_every_question_and_rubric_item(project):
    result = questions_import(project=project, data=QUESTION_ALL.read_bytes(), now=NOW, source="question_all.jsonl")

    version = RubricVersion.objects.get(rubric=project.rubric)
    assert (result.created, result.items_created, result.skipped, result.version) == (296, 3114, 0, 1)
    assert project.questions.count() == 296
    assert version.items.count() == 3114
    assert version.items.filter(score__isnull=True).count() == 295
    assert version.is_published
    assert version.changelog == "Imported 296 questions from question_all.jsonl"


def test_importing_the_heartbench_file_twice_adds_nothing(project):
    data = QUESTION_ALL.read_bytes()
    questions_import(project=project, data=data, now=NOW, source="question_all.jsonl")
    before = counts()

    result = questions_import(project=project, data=data, now=NOW, source="question_all.jsonl")

    assert (result.created, result.items_created, result.skipped, result.version) == (0, 0, 296, None)
    assert counts() == before


def test_heartbench_rows_keep_stable_item_ids_and_split_off_the_final_user_turn(project):
    first = json.loads(QUESTION_ALL.read_text(encoding="utf-8").splitlines()[0])

    questions_import(project=project, data=QUESTION_ALL.read_bytes(), now=NOW)

    question = Question.objects.get(project=project, external_id=first["question_id"])
    items = list(RubricItem.objects.filter(question_ref=question.external_id).order_by("position")
                 .values_list("item_key", "dimension__name_zh", "score", "content"))
    assert question.full_dialogue() == first["dialogue"]
    assert question.final_user_turn == first["dialogue"][-1]["content"]
    assert (question.difficulty, question.primary_scene, question.secondary_scene) == (
        first["difficulty"], first["primary_scene"], first["secondary_scene"])
    assert items == [(f"{first['question_id']}:{n}", item["dimension"], item["score"], item["content"])
                     for n, item in enumerate(first["rubric"], start=1)]


def test_new_questions_are_published_as_a_new_version_beside_the_old_ones(project):
    lines = QUESTION_ALL.read_bytes().splitlines(keepends=True)
    questions_import(project=project, data=b"".join(lines[:10]), now=NOW)

    result = questions_import(project=project, data=b"".join(lines), now=NOW)

    assert (result.created, result.skipped, result.version) == (286, 10, 2)
    assert RubricVersion.objects.get(rubric=project.rubric, number=2).items.count() == 3114
    assert RubricVersion.objects.get(rubric=project.rubric, number=1).items.count() < 3114


def test_dimensions_may_be_named_by_code_or_english_name(project):
    row = with_item(with_item(heartbench_row(), 0, dimension="warmth"), 1, dimension="Verbal expression")

    questions_import(project=project, data=jsonl(row), now=NOW)

    assert list(RubricItem.objects.order_by("position").values_list("dimension__code", flat=True)) == [
        "warmth", "verbal-expression", "other"]


def test_a_question_already_present_with_different_rubric_is_refused_naming_the_line(seeded):
    before = counts()
    changed = with_item(heartbench_row("seed"), 0, score=5)

    with pytest.raises(DomainError) as caught:
        questions_import(project=seeded, data=jsonl(heartbench_row("fresh"), changed), now=NOW, source="v2.jsonl")

    assert caught.value.errors == [{
        "line": 2, "field": "rubric",
        "message": 'question "seed" already exists with different content (rubric); '
                   "edit rubric items through a draft version"}]
    assert "line 2" in caught.value.message
    assert counts() == before


def test_a_question_already_present_with_a_different_dialogue_is_refused(seeded):
    before = counts()
    changed = heartbench_row("seed", dialogue=[{"role": "A", "content": "换了一句话"}])

    with pytest.raises(DomainError) as caught:
        questions_import(project=seeded, data=jsonl(changed), now=NOW)

    assert (caught.value.errors[0]["line"], caught.value.errors[0]["field"]) == (1, "dialogue")
    assert counts() == before


# Bad files: each names the line and the field, and nothing is written.

GOOD = json.dumps(heartbench_row("ok"), ensure_ascii=False).encode() + b"\n"
LAST_TURN_B = heartbench_row("q2", dialogue=[{"role": "A", "content": "你好"}, {"role": "B", "content": "你好呀"},
                                             {"role": "A", "content": "我很难过"}, {"role": "B", "content": "为什么？"}])
BAD_FILES = [
    ("not utf-8", GOOD + b'{"question_id": "q\xff2"}\n', None, "not valid UTF-8"),
    ("not json", GOOD + b'{"question_id": "q2",\n', None, "not valid JSON"),
    ("not an object", GOOD + b"[1, 2]\n", None, "expected a JSON object, got a list"),
    ("missing field", GOOD + jsonl({k: v for k, v in heartbench_row("q2").items() if k != "rubric"}),
     "rubric", "missing; expected a non-empty list of rubric items"),
    ("wrong type", GOOD + jsonl(with_item(heartbench_row("q2"), 1, score="high")),
     "rubric[1].score", 'expected an integer or null, got "high"'),
    ("boolean score", GOOD + jsonl(with_item(heartbench_row("q2"), 0, score=True)),
     "rubric[0].score", "expected an integer or null, got true"),
    ("unknown dimension", GOOD + jsonl(with_item(heartbench_row("q2"), 0, dimension="同理心")),
     "rubric[0].dimension", 'unknown dimension "同理心"'),
    ("bad difficulty", GOOD + jsonl(heartbench_row("q2", difficulty="extreme")),
     "difficulty", 'expected "normal" or "hard", got "extreme"'),
    ("bad role", GOOD + jsonl(heartbench_row("q2", dialogue=[{"role": "C", "content": "嗨"}])),
     "dialogue[0].role", 'expected "A" or "B", got "C"'),
    ("empty dialogue", GOOD + jsonl(heartbench_row("q2", dialogue=[])),
     "dialogue", "expected a non-empty list of turns, got a list"),
    ("last turn not A", GOOD + jsonl(LAST_TURN_B), "dialogue[3].role", "the last turn must be the user's"),
    ("empty item content", GOOD + jsonl(with_item(heartbench_row("q2"), 2, content="  ")),
     "rubric[2].content", "expected a non-empty string"),
    ("question id not a string", GOOD + jsonl(heartbench_row(42)), "question_id", "expected a non-empty string"),
    ("duplicate id", GOOD + GOOD, "question_id", 'duplicate question id "ok" (first on line 1)'),
    ("neither format", GOOD + jsonl({"text": "hello"}), None, "expected a HeartBench row"),
    ("nul character", GOOD + jsonl(with_item(heartbench_row("q2"), 0, content="a\u0000b")),
     "rubric[0].content", "contains a NUL character"),
    ("unpaired surrogate", GOOD + json.dumps(heartbench_row("q2", primary_scene="\ud800")).encode(),
     "primary_scene", "contains an unpaired surrogate escape"),
    ("score out of range", GOOD + jsonl(with_item(heartbench_row("q2"), 0, score=2**40)),
     "rubric[0].score", "expected an integer between -2147483647 and 2147483647, got 1099511627776"),
    # orjson reads these as floats or refuses them: the standard decoder's reading is what the PM sees.
    ("score past 64 bits", GOOD + jsonl(with_item(heartbench_row("q2"), 0, score=2**70)),
     "rubric[0].score", "expected an integer between -2147483647 and 2147483647, got 1180591620717411303424"),
    ("score not a number", GOOD + jsonl(with_item(heartbench_row("q2"), 0, score=float("nan"))),
     "rubric[0].score", "expected an integer or null, got NaN"),
    ("integer too long for Python", GOOD + b'{"question_id": 1' + b"1" * 5000 + b"}\n", None,
     "not valid JSON (ValueError: Exceeds the limit"),
    ("nested too deeply", GOOD + b"[" * 100_000 + b"\n", None, "not valid JSON (RecursionError"),
    ("healthbench last turn assistant", GOOD + jsonl(healthbench_row(prompt=healthbench_row()["prompt"][:3])),
     "prompt[2].role", 'the last turn must be the user\'s ("user"), got "assistant"'),
    ("healthbench bad role", GOOD + jsonl(healthbench_row(prompt=[{"role": "doctor", "content": "hi"}])),
     "prompt[0].role", 'expected "user" or "assistant" or "system", got "doctor"'),
    ("healthbench points missing", GOOD + jsonl(healthbench_row(rubrics=[{"criterion": "x", "tags": []}])),
     "rubrics[0].points", "missing; expected an integer"),
    ("healthbench bad difficulty tag", GOOD + jsonl(healthbench_row(example_tags=["difficulty:extreme"])),
     "example_tags", 'expected "normal" or "hard", got "extreme"'),
]


@pytest.mark.parametrize(("content", "field", "message"), [case[1:] for case in BAD_FILES],
                         ids=[case[0] for case in BAD_FILES])
def test_a_bad_line_is_reported_with_its_field_and_nothing_is_written(seeded, content, field, message):
    before = counts()

    with pytest.raises(DomainError) as caught:
        questions_import(project=seeded, data=content, now=NOW, source="bad.jsonl")

    error = caught.value.errors[0]
    assert (error["line"], error["field"]) == (2, field)
    assert message in error["message"]
    assert caught.value.message.startswith("bad.jsonl: 1 error, nothing was imported. First: line 2: ")
    assert caught.value.status == 400
    assert counts() == before


@pytest.mark.parametrize("content", [b"", b"\n  \n\r\n"], ids=["empty", "only blank lines"])
def test_an_empty_file_is_refused(seeded, content):
    before = counts()

    with pytest.raises(DomainError) as caught:
        questions_import(project=seeded, data=content, now=NOW, source="empty.jsonl")

    assert caught.value.errors == [{"line": None, "field": None,
                                    "message": "the file has no rows; expected one JSON object per line",
                                    "code": "file_no_rows", "params": {}}]
    assert counts() == before


def test_every_bad_line_is_reported_not_only_the_first(seeded):
    content = (jsonl(heartbench_row("a", difficulty="x")) + GOOD + b"oops\n"
               + jsonl(with_item(heartbench_row("b"), 0, score="high", dimension="?")))

    with pytest.raises(DomainError) as caught:
        questions_import(project=seeded, data=content, now=NOW)

    assert [(e["line"], e["field"]) for e in caught.value.errors] == [
        (1, "difficulty"), (3, None), (4, "rubric[0].dimension"), (4, "rubric[0].score")]


def test_the_error_list_is_capped_and_says_how_many_more(seeded):
    content = b"not json\n" * 60

    with pytest.raises(DomainError) as caught:
        questions_import(project=seeded, data=content, now=NOW, source="junk.jsonl")

    assert len(caught.value.errors) == 50
    assert caught.value.message.startswith("junk.jsonl: 60 errors, nothing was imported.")
    assert "10 more not shown" in caught.value.message


def test_a_file_over_the_cap_is_refused_quickly_without_parsing(seeded, settings):
    settings.RUBRICA_MAX_IMPORT_BYTES = 20 * 1024 * 1024
    before = counts()
    content = b"x" * (50 * 1024 * 1024)
    started = time.perf_counter()

    with pytest.raises(DomainError) as caught:
        questions_import(project=seeded, data=content, now=NOW)

    assert time.perf_counter() - started < 0.5
    assert caught.value.status == 413
    assert "50.0 MB, over the import limit of 20.0 MB" in caught.value.message
    assert counts() == before


def test_the_default_cap_is_500_mb():
    from django.conf import settings

    assert settings.RUBRICA_MAX_IMPORT_BYTES == 500 * 1024 * 1024


def test_a_line_longer_than_any_row_is_refused_with_its_number_and_the_rest_still_checked(project):
    content = jsonl(heartbench_row("a")) + b"x" * (17 * 1024 * 1024) + b"\n" + b"[1]\n"

    with pytest.raises(DomainError) as caught:
        questions_import(project=project, data=content, now=NOW)

    assert [(e["line"], e["message"]) for e in caught.value.errors] == [
        (2, "longer than 16.0 MB; expected one JSON object per line"), (3, "expected a JSON object, got a list")]
    assert Question.objects.filter(project=project).count() == 0


def test_the_size_limit_comes_from_settings(seeded, settings):
    settings.RUBRICA_MAX_IMPORT_BYTES = 100

    with pytest.raises(DomainError) as caught:
        questions_import(project=seeded, data=GOOD, now=NOW)

    assert caught.value.code == "too_large"


def test_a_byte_order_mark_and_windows_line_ends_are_accepted(project):
    content = b"\xef\xbb\xbf" + jsonl(heartbench_row("a"), heartbench_row("b")).replace(b"\n", b"\r\n")

    result = questions_import(project=project, data=content, now=NOW)

    assert result.created == 2


# HealthBench.

def test_healthbench_rows_map_onto_questions_and_rubric_items(project):
    result = questions_import(project=project, data=jsonl(healthbench_row()), now=NOW)

    question = Question.objects.get(project=project)
    items = list(RubricItem.objects.order_by("position")
                 .values_list("item_key", "dimension__code", "score", "content", "tags"))
    assert (result.created, result.items_created) == (1, 4)
    assert question.external_id == "hb-prompt-0001"
    assert question.source_format == Question.SourceFormat.HEALTHBENCH
    assert question.dialogue == [{"role": "A", "content": "I have had a headache for three days."},
                                 {"role": "B", "content": "How severe is it, and do you have a fever?"}]
    assert question.final_user_turn == "Mild, no fever. Should I worry?"
    assert (question.difficulty, question.primary_scene) == ("hard", "context_seeking")
    assert items == [
        ("hb-prompt-0001:1", "curiosity", 6, "Asks about warning signs such as vision changes",
         ["level:example", "axis:context_awareness"]),
        ("hb-prompt-0001:2", "verbal-expression", 3, "Is written in plain language",
         ["level:example", "axis:communication_quality"]),
        ("hb-prompt-0001:3", "verbal-expression", -5, "States a diagnosis with certainty",
         ["level:example", "axis:accuracy"]),
        ("hb-prompt-0001:4", "warmth", 2, "Responds warmly", ["axis:温暖"]),
    ]


def test_a_healthbench_row_without_prompt_id_gets_a_stable_id(project):
    row = {k: v for k, v in healthbench_row(example_tags=[]).items() if k != "prompt_id"}
    questions_import(project=project, data=jsonl(row), now=NOW)

    again = questions_import(project=project, data=jsonl(row), now=NOW)

    question = Question.objects.get(project=project)
    assert question.external_id.startswith("hb-") and len(question.external_id) == 23
    assert question.difficulty == "normal"
    assert (again.created, again.skipped) == (0, 1)


def test_one_file_may_mix_heartbench_and_healthbench_rows(project):
    result = questions_import(project=project, data=jsonl(heartbench_row(), healthbench_row()), now=NOW)

    assert (result.created, result.items_created) == (2, 7)
    assert sorted(Question.objects.values_list("source_format", flat=True)) == ["healthbench", "heartbench"]


# Command line.

def test_the_command_imports_and_prints_a_summary(project):
    out = StringIO()

    call_command("import_questions", str(project.pk), str(QUESTION_ALL), stdout=out)

    assert out.getvalue().strip() == (f"Imported 296 questions (3114 rubric items) into project {project.pk} "
                                      "as rubric version 1; 0 skipped.")


def test_the_command_prints_each_line_error_and_fails(seeded, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(GOOD + jsonl(with_item(heartbench_row("q2"), 1, score="high")) + b"oops\n")
    before = counts()
    err = StringIO()

    with pytest.raises(CommandError, match="bad.jsonl: 2 errors, nothing was imported"):
        call_command("import_questions", str(seeded.pk), str(bad), stderr=err)

    assert err.getvalue().splitlines() == [
        'line 2: field "rubric[1].score": expected an integer or null, got "high"',
        "line 3: not valid JSON (Expecting value at column 1)",
    ]
    assert counts() == before


def test_the_command_refuses_an_unknown_project(tmp_path):
    with pytest.raises(CommandError, match="No project with id 999999"):
        call_command("import_questions", "999999", str(QUESTION_ALL))


# API.

def upload(content: bytes, name: str = "questions.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type="application/x-ndjson")


def test_the_pm_imports_through_the_api(api, pm, project):
    api.force_authenticate(pm)

    response = api.post(f"/api/v1/projects/{project.pk}/questions/import/",
                        {"file": upload(QUESTION_ALL.read_bytes())}, format="multipart")

    assert response.status_code == 201
    assert response.json() == {"questions_created": 296, "items_created": 3114, "skipped": 0, "version": 1,
                               "judge_only": 0}


def test_an_admin_imports_into_any_project(api, admin_user, project):
    api.force_authenticate(admin_user)

    response = api.post(f"/api/v1/projects/{project.pk}/questions/import/", {"file": upload(GOOD)},
                        format="multipart")

    assert response.status_code == 201
    assert Question.objects.filter(project=project).count() == 1


def test_a_bad_file_through_the_api_is_400_with_the_line_errors(api, pm, seeded):
    api.force_authenticate(pm)
    before = counts()

    response = api.post(f"/api/v1/projects/{seeded.pk}/questions/import/",
                        {"file": upload(GOOD + jsonl(with_item(heartbench_row("q2"), 1, score="high")))},
                        format="multipart")

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"line": 2, "field": "rubric[1].score", "message": 'expected an integer or null, got "high"',
         "code": "field_not_integer_or_null", "params": {"got": '"high"'}}]
    assert response.json()["detail"].startswith("questions.jsonl: 1 error, nothing was imported.")
    assert counts() == before


def test_an_unrenderable_value_is_still_a_400_with_an_escaped_message(api, pm, seeded):
    api.force_authenticate(pm)

    response = api.post(f"/api/v1/projects/{seeded.pk}/questions/import/",
                        {"file": upload(json.dumps(with_item(heartbench_row("q2"), 0, score="\ud800")).encode())},
                        format="multipart")

    assert response.status_code == 400
    assert response.json()["errors"][0]["message"] == 'expected an integer or null, got "\\ud800"'


def test_a_request_without_a_file_is_400(api, pm, project):
    api.force_authenticate(pm)

    response = api.post(f"/api/v1/projects/{project.pk}/questions/import/", {}, format="multipart")

    assert response.status_code == 400
    assert [(e["field"], e["code"]) for e in response.json()["errors"]] == [("file", "required")]


def test_a_50_mb_upload_over_a_20_mb_cap_is_refused_with_413_before_parsing(api, pm, seeded, settings):
    settings.RUBRICA_MAX_IMPORT_BYTES = 20 * 1024 * 1024
    api.force_authenticate(pm)
    before = counts()
    started = time.perf_counter()

    response = api.post(f"/api/v1/projects/{seeded.pk}/questions/import/",
                        {"file": upload(b"x" * (50 * 1024 * 1024))}, format="multipart")

    assert time.perf_counter() - started < 10
    assert response.status_code == 413
    assert "over the import limit of 20.0 MB" in response.json()["detail"]
    assert counts() == before


def test_another_pms_project_is_404_and_untouched(api, project):
    other_pm = PMFactory()
    api.force_authenticate(other_pm)

    response = api.post(f"/api/v1/projects/{project.pk}/questions/import/", {"file": upload(GOOD)},
                        format="multipart")

    assert response.status_code == 404
    assert Question.objects.count() == 0


def test_a_missing_project_is_404(api, pm):
    api.force_authenticate(pm)

    response = api.post("/api/v1/projects/999999/questions/import/", {"file": upload(GOOD)}, format="multipart")

    assert response.status_code == 404


def test_an_expert_gets_404_and_writes_nothing(api, project):
    api.force_authenticate(ExpertFactory())

    response = api.post(f"/api/v1/projects/{project.pk}/questions/import/", {"file": upload(GOOD)},
                        format="multipart")

    assert response.status_code == 404
    assert Question.objects.count() == 0


def test_an_anonymous_caller_gets_401_and_writes_nothing(api, project):
    response = api.post(f"/api/v1/projects/{project.pk}/questions/import/", {"file": upload(GOOD)},
                        format="multipart")

    assert response.status_code == 401
    assert Question.objects.count() == 0


def test_the_schema_documents_the_import_and_export_endpoints(api):
    anonymous = api.get("/api/schema/", {"format": "json"})
    api.force_authenticate(PMFactory())
    response = api.get("/api/schema/", {"format": "json"})

    assert anonymous.status_code in (401, 403)  # the schema is behind login, like the API

    paths = response.json()["paths"]
    assert response.status_code == 200
    assert {"/api/v1/projects/{project_id}/questions/import/", "/api/v1/projects/{project_id}/responses/import/",
            "/api/v1/projects/{project_id}/export/"} <= set(paths)
    assert "multipart/form-data" in paths["/api/v1/projects/{project_id}/questions/import/"]["post"]["requestBody"][
        "content"]


def search_texts(project) -> dict[str, str]:
    return dict(QuestionSearch.objects.filter(question__project=project).values_list("question__external_id", "text"))


def test_an_imports_follow_up_writes_the_search_text_the_board_reads(project, django_capture_on_commit_callbacks):
    rows = jsonl(heartbench_row("q1"), heartbench_row(
        "q2", dialogue=[{"role": "A", "content": "Hello there"}, {"role": "B", "content": "嗯"},
                        {"role": "A", "content": "I feel lost"}]))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        questions_import(project=project, data=rows, now=NOW)

    assert search_texts(project) == {}  # the import itself writes none: its follow-up does
    for callback in callbacks:
        callback()
    texts = search_texts(project)
    assert texts["q1"] == "最近总是睡不着。\n能多说说是什么让你睡不着吗？\n工作压力很大，一闭眼就想到明天的汇报。"
    assert texts["q2"] == "HELLO THERE\n嗯\nI FEEL LOST"


def test_the_search_text_follows_every_way_a_dialogue_changes(project):
    questions_import(project=project, data=jsonl(heartbench_row("q1"), heartbench_row("q2")), now=NOW)
    questions = Question.objects.filter(project=project)

    questions.filter(external_id="q1").update(dialogue=[{"role": "A", "content": "Updated in bulk"}])
    question = questions.get(external_id="q2")
    question.final_user_turn = "Changed at last"
    question.save(update_fields=["final_user_turn"])
    created = Question.objects.create(project=project, external_id="q3", dialogue=[], final_user_turn="Made by hand")
    created.save(update_fields=["difficulty"])  # a save that touches no text writes no search row
    Question.objects.bulk_create([Question(project=project, external_id="q4", dialogue=[{"role": "B", "content": "x"}],
                                           final_user_turn="In bulk")])

    texts = search_texts(project)
    assert texts["q1"] == "UPDATED IN BULK\n工作压力很大，一闭眼就想到明天的汇报。"
    assert texts["q2"].startswith("最近总是睡不着。\n") and texts["q2"].endswith("\nCHANGED AT LAST")
    assert texts["q3"] == "MADE BY HAND" and texts["q4"] == "X\nIN BULK"
    # The import's follow-up leaves the rows an edit wrote as they are.
    question_search_index_task()
    assert search_texts(project)["q2"].endswith("\nCHANGED AT LAST")


def test_an_import_sends_its_search_rows_to_one_follow_up_that_writes_them_once(
        project, django_capture_on_commit_callbacks, monkeypatch):
    question_search_index_task()  # whatever earlier tests left unwritten
    monkeypatch.setattr("annotation.exchange.tasks.SEARCH_BATCH", 100)
    sent = []
    monkeypatch.setattr("annotation.exchange.questions.task_send_on_commit", lambda name, **kw: sent.append(name))
    with django_capture_on_commit_callbacks(execute=True):
        result = questions_import(project=project, data=QUESTION_ALL.read_bytes(), now=NOW)

    assert sent == ["annotation.question_search_index"]
    assert not QuestionSearch.objects.filter(question__project=project).exists()
    assert result.created == 296  # three batches and part of a fourth
    assert question_search_index_task() == result.created
    assert question_search_index_task() == 0
    assert QuestionSearch.objects.filter(question__project=project).count() == result.created
    # The name an import queued before migration 0042 does the same work.
    assert question_search_merge_task() == 0
