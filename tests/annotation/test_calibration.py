"""Calibration: the gate on real work, the draw, scoring, feedback, retry delay; scoped to the expert."""
import random
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.assignment.services import assignment_claim_next
from annotation.calibration.services import (
    calibration_answer,
    calibration_feedback,
    calibration_start,
    calibration_state,
    calibrations_mark_stale,
)
from annotation.models import (
    Assignment,
    CalibrationAnswer,
    CalibrationAttempt,
    GoldenReference,
    Label,
    Task,
)
from core.errors import Conflict, Forbidden
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks
from tests.support.quality import answer_attempt, calibrated, make_golden_project, member

pytestmark = pytest.mark.django_db


def _client(api, user):
    token, _ = Token.objects.get_or_create(user=user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api


@pytest.fixture
def project():
    return make_golden_project(golden=12, regular=4, calibration_retry_delay_s=3600, control_rate_pct=0)


def test_a_project_without_a_golden_set_needs_no_calibration():
    project = make_project_with_tasks(n_questions=2)
    expert = member(project)

    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())

    assert lease is not None
    assert calibration_state(project=project, expert=expert, now=timezone.now()).status == "not_required"


def test_an_uncalibrated_expert_gets_403_with_a_reason_and_no_task(api, project):
    expert = member(project)

    with pytest.raises(Forbidden) as caught:
        assignment_claim_next(project=project, expert=expert, now=timezone.now())
    response = _client(api, expert).post(f"/api/v1/projects/{project.pk}/next-task/")

    assert caught.value.code == "calibration_required"
    assert response.status_code == 403
    assert response.json()["code"] == "calibration_required"
    assert "calibration" in response.json()["detail"]
    assert Assignment.objects.count() == 0


def test_an_attempt_draws_distinct_golden_tasks_of_the_current_version(project):
    expert = member(project)

    attempt = calibration_start(project=project, expert=expert, now=timezone.now(), rng=random.Random(1))
    again = calibration_start(project=project, expert=expert, now=timezone.now(), rng=random.Random(2))

    task_ids = list(attempt.tasks.values_list("task_id", flat=True))
    assert again.pk == attempt.pk
    assert len(task_ids) == len(set(task_ids)) == project.calibration_size == 10
    assert set(Task.objects.filter(pk__in=task_ids).values_list("is_golden", flat=True)) == {True}
    assert attempt.threshold_pct == 80


def test_passing_opens_real_work(project):
    expert = member(project)
    attempt = calibration_start(project=project, expert=expert, now=timezone.now())

    attempt = answer_attempt(attempt, wrong_items=6)  # 24 of 30 items right: exactly 80 %

    assert (attempt.status, attempt.score_pct) == ("passed", Decimal("80.00"))
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    assert lease is not None and not lease.task.is_golden


def test_below_the_threshold_fails_and_the_feedback_lists_every_wrong_item(project):
    expert = member(project)
    attempt = calibration_start(project=project, expert=expert, now=timezone.now())

    attempt = answer_attempt(attempt, wrong_items=7)  # 23 of 30: 76.67 %
    feedback = calibration_feedback(attempt)

    assert (attempt.status, attempt.score_pct, attempt.items_correct) == ("failed", Decimal("76.67"), 23)
    wrong = [w for task in feedback for w in task.wrong]
    assert len(wrong) == 7
    assert all(w.answer != w.reference for w in wrong)
    assert all(w.rationale.startswith("reason ") for w in wrong)
    with pytest.raises(Forbidden):
        assignment_claim_next(project=project, expert=expert, now=timezone.now())


def test_a_failed_attempt_can_be_retried_after_the_delay_with_a_new_draw(project):
    expert = member(project)
    start = timezone.now()
    first = answer_attempt(calibration_start(project=project, expert=expert, now=start, rng=random.Random(1)),
                           wrong_items=30, now=start)

    with pytest.raises(Conflict) as early:
        calibration_start(project=project, expert=expert, now=start + timedelta(minutes=59))
    second = calibration_start(project=project, expert=expert, now=start + timedelta(minutes=61),
                               rng=random.Random(99))

    assert first.status == "failed"
    assert early.value.code == "retry_later"
    assert second.pk != first.pk and second.status == "in_progress"
    assert set(second.tasks.values_list("task_id", flat=True)) != set(first.tasks.values_list("task_id", flat=True))


def test_calibration_writes_no_assignment_and_no_label_so_it_is_never_paid(project):
    calibrated(project)

    assert Assignment.objects.count() == 0
    assert Label.objects.count() == 0
    assert CalibrationAnswer.objects.count() == 30


def test_a_passed_expert_cannot_start_again(project):
    expert = calibrated(project)

    with pytest.raises(Conflict) as caught:
        calibration_start(project=project, expert=expert, now=timezone.now())

    assert caught.value.code == "already_calibrated"


