"""A project's lifecycle: pause, resume, close (read-only), archive (hidden), clone.

Each action is harmless when repeated, asks first where it ends work, and is refused on
another PM's project (404, see test_project_setup).
"""
import datetime as dt
import io
import json
import threading
from decimal import Decimal

import pytest
from django.db import connection, connections
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.assignment.services import assignment_claim_next
from annotation.calibration.golden_set import GOLDEN_OVERLAP, task_mark_golden
from annotation.calibration.services import calibration_start
from annotation.exchange.questions import questions_import
from annotation.models import (
    Assignment,
    Draft,
    GoldenReference,
    Project,
    ProjectSettingChange,
    ProjectState,
    Task,
)
from annotation.projects.services import (
    project_archive,
    project_clone,
    project_close,
    project_pause,
    project_resume,
    project_settings_update,
)
from annotation.rubric_editing.services import (
    rubric_draft_guidelines_update,
    rubric_draft_start,
    rubric_version_publish_by_number,
)
from annotation.selectors import (
    project_experts,
    project_list_for_user,
    rubric_items_for_task,
    rubric_version_current,
)
from annotation.services import project_add_member
from annotation.submission.services import draft_save, labels_submit
from core.errors import Conflict
from payments.models import PriceRule, TierMultiplier
from rubrics.models import RubricItem
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _token_client(api, user):
    token, _ = Token.objects.get_or_create(user=user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api


def _all_hits(lease):
    return {i.item_key: 1 for i in rubric_items_for_task(lease.task)}


@pytest.fixture
def setup():
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=3, pm=pm)
    experts = [ExpertFactory() for _ in range(2)]
    for e in experts:
        project_add_member(project=project, user=e)
    return pm, project, experts


# --- Pause and resume ---------------------------------------------------------------------

def test_a_paused_project_gives_no_new_lease_but_takes_the_submission_of_an_open_one(setup):
    pm, project, (holder, newcomer) = setup
    lease = assignment_claim_next(project=project, expert=holder, now=timezone.now())

    project_pause(project=project, by=pm, now=timezone.now())
    project.refresh_from_db()

    with pytest.raises(Conflict) as refused:
        assignment_claim_next(project=project, expert=newcomer, now=timezone.now())
    assert refused.value.code == "project_paused"
    # The holder's "next task" still brings back the lease they hold, and it can be submitted.
    assert assignment_claim_next(project=project, expert=holder, now=timezone.now()).pk == lease.pk
    result = labels_submit(expert=holder, assignment_id=lease.pk, labels=_all_hits(lease), now=timezone.now())
    assert result.created
    with pytest.raises(Conflict):
        assignment_claim_next(project=project, expert=holder, now=timezone.now())


def test_resuming_hands_out_leases_again(setup):
    pm, project, (expert, _other) = setup
    project_pause(project=project, by=pm, now=timezone.now())

    project_resume(project=project, by=pm, now=timezone.now())
    project.refresh_from_db()

    assert assignment_claim_next(project=project, expert=expert, now=timezone.now()) is not None


def test_pausing_twice_is_harmless_and_recorded_once(setup, api):
    pm, project, _experts = setup
    client = _token_client(api, pm)

    first = client.post(f"/api/v1/projects/{project.pk}/pause/")
    second = client.post(f"/api/v1/projects/{project.pk}/pause/")

    assert (first.status_code, first.json()["changed"]) == (200, True)
    assert (second.status_code, second.json()["changed"]) == (200, False)
    assert second.json()["project"]["state"] == "paused"
    assert list(ProjectSettingChange.objects.filter(project=project).values_list("setting", "old_value",
                                                                                  "new_value")) == [
        ("state", "active", "paused")]


def test_the_api_next_task_of_a_paused_project_says_so(setup, api):
    pm, project, (expert, _other) = setup
    project_pause(project=project, by=pm, now=timezone.now())

    refused = _token_client(api, expert).post(f"/api/v1/projects/{project.pk}/next-task/")

    assert refused.status_code == 409 and refused.json()["code"] == "project_paused"


# --- Close --------------------------------------------------------------------------------

