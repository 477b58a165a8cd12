"""Judge labels imported from JSONL under a named run: all or nothing, line-and-field errors, idempotent."""
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotation.exchange.jsonl import format_line_error
from annotation.exchange.judge_labels import judge_labels_import
from annotation.models import JudgeLabel, JudgeRun, JudgeTaskResult, Project, Task
from annotation.permissions import grant_manage
from core.errors import DomainError
from tests.factories import PMFactory, ResponseFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db

NOW = timezone.now()
# make_project_with_tasks: questions q0..q2, models model-0 and model-1, three rubric items each.
GOOD_ROWS = [
    {"question_id": "q0", "model": "model-0", "detail": [1, 0, 1], "reason": "命中第1、3条"},
    {"question_id": "q0", "model": "model-1", "detail": [0, 0, 0]},
    {"question_id": "q1", "model": "model-0", "detail": [1, 1, 1], "reason": None},
    {"question_id": "q2", "model": "model-1", "detail": [0, 1, 0], "reason": ""},
]


def jsonl(rows: list) -> bytes:
    return "".join((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n"
                   for row in rows).encode()


@pytest.fixture
def project(pm) -> Project:
    return make_project_with_tasks(n_questions=3, items_per_question=3, models=2, pm=pm)


def do_import(project: Project, rows: list, run: str = "gpt-judge", **options) -> object:
    return judge_labels_import(project=project, data=jsonl(rows), run_name=run, now=NOW, **options)


def labels_of(run: JudgeRun, question: str, model: str) -> list[int]:
    task = Task.objects.get(project=run.project, response__question__external_id=question,
                            response__model_name=model)
    return list(JudgeLabel.objects.filter(run=run, task=task).order_by("rubric_item__position")
                .values_list("value", flat=True))


def assert_nothing_written() -> None:
    assert (JudgeRun.objects.count(), JudgeTaskResult.objects.count(), JudgeLabel.objects.count()) == (0, 0, 0)


def test_good_file_creates_a_done_run_with_labels_by_rubric_position(project: Project) -> None:
    result = do_import(project, GOOD_ROWS, judge_model="gpt-4o", prompt_version="hb-v1")

    run = JudgeRun.objects.get()
    assert (result.run, result.created, result.skipped, result.labels_created) == (run, 4, 0, 12)
    assert (run.name, run.source, run.status, run.judge_model, run.prompt_version) == (
        "gpt-judge", "imported", "done", "gpt-4o", "hb-v1")
    assert run.rubric_version.number == 1
    assert labels_of(run, "q0", "model-0") == [1, 0, 1]
    assert labels_of(run, "q2", "model-1") == [0, 1, 0]
    reasons = dict(JudgeTaskResult.objects.filter(run=run).values_list("task__response__model_name", "reason")
                   .filter(task__response__question__external_id="q0"))
    assert reasons == {"model-0": "命中第1、3条", "model-1": ""}
    assert set(JudgeTaskResult.objects.values_list("status", flat=True)) == {"done"}


BAD_LINES = [
    pytest.param("{not json", None, "not valid JSON", id="not-json"),
    pytest.param("[1, 2]", None, "expected a JSON object, got a list", id="not-an-object"),
    pytest.param({"question_id": "q1", "detail": [1, 0, 1]}, "model", "missing; expected a string",
                 id="missing-model"),
    pytest.param({"question_id": "q1", "model": "model-1"}, "detail", "missing; expected a list of 0/1 values",
                 id="missing-detail"),
    pytest.param({"question_id": "nope", "model": "model-1", "detail": [1, 0, 1]}, "question_id",
                 'unknown question "nope"', id="unknown-question"),
    pytest.param({"question_id": "q1", "model": "gpt-x", "detail": [1, 0, 1]}, "model",
                 'no response of model "gpt-x" to question "q1"', id="unknown-response"),
    pytest.param({"question_id": "q1", "model": "model-1", "detail": [1, 2, 1]}, "detail[1]",
                 "expected 0 or 1, got 2", id="value-not-binary"),
    pytest.param({"question_id": "q1", "model": "model-1", "detail": [1, True, 0]}, "detail[1]",
                 "expected 0 or 1, got true", id="boolean-value"),
    pytest.param({"question_id": "q1", "model": "model-1", "detail": [1, "1", 0]}, "detail[1]",
                 'expected 0 or 1, got "1"', id="string-value"),
    pytest.param({"question_id": "q1", "model": "model-1", "detail": "101"}, "detail",
                 "expected a non-empty list of 0/1 values", id="detail-not-a-list"),
    pytest.param({"question_id": "q1", "model": "model-1", "detail": [1, 0]}, "detail",
                 "expected 3 values (one per rubric item), got 2", id="too-short"),
    pytest.param({"question_id": "q1", "model": "model-1", "detail": [1, 0, 1, 1]}, "detail",
                 "expected 3 values (one per rubric item), got 4", id="too-long"),
    pytest.param({"question_id": "q1", "model": "model-1", "detail": [1, 0, 1], "reason": 7}, "reason",
                 "expected a non-empty string, got 7", id="reason-not-text"),
    pytest.param({"question_id": "q0", "model": "model-0", "detail": [1, 0, 1]}, "question_id",
                 "duplicate labels for model \"model-0\" on question \"q0\" (first on line 1)", id="duplicate"),
]


@pytest.mark.parametrize(("bad", "field", "message"), BAD_LINES)
def test_a_bad_line_writes_nothing_and_names_line_and_field(project: Project, bad, field, message) -> None:
    rows = [GOOD_ROWS[0], bad, *GOOD_ROWS[1:]]

    with pytest.raises(DomainError) as info:
        do_import(project, rows)

    (error,) = info.value.errors
    assert (error["line"], error["field"]) == (2, field)
    assert message in error["message"]
    assert "nothing was imported" in info.value.message
    assert_nothing_written()


def test_wrong_length_reads_as_line_field_expected_got(project: Project) -> None:
    rows = [*GOOD_ROWS, {"question_id": "q2", "model": "model-0", "detail": [1, 1]}]

    with pytest.raises(DomainError) as info:
        do_import(project, rows)

    assert format_line_error(info.value.errors[0]) == (
        'line 5: field "detail": expected 3 values (one per rubric item), got 2')
    assert_nothing_written()


def test_response_without_a_task_on_the_current_version_is_refused(project: Project) -> None:
    question = project.questions.get(external_id="q1")
    ResponseFactory(question=question, project=project, model_name="late-model")  # imported, no task made

    with pytest.raises(DomainError) as info:
        do_import(project, [{"question_id": "q1", "model": "late-model", "detail": [1, 0, 1]}])

    assert info.value.errors == [{"line": 1, "field": "question_id", "message":
                                  'the response of model "late-model" to question "q1" has no task on rubric '
                                  "version 1"}]
    assert_nothing_written()


def test_every_bad_line_is_listed_in_line_order(project: Project) -> None:
    rows = [{"question_id": "zz", "model": "model-0", "detail": [1]}, GOOD_ROWS[1], "oops",
            {"question_id": "q1", "model": "model-0", "detail": [0, 0]}]

    with pytest.raises(DomainError) as info:
        do_import(project, rows)

    assert [(e["line"], e["field"]) for e in info.value.errors] == [(1, "question_id"), (3, None), (4, "detail")]
    assert_nothing_written()


def test_empty_file_and_missing_run_name_are_refused(project: Project) -> None:
    with pytest.raises(DomainError, match="no rows"):
        do_import(project, [])
    with pytest.raises(DomainError) as info:
        do_import(project, GOOD_ROWS, run="  ")
    assert info.value.errors[0]["field"] == "run"
    assert_nothing_written()


def test_reimporting_the_same_file_changes_nothing(project: Project) -> None:
    do_import(project, GOOD_ROWS)
    before = list(JudgeLabel.objects.order_by("pk").values_list("pk", "value"))

    again = do_import(project, GOOD_ROWS)

    assert (again.created, again.skipped, again.labels_created) == (0, 4, 0)
    assert list(JudgeLabel.objects.order_by("pk").values_list("pk", "value")) == before
    assert JudgeRun.objects.count() == 1 and JudgeTaskResult.objects.count() == 4


def test_new_rows_are_added_to_an_existing_run(project: Project) -> None:
    do_import(project, GOOD_ROWS[:2])

    result = do_import(project, GOOD_ROWS)

    assert (result.created, result.skipped) == (2, 2)
    assert JudgeRun.objects.count() == 1 and JudgeTaskResult.objects.count() == 4


@pytest.mark.parametrize(("changed", "field"), [
    ({"detail": [0, 0, 1]}, "detail"),
    ({"reason": "另一种理由"}, "reason"),
])
def test_different_labels_under_an_existing_run_name_are_an_error(project: Project, changed, field) -> None:
    do_import(project, GOOD_ROWS)
    before = list(JudgeLabel.objects.order_by("pk").values_list("pk", "value"))
    rows = [{**GOOD_ROWS[0], **changed}, *GOOD_ROWS[1:]]

    with pytest.raises(DomainError) as info:
        do_import(project, rows)

    (error,) = info.value.errors
    assert (error["line"], error["field"]) == (1, field)
    assert "never replaced" in error["message"]
    assert list(JudgeLabel.objects.order_by("pk").values_list("pk", "value")) == before


def test_a_different_judge_model_under_an_existing_run_is_an_error(project: Project) -> None:
    do_import(project, GOOD_ROWS[:1], judge_model="gpt-4o")

    with pytest.raises(DomainError) as info:
        do_import(project, GOOD_ROWS, judge_model="claude")

    assert info.value.errors[0]["field"] == "judge_model"
    assert JudgeTaskResult.objects.count() == 1


def test_a_live_run_name_cannot_take_imported_labels(project: Project) -> None:
    JudgeRun.objects.create(project=project, rubric_version=Task.objects.first().rubric_version, name="live",
                            source=JudgeRun.Source.LIVE, base_url="http://127.0.0.1:9/v1", judge_model="m")

    with pytest.raises(DomainError) as info:
        do_import(project, GOOD_ROWS, run="live")

    assert info.value.errors[0]["field"] == "run"
    assert JudgeTaskResult.objects.count() == 0


# --- Command line --------------------------------------------------------------------------

def test_command_imports_and_reports(project: Project, tmp_path: Path, capsys) -> None:
    path = tmp_path / "judge.jsonl"
    path.write_bytes(jsonl(GOOD_ROWS))

    call_command("import_judge", str(project.pk), str(path), "--run", "cli-run", "--judge-model", "gpt-4o",
                 "--prompt-version", "v1")

    run = JudgeRun.objects.get()
    assert (run.name, run.judge_model, run.prompt_version) == ("cli-run", "gpt-4o", "v1")
    assert "Imported 4 judged responses (12 labels)" in capsys.readouterr().out


def test_command_prints_every_line_error_and_writes_nothing(project: Project, tmp_path: Path, capsys) -> None:
    path = tmp_path / "judge.jsonl"
    path.write_bytes(jsonl([*GOOD_ROWS, {"question_id": "q1", "model": "model-1", "detail": [1, 0]}]))

    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_judge", str(project.pk), str(path), "--run", "cli-run")

    assert 'line 5: field "detail": expected 3 values (one per rubric item), got 2' in capsys.readouterr().err
    assert_nothing_written()


# --- API -------------------------------------------------------------------------------------

def upload(rows: list) -> SimpleUploadedFile:
    return SimpleUploadedFile("judge.jsonl", jsonl(rows), content_type="application/x-ndjson")


def url(project: Project) -> str:
    return f"/api/v1/projects/{project.pk}/judge-labels/import/"


def test_api_imports_for_the_projects_pm(api, pm, project: Project) -> None:
    api.force_authenticate(pm)

    response = api.post(url(project), {"file": upload(GOOD_ROWS), "run": "api-run", "judge_model": "gpt-4o",
                                       "prompt_version": "v1"}, format="multipart")

    assert response.status_code == 201, response.content
    run = JudgeRun.objects.get()
    assert response.json() == {"run": run.pk, "created": 4, "labels_created": 12, "skipped": 0}
    assert run.created_by == pm


def test_api_lists_line_errors_and_writes_nothing(api, pm, project: Project) -> None:
    api.force_authenticate(pm)
    rows = [*GOOD_ROWS[:2], {"question_id": "q1", "model": "model-1", "detail": [1, 0, 1, 0]}]

    response = api.post(url(project), {"file": upload(rows), "run": "api-run"}, format="multipart")

    assert response.status_code == 400
    assert response.json()["errors"] == [{"line": 3, "field": "detail",
                                          "message": "expected 3 values (one per rubric item), got 4",
                                          "code": "wrong_count", "params": {"expected": 3, "got": 4}}]
    assert_nothing_written()


def test_api_is_404_for_another_pm_and_for_experts(api, expert, project: Project) -> None:
    other_pm = PMFactory()
    grant_manage(other_pm, make_project_with_tasks(pm=other_pm))
    for user in (other_pm, expert):
        api.force_authenticate(user)
        response = api.post(url(project), {"file": upload(GOOD_ROWS), "run": "x"}, format="multipart")
        assert response.status_code == 404
    assert_nothing_written()


def test_api_requires_a_run_name(api, pm, project: Project) -> None:
    api.force_authenticate(pm)

    response = api.post(url(project), {"file": upload(GOOD_ROWS)}, format="multipart")

    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["run"]
    assert_nothing_written()


def test_an_import_records_the_configuration_version_it_was_asked_with(project: Project, pm) -> None:
    from annotation.judging.configs import builtin_prompt_template, judge_config_create

    strict = judge_config_create(project=project, name="strict", prompt_template=builtin_prompt_template(),
                                 judge_model="gpt-4o", temperature=0.2, created_by=pm, now=NOW)
    loose = judge_config_create(project=project, name="loose", prompt_template=builtin_prompt_template(),
                                created_by=pm, now=NOW)
    elsewhere = judge_config_create(project=make_project_with_tasks(n_questions=1), name="x",
                                    prompt_template=builtin_prompt_template(), created_by=pm, now=NOW)

    for bad in (elsewhere.pk, "nine"):
        with pytest.raises(DomainError) as caught:
            do_import(project, GOOD_ROWS, config_version=bad)
        assert caught.value.errors[0]["field"] == "config_version"
        assert_nothing_written()

    do_import(project, GOOD_ROWS[:2], config_version=strict.pk)
    run = JudgeRun.objects.get()
    assert (run.config_version_id, run.judge_model) == (strict.pk, "gpt-4o")  # the model from the version
    with pytest.raises(DomainError) as caught:
        do_import(project, GOOD_ROWS[2:], config_version=loose.pk)
    assert caught.value.errors[0]["field"] == "config_version"
    do_import(project, GOOD_ROWS[2:], config_version=strict.pk)
    assert JudgeTaskResult.objects.filter(run=run).count() == 4