def test_too_few_usable_golden_tasks_means_not_ready_and_still_no_work():
    project = make_golden_project(golden=6, regular=2)
    expert = member(project)

    with pytest.raises(Conflict) as caught:
        calibration_start(project=project, expert=expert, now=timezone.now())

    assert caught.value.code == "calibration_not_ready"
    assert calibration_state(project=project, expert=expert, now=timezone.now()).status == "not_ready"
    with pytest.raises(Forbidden):
        assignment_claim_next(project=project, expert=expert, now=timezone.now())


def test_a_golden_task_missing_a_reference_is_not_usable(project):
    incomplete = list(Task.objects.filter(project=project, is_golden=True).order_by("pk")[:3])
    GoldenReference.objects.filter(task__in=incomplete, rubric_item__position=1).delete()
    expert = member(project)

    state = calibration_state(project=project, expert=expert, now=timezone.now())
    with pytest.raises(Conflict) as caught:
        calibration_start(project=project, expert=expert, now=timezone.now())

    assert state.available == 9
    assert caught.value.code == "calibration_not_ready"


def test_one_open_attempt_per_expert_and_project_is_a_database_rule(project):
    expert = member(project)
    attempt = calibration_start(project=project, expert=expert, now=timezone.now())

    with pytest.raises(IntegrityError), transaction.atomic():
        CalibrationAttempt.objects.create(expert=expert, project=project, rubric_version=attempt.rubric_version,
                                          threshold_pct=80, started_at=timezone.now())


def test_the_api_loop_calibrates(api, project):
    expert = member(project)
    client = _client(api, expert)

    started = client.post(f"/api/v1/projects/{project.pk}/calibration/")
    attempt_id = started.json()["id"]
    for entry in started.json()["tasks"]:
        task = client.get(f"/api/v1/calibration/{attempt_id}/tasks/{entry['position']}/").json()
        ct = CalibrationAttempt.objects.get(pk=attempt_id).tasks.get(position=entry["position"])
        refs = dict(GoldenReference.objects.filter(task=ct.task).values_list("rubric_item__item_key", "value"))
        assert {i["id"] for i in task["rubric_items"]} == set(refs)
        answered = client.put(f"/api/v1/calibration/{attempt_id}/tasks/{entry['position']}/", {"labels": refs},
                              format="json")
        assert answered.status_code == 200
    result = client.get(f"/api/v1/calibration/{attempt_id}/").json()
    lease = client.post(f"/api/v1/projects/{project.pk}/next-task/")

    assert started.status_code == 201 and len(started.json()["tasks"]) == 10
    assert "reference" not in str(started.json())
    assert (result["status"], result["score_pct"], result["wrong"]) == ("passed", 100.0, [])
    assert lease.status_code == 200