def test_closing_ends_open_leases_keeps_drafts_and_refuses_every_write(setup):
    pm, project, (expert, _other) = setup
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    draft_save(expert=expert, assignment_id=lease.pk, labels={rubric_items_for_task(lease.task)[0].item_key: 1},
               now=timezone.now())

    result = project_close(project=project, by=pm, now=timezone.now())
    project.refresh_from_db()

    assert (result.changed, result.leases_ended, project.state) == (True, 1, ProjectState.CLOSED)
    lease.refresh_from_db()
    task = Task.objects.get(pk=lease.task_id)
    assert (lease.status, task.live_count) == (Assignment.Status.RELEASED, 0)
    assert Draft.objects.filter(assignment=lease).exists()
    refusals = [
        lambda: labels_submit(expert=expert, assignment_id=lease.pk, labels=_all_hits(lease), now=timezone.now()),
        lambda: assignment_claim_next(project=project, expert=expert, now=timezone.now()),
        lambda: questions_import(project=project, data=b"{}", now=timezone.now()),
        lambda: rubric_draft_start(project=project),
        lambda: project_settings_update(project=project, values={"overlap": 4}, changed_by=pm, now=timezone.now()),
        lambda: project_pause(project=project, by=pm, now=timezone.now()),
    ]
    for refusal in refusals:
        with pytest.raises(Conflict) as refused:
            refusal()
        assert refused.value.code == "project_closed"
    assert project_close(project=project, by=pm, now=timezone.now()).changed is False


def test_a_closed_project_refuses_submission_and_import_over_the_api_and_still_exports(setup, api):
    pm, project, (expert, _other) = setup
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    project_close(project=project, by=pm, now=timezone.now())

    submit = _token_client(api, expert).post(f"/api/v1/assignments/{lease.pk}/submit/",
                                             {"labels": _all_hits(lease)}, format="json",
                                             HTTP_IDEMPOTENCY_KEY="k1", HTTP_ACCEPT_LANGUAGE="en")
    pm_client = _token_client(api, pm)
    upload = io.BytesIO(json.dumps({"question_id": "x"}).encode())
    upload.name = "q.jsonl"
    imported = pm_client.post(f"/api/v1/projects/{project.pk}/questions/import/", {"file": upload},
                              format="multipart", HTTP_ACCEPT_LANGUAGE="en")
    exported = pm_client.get(f"/api/v1/projects/{project.pk}/export/?format=jsonl")

    assert submit.status_code == 409 and submit.json()["code"] == "project_closed"
    assert "closed" in submit.json()["detail"] and "Exports" in submit.json()["detail"]
    assert imported.status_code == 409 and imported.json()["code"] == "project_closed"
    assert exported.status_code == 200


def test_the_close_page_asks_first_and_says_how_many_leases_end(setup, client):
    pm, project, (expert, _other) = setup
    assignment_claim_next(project=project, expert=expert, now=timezone.now())
    client.force_login(pm)

    asked = client.post(f"/projects/{project.pk}/close/", HTTP_ACCEPT_LANGUAGE="en")
    project.refresh_from_db()

    assert asked.status_code == 200 and project.state == ProjectState.ACTIVE
    assert "1 open lease ends now" in asked.content.decode() and "Exports and reports still work" in (
        asked.content.decode())
    done = client.post(f"/projects/{project.pk}/close/", {"confirmed": "yes"})
    project.refresh_from_db()
    assert done.status_code == 302 and project.state == ProjectState.CLOSED


# --- Archive ------------------------------------------------------------------------------

def test_only_a_closed_project_is_archived(setup, api):
    pm, project, _experts = setup

    refused = _token_client(api, pm).post(f"/api/v1/projects/{project.pk}/archive/")

    assert refused.status_code == 409 and refused.json()["code"] == "project_not_closed"
    project.refresh_from_db()
    assert project.archived_at is None


