"""Judge configurations as immutable versions: the built-in prompt, edits, refusals, diffs, runs recording them."""
import importlib
from datetime import UTC, datetime

import pytest
from django.apps import apps
from django.urls import reverse

from annotation.judging.configs import (
    DEFAULT_CONFIG_NAME,
    builtin_prompt_template,
    judge_config_create,
    judge_config_diff,
    judge_config_edit,
    judge_config_version_for_run,
)
from annotation.judging.prompt import render_judge_prompt
from annotation.models import JudgeConfig, JudgeConfigVersion, JudgeRun
from core.errors import Conflict, DomainError
from tests.factories import PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
MIGRATION = importlib.import_module("annotation.migrations.0030_judge_items")


@pytest.fixture
def project():
    return make_project_with_tasks(n_questions=1, pm=PMFactory())


def test_the_builtin_template_filled_in_is_exactly_the_prompt_live_runs_send():
    dialogue = [{"role": "A", "content": "我最近睡不好"}, {"role": "B", "content": "多久了？"}]
    rubric = [{"dimension": "共情", "score": 2, "content": "回应情绪"}, {"dimension": "其他", "score": None,
                                                                      "content": "不冒充用户"}]
    sent = render_judge_prompt(dialogue, "听起来很辛苦。", rubric)

    filled = builtin_prompt_template().format(dialogue="A: 我最近睡不好\nB: 多久了？", response="听起来很辛苦。",
                                              rubric="[共情][2] 回应情绪\n[其他][None] 不冒充用户", count=2)

    assert filled == sent
    # The migration's frozen copy is today's template.
    assert MIGRATION.BUILTIN_TEMPLATE == builtin_prompt_template()


def test_editing_writes_a_new_version_and_leaves_the_old_one_as_it_was(project):
    first = judge_config_create(project=project, name="strict", prompt_template=builtin_prompt_template(),
                                judge_model="qwen", base_url="https://llm.example/v1", created_by=None, now=NOW)

    second = judge_config_edit(config=first.config, prompt_template=builtin_prompt_template() + "\n请再检查一遍。",
                               judge_model="qwen", base_url="https://llm.example/v1", temperature="0.3",
                               params='{"max_tokens": 2048}', note="re-check line", created_by=None, now=NOW)

    first.refresh_from_db()
    assert (first.number, second.number) == (1, 2)
    assert "请再检查一遍" not in first.prompt_template and first.temperature == 0
    assert (second.temperature, second.params) == (0.3, {"max_tokens": 2048})


def test_an_edit_that_changes_nothing_writes_nothing(project):
    first = judge_config_create(project=project, name="strict", prompt_template=builtin_prompt_template(),
                                created_by=None, now=NOW)

    with pytest.raises(Conflict) as error:
        judge_config_edit(config=first.config, prompt_template=builtin_prompt_template(), temperature="0",
                          created_by=None, now=NOW)

    assert error.value.code == "judge_config_unchanged" and error.value.params == {"number": 1}
    assert JudgeConfigVersion.objects.count() == 1


def test_bad_fields_are_all_named_and_nothing_is_written(project):
    with pytest.raises(DomainError) as error:
        judge_config_create(project=project, name="", prompt_template="评分：{dialogue} {reply}",
                            temperature="3", params="[1, 2]", base_url="ftp://x", created_by=None, now=NOW)

    fields = {e["field"]: e["code"] for e in error.value.errors}
    assert fields == {"name": "required", "prompt_template": "judge_prompt_placeholders", "temperature":
                      "temperature_range", "params": "params_not_object", "base_url": "bad_url"}
    missing = next(e for e in error.value.errors if e["field"] == "prompt_template")["params"]["missing"]
    assert "{response}" in missing and "{reply}" in missing
    assert not JudgeConfig.objects.exists()