def test_an_incomplete_answer_writes_nothing(api, project):
    expert = member(project)
    attempt = calibration_start(project=project, expert=expert, now=timezone.now())

    response = _client(api, expert).put(f"/api/v1/calibration/{attempt.pk}/tasks/1/", {"labels": {}},
                                        format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_labels"
    assert CalibrationAnswer.objects.count() == 0


def test_another_experts_attempt_is_404_on_every_endpoint(api, client, project):
    owner = member(project)
    attempt = calibration_start(project=project, expert=owner, now=timezone.now())
    other = member(project)
    api_client = _client(api, other)
    client.force_login(other)

    codes = [
        api_client.get(f"/api/v1/calibration/{attempt.pk}/").status_code,
        api_client.get(f"/api/v1/calibration/{attempt.pk}/tasks/1/").status_code,
        api_client.put(f"/api/v1/calibration/{attempt.pk}/tasks/1/", {"labels": {}}, format="json").status_code,
        client.get(f"/calibration/{attempt.pk}/tasks/1/").status_code,
        client.post(f"/calibration/{attempt.pk}/tasks/1/", {}).status_code,
        client.get(f"/calibration/{attempt.pk}/result/").status_code,
    ]

    assert codes == [404] * 6
    assert CalibrationAnswer.objects.count() == 0


def test_outsiders_get_404_for_the_projects_calibration(api, client, project):
    outsider = ExpertFactory()
    client.force_login(outsider)

    assert _client(api, outsider).post(f"/api/v1/projects/{project.pk}/calibration/").status_code == 404
    assert client.get(f"/projects/{project.pk}/calibration/").status_code == 404
    assert client.post(f"/projects/{project.pk}/calibration/start/").status_code == 404
    assert not CalibrationAttempt.objects.exists()


def test_the_pages_walk_from_start_to_feedback(client, project):
    expert = member(project)
    client.force_login(expert)

    status_page = client.get(f"/projects/{project.pk}/calibration/")
    started = client.post(f"/projects/{project.pk}/calibration/start/")
    attempt = CalibrationAttempt.objects.get(expert=expert)
    first_task = client.get(started.url)
    for ct in attempt.tasks.order_by("position"):
        refs = GoldenReference.objects.filter(task=ct.task).values_list("rubric_item__item_key", "value")
        response = client.post(f"/calibration/{attempt.pk}/tasks/{ct.position}/",
                               {f"label-{key}": str(1 - value) for key, value in refs})
    result = client.get(response.url)

    assert status_page.status_code == 200 and 'data-status="needed"' in status_page.content.decode()
    assert started.url == f"/calibration/{attempt.pk}/tasks/1/"
    assert first_task.status_code == 200 and 'name="label-' in first_task.content.decode()
    assert response.url == f"/calibration/{attempt.pk}/result/"
    body = result.content.decode()
    assert 'data-passed="false"' in body
    assert body.count('class="wrong-item"') == 30
    assert "reason 1 for" in body


def test_a_page_post_missing_marks_is_refused_and_keeps_the_marks(client, project):
    expert = member(project)
    client.force_login(expert)
    attempt = calibration_start(project=project, expert=expert, now=timezone.now())
    key = GoldenReference.objects.filter(task=attempt.tasks.get(position=1).task).values_list(
        "rubric_item__item_key", flat=True).first()

    response = client.post(f"/calibration/{attempt.pk}/tasks/1/", {f"label-{key}": "1"})

    assert response.status_code == 422
    assert "checked" in response.content.decode()
    assert CalibrationAnswer.objects.count() == 0


def test_pms_do_not_calibrate(api, project):
    pm = PMFactory()

    assert _client(api, pm).post(f"/api/v1/projects/{project.pk}/calibration/").status_code == 403


# --- The pages and the API say the same ---------------------------------------------------

def test_page_and_api_agree_that_a_new_expert_can_start(api, client, project):
    expert = member(project)
    client.force_login(expert)

    state = _client(api, expert).get(f"/api/v1/projects/{project.pk}/calibration/").json()
    page = client.get(f"/projects/{project.pk}/calibration/").content.decode()

    assert (state["status"], state["can_start"]) == ("needed", True)
    assert 'id="calibration-go"' in page


def test_page_and_api_agree_that_a_failed_expert_waits_for_the_retry_delay(api, client, project):
    expert = member(project)
    answer_attempt(calibration_start(project=project, expert=expert, now=timezone.now()), wrong_items=30)
    client.force_login(expert)

    state = _client(api, expert).get(f"/api/v1/projects/{project.pk}/calibration/").json()
    page = client.get(f"/projects/{project.pk}/calibration/").content.decode()

    assert (state["status"], state["can_start"]) == ("failed", False)
    assert state["retry_at"] is not None
    assert 'id="calibration-go"' not in page


def test_page_and_api_resume_at_the_same_next_task(api, client, project):
    expert = member(project)
    attempt = calibration_start(project=project, expert=expert, now=timezone.now())
    first = attempt.tasks.get(position=1)
    refs = dict(GoldenReference.objects.filter(task=first.task).values_list("rubric_item__item_key", "value"))
    calibration_answer(expert=expert, attempt_id=attempt.pk, position=1, labels=refs, now=timezone.now())
    client.force_login(expert)

    body = _client(api, expert).get(f"/api/v1/calibration/{attempt.pk}/").json()
    resumed = client.post(f"/projects/{project.pk}/calibration/start/")

    assert body["next_position"] == 2
    assert [t["answered"] for t in body["tasks"]][:2] == [True, False]
    assert resumed.url == f"/calibration/{attempt.pk}/tasks/2/"


def test_page_and_api_agree_that_a_pass_made_stale_was_passed(api, client, project):
    expert = calibrated(project)
    attempt = CalibrationAttempt.objects.get(expert=expert)
    calibrations_mark_stale(project=project, now=timezone.now())
    client.force_login(expert)

    body = _client(api, expert).get(f"/api/v1/calibration/{attempt.pk}/").json()
    page = client.get(f"/calibration/{attempt.pk}/result/").content.decode()

    assert (body["status"], body["passed"], body["next_position"]) == ("stale", True, None)
    assert 'data-passed="true"' in page


def test_answering_the_last_task_over_the_api_says_whether_it_passed(api, project):
    expert = member(project)
    attempt = calibration_start(project=project, expert=expert, now=timezone.now())
    client = _client(api, expert)
    answers = []
    for ct in attempt.tasks.order_by("position"):
        refs = dict(GoldenReference.objects.filter(task=ct.task).values_list("rubric_item__item_key", "value"))
        answers.append(client.put(f"/api/v1/calibration/{attempt.pk}/tasks/{ct.position}/", {"labels": refs},
                                  format="json").json())

    assert answers[0] == {"next_position": 2, "status": "in_progress", "score_pct": None, "passed": False}
    assert answers[-1] == {"next_position": None, "status": "passed", "score_pct": 100.0, "passed": True}
