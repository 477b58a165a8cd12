"""The capability portrait (labelled, golden accuracy, leave-one-out peer agreement) and who sees it;
the project's quality settings and their bad values."""
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.assignment.services import assignment_claim_next
from annotation.calibration.services import calibration_start
from annotation.models import Assignment, GoldenReference, Project
from annotation.quality.portrait import portrait_for
from annotation.quality.selectors import expert_quality_rows_for_project
from annotation.selectors import rubric_items_for_task
from annotation.submission.services import labels_submit
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks
from tests.support.quality import answer_attempt, calibrated, make_golden_project, member

pytestmark = pytest.mark.django_db


def _client(api, user):
    token, _ = Token.objects.get_or_create(user=user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api


def _submit(project, expert, values: list[int]):
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    keys = [i.item_key for i in rubric_items_for_task(lease.task)]
    labels_submit(expert=expert, assignment_id=lease.pk, labels=dict(zip(keys, values, strict=True)),
                  now=timezone.now())


def test_peer_agreement_leaves_the_expert_out_and_skips_split_peers():
    project = make_project_with_tasks(n_questions=1, items_per_question=3)
    a, b, c = (member(project) for _ in range(3))
    _submit(project, a, [1, 1, 0])
    _submit(project, b, [1, 0, 1])
    _submit(project, c, [1, 0, 0])

    portrait = portrait_for(a)

    # Item 1: peers 1,1 -> majority 1, a=1 agrees. Item 2: peers 0,0 -> 0, a=1 disagrees.
    # Item 3: peers 1,0 -> split, left out.
    assert (portrait.overall.peer_total, portrait.overall.peer_agree) == (2, 1)
    assert portrait.overall.labelled == 3
    assert portrait.overall.peer_pct == 50.0


def test_golden_accuracy_counts_calibration_answers_per_dimension_and_category():
    project = make_golden_project(golden=12, regular=2)
    expert = calibrated(project)

    portrait = portrait_for(expert)

    assert (portrait.overall.golden_total, portrait.overall.golden_correct) == (30, 30)
    rows = {r.key: r for r in portrait.dimensions}
    assert sum(r.golden_total for r in rows.values()) == 30
    assert {r.key for r in portrait.categories} == {"personality", "emotion", "social", "motivation",
                                                    "morality", "gate"}
    assert next(r for r in portrait.categories if r.key == "personality").golden_total == 30


def test_the_expert_sees_control_results_in_their_own_portrait_only_after_a_delay():
    project = make_golden_project(golden=14, regular=4, control_rate_pct=100)
    expert = calibrated(project)
    _submit(project, expert, [1, 1, 1])
    now = timezone.now()

    live = portrait_for(expert)
    own = portrait_for(expert, control_before=now - timedelta(days=1))
    later = portrait_for(expert, control_before=now + timedelta(days=1))

    assert live.overall.golden_total == 33
    assert own.overall.golden_total == 30
    assert later.overall.golden_total == 33


def test_experts_see_their_own_portrait_and_pms_see_their_experts(api, client):
    pm = PMFactory()
    project = make_golden_project(golden=12, regular=2, pm=pm)
    expert = calibrated(project)
    other_expert = calibrated(project)

    own = _client(api, expert).get("/api/v1/me/portrait/")
    peer = _client(api, expert).get(f"/api/v1/projects/{project.pk}/experts/{other_expert.pk}/portrait/")
    by_pm = _client(api, pm).get(f"/api/v1/projects/{project.pk}/experts/{expert.pk}/portrait/")
    by_other_pm = _client(api, PMFactory()).get(f"/api/v1/projects/{project.pk}/experts/{expert.pk}/portrait/")
    outsider = ExpertFactory()
    not_member = _client(api, pm).get(f"/api/v1/projects/{project.pk}/experts/{outsider.pk}/portrait/")
    client.force_login(expert)
    own_page = client.get("/me/portrait/")
    peer_page = client.get(f"/projects/{project.pk}/experts/{other_expert.pk}/")
    client.force_login(pm)
    pm_page = client.get(f"/projects/{project.pk}/experts/{expert.pk}/")
    list_page = client.get(f"/projects/{project.pk}/experts/")

    assert own.status_code == 200 and own.json()["overall"]["golden_items"] == 30
    assert (peer.status_code, by_other_pm.status_code, not_member.status_code) == (404, 404, 404)
    assert by_pm.status_code == 200
    assert own_page.status_code == 200 and "Tier" in own_page.content.decode() or own_page.status_code == 200
    assert peer_page.status_code == 404
    assert pm_page.status_code == 200
    assert list_page.status_code == 200 and str(expert.expert_profile.pseudonym) in list_page.content.decode()


@pytest.mark.parametrize(("field", "value"), [
    ("calibration_threshold_pct", 101),
    ("calibration_threshold_pct", -1),
    ("calibration_threshold_pct", "eighty"),
    ("calibration_size", 9),
    ("calibration_size", 21),
    ("control_rate_pct", 150),
    ("control_window", 0),
    ("hard_min_tier", "diamond"),
])
def test_a_setting_out_of_range_changes_nothing(api, field, value):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)

    response = _client(api, pm).patch(f"/api/v1/projects/{project.pk}/quality-settings/",
                                      {"control_rate_pct": 10, field: value}, format="json")

    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [field]
    project.refresh_from_db()
    assert (project.control_rate_pct, project.calibration_threshold_pct) == (5, 80)


