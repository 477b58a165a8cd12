"""The expert's own controls: keep working, give back, skip with a reason; the PM's skip list;
tasks left on the home page; the expert's history; calibration drafts."""
import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.assignment.controls import assignment_skip
from annotation.assignment.selectors import tasks_left_for_projects
from annotation.assignment.services import assignment_claim_next
from annotation.calibration.services import calibration_start
from annotation.models import Assignment, CalibrationAnswer, CalibrationDraft, Draft, Project, Task, TaskSkip
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import draft_save, labels_submit
from experts.models import ExpertProfile
from tests.factories import ExpertFactory, PMFactory, QuestionFactory, ResponseFactory, make_project_with_tasks
from tests.support.quality import make_golden_project
from tests.support.quality import member as golden_member

pytestmark = pytest.mark.django_db

REASONS = ["cannot_judge", "content_problem", "not_my_field", "other"]


def _api(api, user):
    token, _ = Token.objects.get_or_create(user=user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api


@pytest.fixture(autouse=True)
def _english(client):
    # The pages' texts are asserted in English; the site's default language is Chinese.
    client.cookies.load({"django_language": "en"})


@pytest.fixture
def pm():
    return PMFactory()


@pytest.fixture
def project(pm):
    project = make_project_with_tasks(n_questions=3, items_per_question=2, models=1, overlap=2, pm=pm)
    project_add_member(project=project, user=pm)
    Project.objects.filter(pk=project.pk).update(control_rate_pct=0, lease_timeout_s=3600)
    project.refresh_from_db()
    return project


def _member(project):
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    return expert


@pytest.fixture
def expert(project):
    return _member(project)


@pytest.fixture
def lease(project, expert):
    return assignment_claim_next(project=project, expert=expert, now=timezone.now())


def _labels(assignment):
    return {i.item_key: 1 for i in rubric_items_for_task(assignment.task)}


# --- Keep working --------------------------------------------------------------------------

def test_keep_working_pushes_the_expiry_a_full_timeout_ahead(api, lease, expert):
    Assignment.objects.filter(pk=lease.pk).update(expires_at=timezone.now() + timedelta(seconds=30))

    response = _api(api, expert).post(f"/api/v1/assignments/{lease.pk}/extend/")

    assert response.status_code == 200
    assert response.json()["state"] == "leased"
    assert 3500 < response.json()["seconds_left"] <= 3600
    lease.refresh_from_db()
    assert lease.expires_at > timezone.now() + timedelta(seconds=3500)


def test_the_page_extend_answers_htmx_with_the_new_countdown(client, lease, expert):
    Assignment.objects.filter(pk=lease.pk).update(expires_at=timezone.now() + timedelta(seconds=30))
    client.force_login(expert)

    response = client.post(f"/assignments/{lease.pk}/extend/", HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="lease-clock"' in body and 'data-state="leased"' in body
    seconds = int(body.split('data-seconds-left="')[1].split('"')[0])
    assert seconds > 3500


def test_an_expired_lease_cannot_be_extended_and_the_page_says_so(api, client, lease, expert):
    Assignment.objects.filter(pk=lease.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = _api(api, expert).post(f"/api/v1/assignments/{lease.pk}/extend/")
    client.force_login(expert)
    page = client.get(f"/assignments/{lease.pk}/").content.decode()

    assert response.status_code == 409 and response.json()["code"] == "lease_expired"
    assert 'data-state="expired"' in page
    # The late-submission rule still holds: the task has room, so the marks go in.
    labels_submit(expert=expert, assignment_id=lease.pk, labels=_labels(lease), now=timezone.now())
    lease.refresh_from_db()
    assert lease.status == "submitted"


def test_the_annotation_page_shows_the_countdown_and_the_controls(client, lease, expert):
    client.force_login(expert)

    body = client.get(f"/assignments/{lease.pk}/").content.decode()

    assert 'id="lease-clock"' in body and 'data-warn="300"' in body
    assert 'id="skip-dialog"' in body and 'id="release-dialog"' in body
    assert body.count('name="reason"') == 4


def test_a_short_timeout_warns_at_a_fifth_of_it(client, project, expert):
    Project.objects.filter(pk=project.pk).update(lease_timeout_s=600)
    lease = assignment_claim_next(project=Project.objects.get(pk=project.pk), expert=expert, now=timezone.now())
    client.force_login(expert)

    body = client.get(f"/assignments/{lease.pk}/").content.decode()

    assert 'data-warn="120"' in body and 'data-timeout="600"' in body


# --- Give back -----------------------------------------------------------------------------

def test_giving_back_returns_the_slot_keeps_the_draft_and_never_offers_it_again(api, project, lease, expert):
    draft_save(expert=expert, assignment_id=lease.pk, labels={next(iter(_labels(lease))): 1}, now=timezone.now())
    live_before = Task.objects.get(pk=lease.task_id).live_count

    first = _api(api, expert).post(f"/api/v1/assignments/{lease.pk}/release/")
    again = api.post(f"/api/v1/assignments/{lease.pk}/release/")

    assert first.status_code == 200 and first.json()["state"] == "released"
    assert again.status_code == 200 and again.json()["state"] == "released"
    assert Task.objects.get(pk=lease.task_id).live_count == live_before - 1
    assert Draft.objects.filter(assignment=lease).exists()
    offered = {assignment_claim_next(project=project, expert=expert, now=timezone.now()).task_id}
    lease_ids = Assignment.objects.filter(expert=expert).values_list("task_id", flat=True)
    assert lease.task_id not in offered and list(lease_ids).count(lease.task_id) == 1


def test_the_page_release_goes_home_with_a_message(client, lease, expert):
    client.force_login(expert)

    response = client.post(f"/assignments/{lease.pk}/release/")

    assert response.status_code == 302 and response.url == "/"
    lease.refresh_from_db()
    assert lease.status == "released"
    assert "released" in client.get(f"/assignments/{lease.pk}/").content.decode()


def test_a_submitted_task_can_be_neither_given_back_nor_skipped(api, client, lease, expert):
    labels_submit(expert=expert, assignment_id=lease.pk, labels=_labels(lease), now=timezone.now())
    live = Task.objects.get(pk=lease.task_id).live_count

    released = _api(api, expert).post(f"/api/v1/assignments/{lease.pk}/release/")
    skipped = api.post(f"/api/v1/assignments/{lease.pk}/skip/", {"reason": "cannot_judge"}, format="json")
    client.force_login(expert)
    page = client.post(f"/assignments/{lease.pk}/skip/", {"reason": "cannot_judge"}, HTTP_HX_REQUEST="true")

    assert released.status_code == 409 and released.json()["code"] == "submitted_final"
    assert "cannot be given back" in released.json()["detail"]
    assert skipped.status_code == 409 and skipped.json()["code"] == "submitted_final"
    assert page.status_code == 422 and "cannot be given back" in page.content.decode()
    lease.refresh_from_db()
    assert lease.status == "submitted" and not TaskSkip.objects.exists()
    assert Task.objects.get(pk=lease.task_id).live_count == live


# --- Skip ----------------------------------------------------------------------------------

@pytest.mark.parametrize("reason", REASONS)
def test_a_skip_with_each_reason_is_recorded_and_ends_the_lease(api, lease, expert, reason):
    text = "the dialogue is cut off" if reason == "other" else ""

    response = _api(api, expert).post(f"/api/v1/assignments/{lease.pk}/skip/", {"reason": reason, "text": text},
                                      format="json")

    assert response.status_code == 201
    skip = TaskSkip.objects.get()
    assert (skip.reason, skip.text, skip.expert, skip.task_id) == (reason, text, expert, lease.task_id)
    lease.refresh_from_db()
    assert lease.status == "released"
    assert Task.objects.get(pk=lease.task_id).live_count == 0


def test_other_without_text_is_refused_and_writes_nothing(api, client, lease, expert):
    response = _api(api, expert).post(f"/api/v1/assignments/{lease.pk}/skip/", {"reason": "other", "text": "  "},
                                      format="json")
    client.force_login(expert)
    page = client.post(f"/assignments/{lease.pk}/skip/", {"reason": "other"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 400 and response.json()["code"] == "skip_text_required"
    assert response.json()["errors"][0]["field"] == "text"
    assert page.status_code == 422 and 'id="skip-error"' in page.content.decode()
    assert 'value="other" data-key="4" checked' in page.content.decode()
    lease.refresh_from_db()
    assert lease.status == "leased" and not TaskSkip.objects.exists()


def test_an_unknown_reason_is_refused(api, lease, expert):
    response = _api(api, expert).post(f"/api/v1/assignments/{lease.pk}/skip/", {"reason": "bored"}, format="json")

    assert response.status_code == 400 and response.json()["code"] == "skip_reason_invalid"
    assert not TaskSkip.objects.exists()


def test_a_repeated_skip_changes_nothing(api, client, lease, expert):
    first = _api(api, expert).post(f"/api/v1/assignments/{lease.pk}/skip/", {"reason": "not_my_field"},
                                   format="json")
    replay = api.post(f"/api/v1/assignments/{lease.pk}/skip/", {"reason": "not_my_field"}, format="json")
    client.force_login(expert)
    double_click = client.post(f"/assignments/{lease.pk}/skip/", {"reason": "not_my_field"})

    assert (first.status_code, replay.status_code) == (201, 200)
    assert double_click.status_code == 302
    assert TaskSkip.objects.count() == 1
    assert Task.objects.get(pk=lease.task_id).live_count == 0


def test_a_given_back_task_cannot_then_be_skipped(api, lease, expert):
    _api(api, expert).post(f"/api/v1/assignments/{lease.pk}/release/")

    response = api.post(f"/api/v1/assignments/{lease.pk}/skip/", {"reason": "cannot_judge"}, format="json")

    assert response.status_code == 409 and response.json()["code"] == "lease_released"


def test_the_page_skip_goes_home(client, lease, expert):
    client.force_login(expert)

    response = client.post(f"/assignments/{lease.pk}/skip/", {"reason": "content_problem"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200 and response["HX-Redirect"] == "/"
    assert TaskSkip.objects.get().reason == "content_problem"


def test_another_experts_assignment_is_404_on_every_new_endpoint(api, client, project, lease, expert):
    other = _member(project)
    _api(api, other)
    client.force_login(other)

    answers = [
        api.post(f"/api/v1/assignments/{lease.pk}/extend/").status_code,
        api.post(f"/api/v1/assignments/{lease.pk}/release/").status_code,
        api.post(f"/api/v1/assignments/{lease.pk}/skip/", {"reason": "cannot_judge"}, format="json").status_code,
        client.post(f"/assignments/{lease.pk}/extend/").status_code,
        client.post(f"/assignments/{lease.pk}/release/").status_code,
        client.post(f"/assignments/{lease.pk}/skip/", {"reason": "cannot_judge"}).status_code,
    ]

    assert answers == [404] * 6
    lease.refresh_from_db()
    assert lease.status == "leased" and not TaskSkip.objects.exists()


# --- The PM's skip list -----------------------------------------------------------------------

def _skip(project, reason, text=""):
    expert = _member(project)
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    assignment_skip(expert=expert, assignment_id=lease.pk, reason=reason, text=text, now=timezone.now())
    return expert, lease


def test_the_pm_sees_skips_with_counts_and_a_reason_filter(api, client, project, pm):
    skipper, lease = _skip(project, "other", "言语不通")
    _skip(project, "not_my_field")
    _skip(project, "not_my_field")
    client.force_login(pm)

    page = client.get(f"/projects/{project.pk}/skips/").content.decode()
    filtered = client.get(f"/projects/{project.pk}/skips/?reason=other").content.decode()
    body = _api(api, pm).get(f"/api/v1/projects/{project.pk}/skips/").json()
    only_other = api.get(f"/api/v1/projects/{project.pk}/skips/?reason=other").json()

    assert skipper.expert_profile.pseudonym in page and "言语不通" in page
    assert lease.task.response.question.external_id in page
    assert skipper.username not in page
    assert filtered.count("<tr>") == 2  # the header row and the one "other" skip
    assert body["counts"] == {"cannot_judge": 0, "content_problem": 0, "not_my_field": 2, "other": 1}
    assert len(body["results"]) == 3
    assert only_other["results"] == [{"question_id": lease.task.response.question.external_id, "reason": "other",
                                      "text": "言语不通", "expert": skipper.expert_profile.pseudonym,
                                      "created_at": only_other["results"][0]["created_at"]}]


def test_the_skips_tab_is_on_the_people_pages(client, project, pm):
    client.force_login(pm)

    # The People group opens on the workload page, whose second row of tabs names the skip list.
    workload = client.get(f"/projects/{project.pk}/workload/").content.decode()
    assert f'href="/projects/{project.pk}/skips/"' in workload


def test_a_pm_of_another_project_and_an_expert_get_404_for_the_skip_list(api, client, project, expert):
    _skip(project, "cannot_judge")
    stranger = PMFactory()
    project_add_member(project=make_project_with_tasks(n_questions=1, pm=stranger), user=stranger)

    for user in (stranger, expert):
        client.force_login(user)
        assert client.get(f"/projects/{project.pk}/skips/").status_code == 404
        assert _api(api, user).get(f"/api/v1/projects/{project.pk}/skips/").status_code == 404


# --- Tasks left on the home page ---------------------------------------------------------------

def test_the_home_page_counts_the_tasks_left_for_the_expert(client, project, expert):
    other_expert = _member(project)
    held = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    # A hard question the expert's tier does not take, and a golden (control) task: neither counts.
    hard = QuestionFactory(project=project, external_id="qhard", difficulty="hard")
    version = held.task.rubric_version
    for question, golden in ((hard, False), (QuestionFactory(project=project, external_id="qgold"), True)):
        Task.objects.create(project=project, response=ResponseFactory(question=question, project=project),
                            rubric_version=version, overlap=2, shuffle_key=1, is_golden=golden)
    Project.objects.filter(pk=project.pk).update(hard_min_tier="gold")
    ExpertProfile.objects.filter(user=expert).update(tier="bronze")
    # One task is full (two leases): it is not open.
    full = Task.objects.filter(project=project, is_golden=False).exclude(pk=held.task_id).exclude(
        response__question=hard).first()
    Task.objects.filter(pk=full.pk).update(status="full", live_count=2)
    assignment_claim_next(project=project, expert=other_expert, now=timezone.now())
    client.force_login(expert)

    body = client.get("/").content.decode()

    # 3 regular tasks: one held by the expert, one full; the hard one and the golden one do not count.
    left = body.split("Tasks left for you</dt><dd>")[1].split("<")[0]
    assert left == "1"


def test_the_tasks_left_count_costs_two_queries_for_any_number_of_projects_one_given_the_tier(
        expert, project, django_assert_num_queries):
    projects = [project]
    with django_assert_num_queries(2):
        tasks_left_for_projects(expert, projects)
    for _ in range(3):
        extra = make_project_with_tasks(n_questions=2)
        project_add_member(project=extra, user=expert)
        projects.append(extra)
    with django_assert_num_queries(2):
        left = tasks_left_for_projects(expert, projects)
    tier = expert.expert_profile.tier
    with django_assert_num_queries(1):
        given_the_tier = tasks_left_for_projects(expert, projects, tier=tier)

    assert left == given_the_tier == {p.pk: Task.objects.filter(project=p).count() for p in projects}


def test_past_the_cap_the_home_page_says_more_than_the_cap(client, expert, project, monkeypatch):
    from annotation.assignment import selectors

    open_tasks = Task.objects.filter(project=project, is_golden=False).count()
    assert open_tasks >= 3
    monkeypatch.setattr(selectors, "TASKS_LEFT_CAP", 2)
    monkeypatch.setattr("annotation.views.TASKS_LEFT_CAP", 2)
    other = make_project_with_tasks(n_questions=2)
    project_add_member(project=other, user=expert)
    client.force_login(expert)

    left = tasks_left_for_projects(expert, [project, other])
    body = client.get("/").content.decode()

    assert left == {project.pk: 3, other.pk: 2}  # the cap plus one says "more"; under it, exact
    shown = [part.split("<")[0] for part in body.split("Tasks left for you</dt><dd>")[1:]]
    assert sorted(shown) == ["2", "more than 2"]


def test_the_count_adds_no_query_per_project_to_the_home_page(client, expert, project, monkeypatch):
    for _ in range(3):
        project_add_member(project=make_project_with_tasks(n_questions=2), user=expert)
    client.force_login(expert)
    client.get("/")
    with CaptureQueriesContext(connection) as with_count:
        response = client.get("/")
    monkeypatch.setattr("annotation.views.tasks_left_for_projects",
                        lambda user, projects, tier=None: {p.pk: 0 for p in projects})
    with CaptureQueriesContext(connection) as without_count:
        client.get("/")

    assert response.content.decode().count("Tasks left for you") == 4
    assert len(with_count) - len(without_count) == 1  # the home card's profile gives the count the tier


def test_the_home_page_stays_within_its_query_budget(client, expert, django_assert_max_num_queries):
    client.force_login(expert)
    client.get("/")
    # One project: session, user, projects, profile, tallies, control results, tier rules, calibration
    # attempts, current version, golden set, work, tasks left (the profile's tier given), unread count.
    with django_assert_max_num_queries(13):
        client.get("/")


# --- History --------------------------------------------------------------------------------------

def test_history_lists_the_experts_own_finished_tasks_newest_first_without_the_model(api, client, project,
                                                                                    expert):
    first = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    labels_submit(expert=expert, assignment_id=first.pk, labels=_labels(first), now=timezone.now())
    second = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    assignment_skip(expert=expert, assignment_id=second.pk, reason="not_my_field",
                    now=timezone.now() + timedelta(seconds=5))
    # Another expert's submission never shows.
    other = _member(project)
    theirs = assignment_claim_next(project=project, expert=other, now=timezone.now())
    labels_submit(expert=other, assignment_id=theirs.pk, labels=_labels(theirs), now=timezone.now())
    client.force_login(expert)

    page = client.get("/me/history/").content.decode()
    body = _api(api, expert).get("/api/v1/me/history/")

    results = body.json()["results"]
    assert [r["assignment"] for r in results] == [second.pk, first.pk]
    assert [r["status"] for r in results] == ["skipped", "submitted"]
    assert results[1]["question_id"] == first.task.response.question.external_id
    assert first.task.response.question.external_id in page
    for text in (page, body.content.decode()):
        assert "model-0" not in text and "model_name" not in text
    assert theirs.pk not in [r["assignment"] for r in results]


def test_history_is_paginated(api, expert, project):
    for n in range(27):
        question = QuestionFactory(project=project, external_id=f"h{n}")
        task = Task.objects.create(project=project, response=ResponseFactory(question=question, project=project),
                                   rubric_version=Task.objects.first().rubric_version, overlap=2, shuffle_key=n,
                                   live_count=1, submitted_count=1)
        now = timezone.now()
        Assignment.objects.create(task=task, expert=expert, slot=1, status="submitted", leased_at=now,
                                  expires_at=now, submitted_at=now + timedelta(seconds=n))

    page1 = _api(api, expert).get("/api/v1/me/history/").json()
    page2 = api.get("/api/v1/me/history/?page=2").json()

    assert (page1["count"], page1["pages"], len(page1["results"]), len(page2["results"])) == (27, 2, 25, 2)
    assert page1["results"][0]["question_id"] == "h26"


def test_the_home_page_links_to_the_history(client, expert):
    client.force_login(expert)

    assert 'href="/me/history/"' in client.get("/").content.decode()


# --- Calibration drafts --------------------------------------------------------------------------

def test_calibration_autosaves_marks_and_notes_and_shows_them_on_reload(api, client):
    golden = make_golden_project(golden=12, regular=2, control_rate_pct=0)
    expert = golden_member(golden)
    attempt = calibration_start(project=golden, expert=expert, now=timezone.now())
    task = attempt.tasks.get(position=1).task
    key = rubric_items_for_task(task)[0].item_key
    client.force_login(expert)

    saved = client.post(f"/calibration/{attempt.pk}/tasks/1/draft/", {f"label-{key}": "0", f"note-{key}": "难判断"},
                        HTTP_HX_REQUEST="true")
    page = client.get(f"/calibration/{attempt.pk}/tasks/1/").content.decode()
    api_view = _api(api, expert).get(f"/api/v1/calibration/{attempt.pk}/tasks/1/").json()

    assert saved.status_code == 200 and 'data-state="saved"' in saved.content.decode()
    assert CalibrationDraft.objects.get().labels == {key: 0}
    assert "难判断" in page and f'name="label-{key}" value="0" id="c-item-1-miss" checked' in page
    assert api_view["draft"] == {"labels": {key: 0}, "notes": {key: "难判断"}}
    assert not CalibrationAnswer.objects.exists()  # a draft never scores


def test_a_calibration_draft_of_another_expert_is_404_and_bad_input_writes_nothing(api, client):
    golden = make_golden_project(golden=12, regular=2, control_rate_pct=0)
    owner, other = golden_member(golden), golden_member(golden)
    attempt = calibration_start(project=golden, expert=owner, now=timezone.now())
    key = rubric_items_for_task(attempt.tasks.get(position=1).task)[0].item_key
    client.force_login(other)

    stranger = client.post(f"/calibration/{attempt.pk}/tasks/1/draft/", {f"label-{key}": "1"},
                           HTTP_HX_REQUEST="true")
    stranger_api = _api(api, other).put(f"/api/v1/calibration/{attempt.pk}/tasks/1/draft/",
                                        {"labels": {key: 1}}, format="json")
    client.force_login(owner)
    bad = client.post(f"/calibration/{attempt.pk}/tasks/1/draft/", {f"label-{key}": "7"}, HTTP_HX_REQUEST="true")

    assert (stranger.status_code, stranger_api.status_code) == (404, 404)
    assert bad.status_code == 422
    assert not CalibrationDraft.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_two_simultaneous_skips_of_one_lease_record_one_skip_and_free_one_slot():
    assert connection.vendor == "postgresql"
    for _round in range(4):
        project = make_project_with_tasks(n_questions=1, overlap=2)
        Project.objects.filter(pk=project.pk).update(control_rate_pct=0)
        expert, other = _member(project), _member(project)
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
        assignment_claim_next(project=project, expert=other, now=timezone.now())
        created: list[bool] = []
        barrier = threading.Barrier(2)

        def skip(lease=lease, expert=expert, created=created, barrier=barrier):
            try:
                barrier.wait()
                created.append(assignment_skip(expert=expert, assignment_id=lease.pk, reason="cannot_judge",
                                               now=timezone.now()).created)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=skip) for _ in range(2)]
        [t.start() for t in threads]
        [t.join() for t in threads]

        assert sorted(created) == [False, True]
        assert TaskSkip.objects.filter(assignment=lease).count() == 1
        task = Task.objects.get(project=project)
        assert (task.live_count, task.status) == (1, "open")