def test_the_diff_shows_the_changed_prompt_lines_and_settings(project):
    first = judge_config_create(project=project, name="strict", prompt_template="甲\n乙 {dialogue}\n丙 {response}\n"
                                "丁 {rubric} {count}", created_by=None, now=NOW)
    second = judge_config_edit(config=first.config, prompt_template="甲\n乙 {dialogue}\n丙改 {response}\n"
                               "丁 {rubric} {count}", temperature="0.5", created_by=None, now=NOW)

    diff = judge_config_diff(old=first, new=second)

    changed = [(line.kind, line.text) for line in diff.lines if line.kind != "same"]
    assert changed == [("removed", "丙 {response}"), ("added", "丙改 {response}")]
    assert [(c.field, c.old, c.new) for c in diff.settings] == [("temperature", "0", "0.5")]


def test_a_live_runs_version_is_found_again_for_the_same_settings_and_written_for_new_ones(project):
    one = judge_config_version_for_run(project=project, judge_model="m", base_url="http://127.0.0.1:8671/v1",
                                       created_by=None, now=NOW)
    again = judge_config_version_for_run(project=project, judge_model="m", base_url="http://127.0.0.1:8671/v1",
                                         created_by=None, now=NOW)
    other = judge_config_version_for_run(project=project, judge_model="m2", base_url="http://127.0.0.1:8671/v1",
                                         created_by=None, now=NOW)

    assert one.pk == again.pk and (one.number, other.number) == (1, 2)
    assert one.config.name == DEFAULT_CONFIG_NAME and one.prompt_template == builtin_prompt_template()


def test_the_migration_gives_every_existing_run_a_version_of_its_own_settings(project):
    version = project.rubric.versions.get()
    live = [JudgeRun.objects.create(project=project, rubric_version=version, name=f"live-{i}", judge_model="qwen",
                                    base_url="https://llm.example/v1", prompt_version="heartbench-judge-v1",
                                    source=JudgeRun.Source.LIVE, status=JudgeRun.Status.DONE) for i in range(2)]
    imported = JudgeRun.objects.create(project=project, rubric_version=version, name="hb", judge_model="gpt-4o",
                                       prompt_version="their-v3", source=JudgeRun.Source.IMPORTED,
                                       status=JudgeRun.Status.DONE)

    MIGRATION.runs_to_versions(apps, None)

    for run in (*live, imported):
        run.refresh_from_db()
    assert live[0].config_version_id == live[1].config_version_id
    assert live[0].config_version.prompt_template == builtin_prompt_template()
    assert imported.config_version.params == {"prompt_version": "their-v3"}
    assert imported.config_version.config.name == "imported-judge"


def test_the_pm_writes_a_version_on_the_page_and_lands_on_its_diff(client, project):
    first = judge_config_create(project=project, name="strict", prompt_template=builtin_prompt_template(),
                                created_by=None, now=NOW)
    client.force_login(project.created_by)
    url = reverse("judge_config", args=[project.pk, first.config_id])

    response = client.post(url, {"prompt_template": builtin_prompt_template() + "\n最后再核对条数。",
                                 "temperature": "0", "judge_model": "", "base_url": "", "params": ""})

    assert response.status_code == 302 and "diff" in response["Location"]
    diff = client.get(response["Location"], HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "最后再核对条数。" in diff and 'class="diff-added"' in diff
    page = client.get(url, {"v": 1}).content.decode()
    assert "最后再核对条数" not in page.split('class="prompt-text">')[1].split("</pre>")[0]


def test_a_refused_version_re_renders_the_form_with_what_was_typed(client, project):
    first = judge_config_create(project=project, name="strict", prompt_template=builtin_prompt_template(),
                                created_by=None, now=NOW)
    client.force_login(project.created_by)

    response = client.post(reverse("judge_config", args=[project.pk, first.config_id]),
                           {"prompt_template": "只有 {dialogue}", "temperature": "9"}, HTTP_ACCEPT_LANGUAGE="en")

    html = response.content.decode()
    assert response.status_code == 422
    assert "只有 {dialogue}" in html and "from 0 to 2" in html
    assert JudgeConfigVersion.objects.count() == 1


def test_starting_a_live_run_records_the_version_it_is_asked_with(project, settings):
    from annotation.judging.runs import judge_run_start

    settings.RUBRICA_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]  # the admin allows the loopback test host

    run = judge_run_start(project=project, name="run-1", base_url="http://127.0.0.1:8671/v1", judge_model="fake",
                          api_key="sk-test", api_key_env=None, requests_per_second=5, created_by=project.created_by)
    second = judge_run_start(project=project, name="run-2", base_url="http://127.0.0.1:8671/v1",
                             judge_model="fake", api_key="sk-test", api_key_env=None, requests_per_second=5,
                             created_by=project.created_by)

    assert run.config_version is not None and run.config_version_id == second.config_version_id
    assert (run.config_version.judge_model, run.config_version.temperature) == ("fake", 0.0)
    assert run.config_version.prompt_template == builtin_prompt_template()