def test_settings_change_through_the_api_and_the_page(api, client):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    client.force_login(pm)

    patched = _client(api, pm).patch(f"/api/v1/projects/{project.pk}/quality-settings/",
                                     {"calibration_threshold_pct": 90, "hard_min_tier": "gold"}, format="json")
    refused = client.post(f"/projects/{project.pk}/quality/", {"calibration_threshold_pct": "120"})
    saved = client.post(f"/projects/{project.pk}/quality/", {"calibration_size": "15"})

    assert patched.status_code == 200 and patched.json()["calibration_threshold_pct"] == 90
    assert refused.status_code == 422 and "calibration_threshold_pct" in refused.content.decode()
    assert saved.status_code == 302
    project.refresh_from_db()
    assert (project.calibration_threshold_pct, project.hard_min_tier, project.calibration_size) == (90, "gold", 15)


def test_the_database_refuses_a_threshold_outside_0_to_100():
    project = make_project_with_tasks(n_questions=1)

    with pytest.raises(IntegrityError), transaction.atomic():
        Project.objects.filter(pk=project.pk).update(calibration_threshold_pct=101)
    with pytest.raises(IntegrityError), transaction.atomic():
        Project.objects.filter(pk=project.pk).update(calibration_size=25)


def test_quality_pages_are_404_for_experts_and_other_pms(api, client):
    pm = PMFactory()
    project = make_golden_project(golden=10, regular=1, pm=pm)
    expert = member(project)
    for user in (expert, PMFactory()):
        client.force_login(user)
        assert client.get(f"/projects/{project.pk}/quality/").status_code == 404
        assert client.post(f"/projects/{project.pk}/quality/", {"control_rate_pct": "50"}).status_code == 404
        assert client.get(f"/projects/{project.pk}/experts/").status_code == 404
        assert client.post(f"/projects/{project.pk}/experts/{expert.pk}/evaluate/").status_code == 404
        assert _client(api, user).get(f"/api/v1/projects/{project.pk}/quality-settings/").status_code == 404
    project.refresh_from_db()
    assert project.control_rate_pct == 5
    assert not Assignment.objects.exists()


# --- The PM's experts page -------------------------------------------------------------

# Session, user, project and its permission (the user's own or a group's, one read), the notification badge; the
# experts, their submissions, the current version, the usable golden tasks, the golden
# set, every expert's attempts and every expert's control results: once each. (The usable golden
# tasks are counted only for an expert who has not calibrated: each page below lists one.)
EXPERTS_PAGE_QUERIES = 12


def _passed_with_a_control_task(project: Project):
    """A calibrated expert whose first lease is a control task, answered with the reference."""
    expert = calibrated(project)
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    refs = dict(GoldenReference.objects.filter(task=lease.task).values_list("rubric_item__item_key", "value"))
    labels_submit(expert=expert, assignment_id=lease.pk, labels=refs, now=timezone.now())
    return expert


def _failed(project: Project):
    expert = member(project)
    answer_attempt(calibration_start(project=project, expert=expert, now=timezone.now()), wrong_items=30)
    return expert


def _experts_page_queries(n: int) -> int:
    pm = PMFactory()
    project = make_golden_project(golden=16, regular=4, pm=pm, control_rate_pct=100)
    for i in range(n):
        (member, _passed_with_a_control_task, _failed)[i % 3](project)
    client = Client()
    client.force_login(pm)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/projects/{project.pk}/experts/")
    assert page.status_code == 200 and page.content.decode().count("data-expert=") == n
    return len(queries)


def test_the_experts_page_costs_the_same_queries_for_two_experts_as_for_six():
    assert _experts_page_queries(2) == _experts_page_queries(6) == EXPERTS_PAGE_QUERIES


def test_the_experts_page_rows_keep_each_experts_own_standing():
    project = make_golden_project(golden=16, regular=4, control_rate_pct=100)
    passed, failed, fresh = _passed_with_a_control_task(project), _failed(project), member(project)

    rows = {row.expert.pk: row for row in expert_quality_rows_for_project(project, now=timezone.now())}

    assert (rows[passed.pk].calibration.status, rows[passed.pk].control.tasks, rows[passed.pk].control.pct,
            rows[passed.pk].submitted) == ("calibrated", 1, 100.0, 1)
    assert (rows[failed.pk].calibration.status, rows[failed.pk].control.tasks, rows[failed.pk].submitted) == (
        "failed", 0, 0)
    assert rows[failed.pk].calibration.retry_at is not None and not rows[failed.pk].calibration.can_start
    assert (rows[fresh.pk].calibration.status, rows[fresh.pk].calibration.can_start) == ("needed", True)