def test_an_archived_project_is_hidden_from_lists_and_shown_on_request(setup, client):
    pm, project, (expert, _other) = setup
    project_close(project=project, by=pm, now=timezone.now())
    client.force_login(pm)
    asked = client.post(f"/projects/{project.pk}/archive/")
    assert asked.status_code == 200 and "confirmed" in asked.content.decode()
    client.post(f"/projects/{project.pk}/archive/", {"confirmed": "yes"})

    assert project.pk not in project_list_for_user(pm).values_list("pk", flat=True)
    assert project.pk not in project_list_for_user(expert).values_list("pk", flat=True)
    assert f"/projects/{project.pk}/" not in client.get("/").content.decode()
    assert f"/projects/{project.pk}/" in client.get("/?archived=1").content.decode()
    # Still reachable by id, read-only, and archiving again changes nothing.
    assert client.get(f"/projects/{project.pk}/settings/").status_code == 200
    assert project_archive(project=project, by=pm, now=timezone.now()).changed is False


def test_home_shows_the_state_as_a_badge(setup, client):
    pm, project, _experts = setup
    project_pause(project=project, by=pm, now=timezone.now())
    client.force_login(pm)

    home = client.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    page = client.get(f"/projects/{project.pk}/", HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert 'state-badge state-paused">Paused<' in home and 'state-paused' in page


# --- Clone --------------------------------------------------------------------------------

def _golden_and_prices(project, pm):
    golden = Task.objects.filter(project=project, assignments__isnull=True).order_by("pk").first()
    task_mark_golden(task_ids=[golden.pk])
    for item in rubric_items_for_task(golden):
        GoldenReference.objects.create(task=golden, rubric_item=item, value=item.position % 2, rationale="why",
                                       created_at=timezone.now())
    PriceRule.objects.create(project=project, difficulty="normal", amount=Decimal("6.5"), effective_from=T0)
    PriceRule.objects.create(project=project, difficulty="hard", amount=Decimal("9"), effective_from=T0)
    TierMultiplier.objects.create(project=project, tier="gold", multiplier=Decimal("1.3"), effective_from=T0)
    return golden


def test_a_clone_has_the_rubric_golden_set_settings_and_prices_and_no_work(setup):
    pm, project, (expert, _other) = setup
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    labels_submit(expert=expert, assignment_id=lease.pk, labels=_all_hits(lease), now=timezone.now())
    golden = _golden_and_prices(project, pm)
    project_settings_update(project=project, values={"overlap": 5, "control_rate_pct": 12, "hard_min_tier": "gold",
                                                     "due_date": "2027-02-01"}, changed_by=pm, now=timezone.now())
    project.refresh_from_db()

    clone = project_clone(source=project, by=pm, name="round 2", now=timezone.now())

    assert (clone.name, clone.overlap, clone.control_rate_pct, clone.hard_min_tier, clone.due_date) == (
        "round 2", 5, 12, "gold", dt.date(2027, 2, 1))
    assert clone.state == ProjectState.ACTIVE
    source_items = set(RubricItem.objects.filter(version__rubric=project.rubric)
                       .values_list("item_key", "content", "score", "dimension_id"))
    assert set(RubricItem.objects.filter(version__rubric=clone.rubric, version__status="published")
               .values_list("item_key", "content", "score", "dimension_id")) == source_items
    clone_tasks = list(Task.objects.filter(project=clone))
    assert [(t.is_golden, t.overlap, t.live_count, t.submitted_count) for t in clone_tasks] == [
        (True, GOLDEN_OVERLAP, 0, 0)]
    assert sorted(GoldenReference.objects.filter(task=clone_tasks[0]).values_list("rubric_item__item_key", "value")) \
        == sorted(GoldenReference.objects.filter(task=golden).values_list("rubric_item__item_key", "value"))
    assert not Assignment.objects.filter(task__project=clone).exists()
    assert sorted(PriceRule.objects.filter(project=clone).values_list("difficulty", "amount")) == [
        ("hard", Decimal("9.0000")), ("normal", Decimal("6.5000"))]
    assert list(TierMultiplier.objects.filter(project=clone).values_list("tier", "multiplier")) == [
        ("gold", Decimal("1.3000"))]
    assert list(project_experts(clone)) == []


def test_a_clone_reads_the_same_guidelines(setup):
    pm, project, _experts = setup
    rubric_draft_start(project=project)
    rubric_draft_guidelines_update(project=project, guidelines="## 温暖\n语气温和，先接住情绪。")
    rubric_version_publish_by_number(project=project, number=2, reason="guidelines", now=timezone.now())

    clone = project_clone(source=project, by=pm, name="round 2", now=timezone.now())

    assert rubric_version_current(clone).guidelines == "## 温暖\n语气温和，先接住情绪。"


def test_a_clone_copies_the_members_only_when_asked(setup, api):
    pm, project, experts = setup

    without = _token_client(api, pm).post(f"/api/v1/projects/{project.pk}/clone/", {}, format="json")
    with_members = _token_client(api, pm).post(f"/api/v1/projects/{project.pk}/clone/",
                                               {"name": "with", "copy_members": True}, format="json")

    assert without.status_code == 201 and with_members.status_code == 201
    assert list(project_experts(Project.objects.get(pk=without.json()["id"]))) == []
    assert set(project_experts(Project.objects.get(pk=with_members.json()["id"]))) == set(experts)


def test_a_closed_project_can_still_be_cloned_from_the_settings_page(setup, client):
    pm, project, _experts = setup
    project_close(project=project, by=pm, now=timezone.now())
    client.force_login(pm)

    done = client.post(f"/projects/{project.pk}/clone/", {"name": "again"})

    clone = Project.objects.get(name="again")
    assert done.status_code == 302 and done["Location"] == f"/projects/{clone.pk}/settings/"
    assert clone.state == ProjectState.ACTIVE


# --- Concurrency --------------------------------------------------------------------------

def _work(project, expert, errors, rounds):
    try:
        for _ in range(rounds):
            try:
                lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
            except Conflict:
                continue
            if lease is None:
                continue
            labels_submit(expert=expert, assignment_id=lease.pk, labels=_all_hits(lease), now=timezone.now())
    except Exception as exc:  # collected and asserted on in the main thread
        errors.append(exc)
    finally:
        connections.close_all()


def _raise(project, pm, errors):
    try:
        project_settings_update(project=project, values={"overlap": 5}, changed_by=pm, now=timezone.now(),
                                apply_to_existing=True)
    except Exception as exc:
        errors.append(exc)
    finally:
        connections.close_all()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_raising_overlap_for_existing_tasks_while_experts_work_keeps_every_counter_exact():
    assert connection.vendor == "postgresql"
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=12, items_per_question=2, pm=pm)
    experts = [ExpertFactory() for _ in range(8)]
    for e in experts:
        project_add_member(project=project, user=e)
    errors: list[Exception] = []
    threads = [threading.Thread(target=_work, args=(project, e, errors, 12)) for e in experts]
    threads.insert(4, threading.Thread(target=_raise, args=(project, pm, errors)))

    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)

    assert errors == []
    assert set(Task.objects.filter(project=project).values_list("overlap", flat=True)) == {5}
    for task in Task.objects.filter(project=project):
        live = task.assignments.filter(status__in=["leased", "submitted"])
        submitted = live.filter(status="submitted").count()
        assert (task.live_count, task.submitted_count) == (live.count(), submitted), task
        assert live.count() <= 5 and len(set(live.values_list("slot", flat=True))) == live.count()
        expected = Task.Status.COMPLETE if submitted == 5 else (
            Task.Status.FULL if live.count() == 5 else Task.Status.OPEN)
        assert task.status == expected, task
        assert (task.completed_at is not None) == (task.status == Task.Status.COMPLETE)
    # Eight experts can give at most eight labels per task: nothing reached five by mistake.
    assert Task.objects.filter(project=project, status="complete").count() == sum(
        1 for t in Task.objects.filter(project=project) if t.submitted_count == 5)


def test_a_paused_project_starts_no_calibration(setup):
    pm, project, (expert, _other) = setup
    project_pause(project=project, by=pm, now=timezone.now())
    project.refresh_from_db()

    with pytest.raises(Conflict) as refused:
        calibration_start(project=project, expert=expert, now=timezone.now())

    assert refused.value.code == "project_paused"