def test_the_configurations_page_lists_each_one_with_its_version_count_and_latest_model(client, project):
    first = judge_config_create(project=project, name="strict", prompt_template=builtin_prompt_template(),
                                judge_model="qwen", base_url="https://llm.example/v1", created_by=None, now=NOW)
    judge_config_edit(config=first.config, prompt_template=builtin_prompt_template(), judge_model="deepseek",
                      base_url="https://llm.example/v1", temperature="0.2", created_by=None, now=NOW)
    client.force_login(project.created_by)

    page = client.get(reverse("judge_configs", args=[project.pk]), HTTP_ACCEPT_LANGUAGE="en")

    html = page.content.decode()
    assert page.status_code == 200
    row = html[html.index(">strict</a>"):]
    row = row[:row.index("</tr>")]
    assert '<td class="num">2</td>' in row and "deepseek" in row and "qwen" not in row


def test_the_built_in_template_through_the_template_renderer_is_the_built_in_prompt():
    from annotation.judging.prompt import render_judge_prompt_from

    dialogue = [{"role": "A", "content": "我最近睡不好"}, {"role": "B", "content": "多久了？"}]
    rubric = [{"dimension": "共情", "score": 2, "content": "回应情绪"}]
    assert render_judge_prompt_from(builtin_prompt_template(), dialogue, "嗯。", rubric) == render_judge_prompt(
        dialogue, "嗯。", rubric)


def test_the_start_form_offers_the_projects_versions_and_a_run_records_the_one_chosen(client, project):
    pm = project.created_by or PMFactory()
    mine = judge_config_create(project=project, name="strict", prompt_template=builtin_prompt_template(),
                               judge_model="judge-x", base_url="https://judge.example.org/v1", temperature=0.3,
                               created_by=None, now=NOW)
    other = judge_config_create(project=make_project_with_tasks(n_questions=1), name="elsewhere",
                                prompt_template=builtin_prompt_template(), created_by=None, now=NOW)
    client.force_login(pm)
    url = reverse("judge_runs", args=[project.pk])

    page = client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert f'<option value="{mine.pk}">strict · v1 · judge-x</option>' in page
    assert "elsewhere" not in page and "Built-in HeartBench prompt, temperature 0" in page

    refused = client.post(url, {"name": "r0", "config_version": other.pk, "api_key": "sk-x",
                                "requests_per_second": 2}, HTTP_ACCEPT_LANGUAGE="en")
    assert refused.status_code == 422 and not JudgeRun.objects.exists()
    client.post(url, {"name": "r1", "config_version": mine.pk, "api_key": "sk-x", "requests_per_second": 2})
    run = JudgeRun.objects.get(name="r1")
    assert (run.config_version_id, run.judge_model, run.base_url) == (mine.pk, "judge-x", "https://judge.example.org/v1")
