"""The expert loop over HTTP: next task, draft, submit; scoped to the caller; idempotent."""
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.assignment.services import RING_SIZE
from annotation.models import Assignment, Label, Project, Task
from annotation.services import project_add_member
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


def _client_for(api, user):
    token, _ = Token.objects.get_or_create(user=user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api


@pytest.fixture
def project():
    return make_project_with_tasks(n_questions=2, items_per_question=3, models=1)


@pytest.fixture
def member(project):
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    return expert


def test_next_task_returns_the_blind_assignment(api, project, member):
    response = _client_for(api, member).post(f"/api/v1/projects/{project.pk}/next-task/")

    assert response.status_code == 200
    body = response.json()
    assert set(body) >= {"id", "dialogue", "final_user_turn", "response", "rubric_items", "draft", "expires_at"}
    assert len(body["rubric_items"]) == 3
    assert "model" not in str(sorted(body)) and "model-0" not in response.content.decode()


def test_the_assignment_is_written_exactly_as_drf_renders_its_declared_fields(api, project, member):
    """AssignmentOut writes its answer by hand for speed; it must be DRF's own rendering of the contract."""
    from rest_framework import serializers

    from annotation.api.serializers import AssignmentOut, RubricItemOut, _rubric_items_out
    from annotation.models import Draft
    from rubrics.models import RubricItem

    body = _client_for(api, member).post(f"/api/v1/projects/{project.pk}/next-task/").json()
    lease = Assignment.objects.select_related("task__response__question").get(pk=body["id"])
    question = lease.task.response.question
    question.dialogue = [{"role": "A", "content": "我最近睡不好。"}, {"role": "B", "content": "能多说一点吗？"},
                         {"role": "A", "content": "工作压力很大，总是半夜醒来。"}]
    question.save()
    key = RubricItem.objects.filter(version_id=lease.task.rubric_version_id).first().item_key
    Draft.objects.create(assignment=lease, labels={key: 1}, notes={key: "先保存"}, updated_at=timezone.now())

    for context in ({"now": timezone.now() + timedelta(days=9), "new_lease": True}, {"now": timezone.now()}):
        fast = AssignmentOut(lease, context=context).data
        by_drf = serializers.Serializer.to_representation(AssignmentOut(lease, context=context), lease)
        assert dict(fast) == dict(by_drf)
        assert list(fast) == list(by_drf)
    assert fast["dialogue"][2]["content"].startswith("工作") and fast["draft"]["notes"] == {key: "先保存"}
    # An item without a score (a gate) is written as DRF writes it.
    item = RubricItem.objects.select_related("dimension").filter(version_id=lease.task.rubric_version_id).first()
    item.score = None
    assert _rubric_items_out([item]) == RubricItemOut([item], many=True).data


def test_a_fresh_claim_over_the_api_stays_within_its_query_budget(api, project, member,
                                                                 django_assert_max_num_queries):
    # The draw is random: a start past every task wraps round the ring (one more query),
    # and a control-task draw asks for golden tasks (one more). Tasks at the ring's end and
    # no control tasks give the common path every time.
    Task.objects.filter(project=project).update(shuffle_key=RING_SIZE - 1)
    Project.objects.filter(pk=project.pk).update(control_rate_pct=0)
    client = _client_for(api, member)

    # Measured at 25 with calibration not required: token, project and permissions,
    # eligibility, the draw, the expert's lock with the held-lease and room counts under it
    # (so two tabs cannot both pass the lease limit), the lease (with its savepoints), the
    # rubric items and draft.
    with django_assert_max_num_queries(25):
        response = client.post(f"/api/v1/projects/{project.pk}/next-task/")

    assert response.status_code == 200


def test_the_api_and_the_page_call_a_lease_past_its_expiry_expired(api, client, project, member):
    lease = _client_for(api, member).post(f"/api/v1/projects/{project.pk}/next-task/").json()
    Assignment.objects.filter(pk=lease["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    client.force_login(member)

    body = api.get(f"/api/v1/assignments/{lease['id']}/").json()
    page = client.get(f"/assignments/{lease['id']}/")

    assert lease["state"] == "leased"
    assert (body["status"], body["state"]) == ("leased", "expired")
    assert page.context["state"] == "expired"


def test_next_task_is_204_when_nothing_is_left(api, project, member):
    client = _client_for(api, member)
    for _ in range(2):
        lease = client.post(f"/api/v1/projects/{project.pk}/next-task/").json()
        labels = {item["id"]: 1 for item in lease["rubric_items"]}
        assert client.post(f"/api/v1/assignments/{lease['id']}/submit/", {"labels": labels},
                           format="json").status_code == 201

    assert client.post(f"/api/v1/projects/{project.pk}/next-task/").status_code == 204


def test_a_non_member_gets_404_for_the_project(api, project):
    outsider = ExpertFactory()

    response = _client_for(api, outsider).post(f"/api/v1/projects/{project.pk}/next-task/")

    assert response.status_code == 404


def test_another_experts_assignment_is_404_on_every_endpoint(api, project, member):
    lease = _client_for(api, member).post(f"/api/v1/projects/{project.pk}/next-task/").json()
    labels = {item["id"]: 1 for item in lease["rubric_items"]}
    other = ExpertFactory()
    project_add_member(project=project, user=other)
    client = _client_for(api, other)

    assert client.get(f"/api/v1/assignments/{lease['id']}/").status_code == 404
    assert client.put(f"/api/v1/assignments/{lease['id']}/draft/", {"labels": {}}, format="json").status_code == 404
    assert client.post(f"/api/v1/assignments/{lease['id']}/submit/", {"labels": labels},
                       format="json").status_code == 404
    assert client.post("/api/v1/assignments/999999/submit/", {"labels": labels}, format="json").status_code == 404
    assert Label.objects.count() == 0


def test_the_same_request_with_the_same_idempotency_key_is_replayed(api, project, member):
    client = _client_for(api, member)
    lease = client.post(f"/api/v1/projects/{project.pk}/next-task/").json()
    labels = {item["id"]: 0 for item in lease["rubric_items"]}

    first = client.post(f"/api/v1/assignments/{lease['id']}/submit/", {"labels": labels}, format="json",
                        HTTP_IDEMPOTENCY_KEY="k-1")
    second = client.post(f"/api/v1/assignments/{lease['id']}/submit/", {"labels": labels}, format="json",
                         HTTP_IDEMPOTENCY_KEY="k-1")
    reused = client.post(f"/api/v1/assignments/{lease['id']}/submit/", {"labels": {**labels, "x": 1}},
                         format="json", HTTP_IDEMPOTENCY_KEY="k-1")

    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json() == second.json()
    assert reused.status_code == 422
    assert Label.objects.count() == 3
    assert Task.objects.get(pk=Label.objects.first().task_id).submitted_count == 1


def test_bad_labels_get_a_clear_400_and_write_nothing(api, project, member):
    client = _client_for(api, member)
    lease = client.post(f"/api/v1/projects/{project.pk}/next-task/").json()
    first_id = lease["rubric_items"][0]["id"]

    response = client.post(f"/api/v1/assignments/{lease['id']}/submit/", {"labels": {first_id: 7}}, format="json")

    assert response.status_code == 400
    fields = {e["field"] for e in response.json()["errors"]}
    assert f"labels.{first_id}" in fields and len(fields) == 3
    assert Label.objects.count() == 0


def test_a_draft_saved_over_the_api_comes_back_with_the_assignment(api, project, member):
    client = _client_for(api, member)
    lease = client.post(f"/api/v1/projects/{project.pk}/next-task/").json()
    first_id = lease["rubric_items"][0]["id"]

    client.put(f"/api/v1/assignments/{lease['id']}/draft/", {"labels": {first_id: 1}}, format="json")
    again = client.post(f"/api/v1/projects/{project.pk}/next-task/").json()

    assert again["id"] == lease["id"]
    assert again["draft"]["labels"] == {first_id: 1}


def test_only_pms_create_projects(api, member):
    pm = PMFactory()

    denied = _client_for(api, member).post("/api/v1/projects/", {"name": "x"}, format="json")
    created = _client_for(api, pm).post("/api/v1/projects/", {"name": "Ethics study", "overlap": 3}, format="json")

    assert denied.status_code == 403
    assert created.status_code == 201 and created.json()["overlap"] == 3


def test_anonymous_requests_are_refused(api, project):
    assert api.post(f"/api/v1/projects/{project.pk}/next-task/").status_code == 401


def test_the_openapi_schema_is_served(api, member):
    response = _client_for(api, member).get("/api/schema/")

    assert response.status_code == 200
    assert b"/api/v1/assignments/{assignment_id}/submit/" in response.content
