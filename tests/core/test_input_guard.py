"""No 500 and nothing written for input no view should see: control characters, bodies over the limit,
JSON nested too deep; each refusal names what was wrong in the user's language."""
import json

import pytest
from rest_framework.authtoken.models import Token

from annotation.models import Assignment, Draft, Label
from annotation.services import project_add_member
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def lease(api):
    project = make_project_with_tasks(n_questions=1, items_per_question=3, pm=PMFactory())
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    token, _ = Token.objects.get_or_create(user=expert)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    body = api.post(f"/api/v1/projects/{project.pk}/next-task/").json()
    return project, expert, body


@pytest.mark.parametrize("character", ["\x00", "\x07", "\x1b", "\x7f"])
def test_a_control_character_in_a_note_over_the_api_is_refused_and_nothing_is_saved(api, lease, character):
    project, expert, body = lease
    first = str(body["rubric_items"][0]["id"])

    response = api.put(f"/api/v1/assignments/{body['id']}/draft/",
                       {"labels": {first: 1}, "notes": {first: f"看起来{character}不错"}}, format="json",
                       HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert response.status_code == 400
    payload = response.json()
    assert payload["code"] == "input_control_character"
    assert f"notes.{first}" in payload["detail"] and "控制字符" in payload["detail"]
    assert payload["errors"][0]["field"] == f"notes.{first}"
    assert not Draft.objects.filter(assignment_id=body["id"]).exists()
    assert Label.objects.count() == 0


def test_tab_and_line_breaks_are_text(api, lease):
    project, expert, body = lease
    first = str(body["rubric_items"][0]["id"])

    response = api.put(f"/api/v1/assignments/{body['id']}/draft/",
                       {"labels": {first: 1}, "notes": {first: "第一行\n第二行\t缩进\r\n"}}, format="json")

    assert response.status_code == 200


def test_a_nul_in_the_annotation_page_autosave_is_refused_with_the_field_named(client, lease):
    project, expert, body = lease
    client.force_login(expert)
    key = Assignment.objects.select_related("task").get(pk=body["id"]).task.response.question.external_id + ":1"

    response = client.post(f"/assignments/{body['id']}/draft/", {f"label-{key}": "1", f"note-{key}": "a\x00b"},
                           HTTP_HX_REQUEST="true", HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert response.status_code == 400
    text = response.content.decode()
    assert f"note-{key}" in text and "U+0000" in text and "<html" not in text
    assert not Draft.objects.filter(assignment_id=body["id"]).exists()


def test_a_nul_in_a_search_parameter_is_a_clear_400_not_a_server_error(client, lease):
    project, expert, body = lease
    client.force_login(expert)

    response = client.get(f"/projects/{project.pk}/cases/", {"q": "共情\x00"}, HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 400
    assert "control character" in response.content.decode()


def test_json_nested_two_thousand_deep_is_refused(api, lease):
    project, expert, body = lease
    deep = "[" * 2000 + "]" * 2000

    response = api.generic("PUT", f"/api/v1/assignments/{body['id']}/draft/", deep, content_type="application/json")

    assert response.status_code == 400 and response.json()["code"] == "input_too_deep"


def test_json_nested_just_past_the_limit_is_refused_and_at_the_limit_is_not_our_concern(api, lease):
    project, expert, body = lease
    too_deep = json.dumps({"labels": {}, "notes": {"x": json.loads("[" * 70 + "]" * 70)}})

    response = api.generic("PUT", f"/api/v1/assignments/{body['id']}/draft/", too_deep,
                           content_type="application/json")

    assert response.status_code == 400 and response.json()["code"] == "input_too_deep"


def test_a_body_over_the_limit_gets_a_json_message_on_the_api_and_a_page_on_a_form(api, client, lease, settings):
    project, expert, body = lease
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
    big = json.dumps({"labels": {}, "notes": {"x": "长" * (1024 * 1024)}})

    on_api = api.generic("PUT", f"/api/v1/assignments/{body['id']}/draft/", big, content_type="application/json",
                         HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(expert)
    on_page = client.post(f"/assignments/{body['id']}/draft/", {"note-x": "长" * (1024 * 1024)},
                          HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert on_api.status_code == 413 and on_api.json()["code"] == "input_too_large"
    assert "1.0 MB" in on_api.json()["detail"]
    assert on_page.status_code == 413 and "1.0 MB" in on_page.content.decode()
    assert Label.objects.count() == 0


def test_a_settings_patch_with_a_list_body_is_refused_and_changes_nothing(api):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    token, _ = Token.objects.get_or_create(user=pm)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")

    responses = [api.patch(url, [1, 2], format="json") for url in
                 (f"/api/v1/projects/{project.pk}/", f"/api/v1/projects/{project.pk}/quality-settings/")]

    assert [r.status_code for r in responses] == [400, 400]
    assert {r.json()["code"] for r in responses} == {"input_not_object"}


def test_a_hundred_thousand_unknown_label_keys_get_a_short_answer_that_counts_them(api, lease):
    project, expert, body = lease

    response = api.post(f"/api/v1/assignments/{body['id']}/submit/",
                        {"labels": {str(i): 1 for i in range(100_000)}}, format="json")

    payload = response.json()
    assert response.status_code == 400
    assert len(payload["errors"]) == 100 and payload["errors_omitted"] > 99_900
    assert len(response.content) < 50_000
    assert Label.objects.count() == 0
