"""Project setup: creating a project and changing its settings in the browser and the API.

Bad input writes nothing and is named in the user's language; every change is kept in the
history; a raised overlap reaches existing tasks only when asked.
"""
import datetime as dt

import pytest
from django.db import DatabaseError, transaction
from django.utils import timezone, translation
from rest_framework.authtoken.models import Token

from annotation.assignment.services import assignment_claim_next
from annotation.calibration.golden_set import GOLDEN_OVERLAP, task_mark_golden
from annotation.models import Project, ProjectSettingChange, Task
from annotation.projects.services import project_settings_update
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from core.errors import DomainError
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


def _token_client(api, user):
    token, _ = Token.objects.get_or_create(user=user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api


def _snapshot(project: Project) -> dict:
    project.refresh_from_db()
    return {f.name: getattr(project, f.name) for f in Project._meta.concrete_fields}


def _submit_all(project, experts):
    """Each expert leases and submits once (one task each round)."""
    for expert in experts:
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
        labels = {i.item_key: 1 for i in rubric_items_for_task(lease.task)}
        labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())


# --- Bad input writes nothing ----------------------------------------------------------

@pytest.mark.parametrize(("values", "field"), [
    ({"overlap": 0}, "overlap"),
    ({"overlap": 12}, "overlap"),
    ({"overlap": "abc"}, "overlap"),
    ({"lease_timeout_s": 10}, "lease_timeout_s"),
    ({"due_date": "31/12/2026"}, "due_date"),
    ({"due_date": "2026-02-30"}, "due_date"),
    ({"hard_min_tier": "diamond"}, "hard_min_tier"),
    ({"name": "   "}, "name"),
    ({"colour": "red"}, "colour"),
])
def test_a_bad_value_writes_nothing_and_names_its_field(values, field):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    before = _snapshot(project)

    with pytest.raises(DomainError) as refused:
        project_settings_update(project=project, values={"description": "changed", **values}, changed_by=pm,
                                now=timezone.now())

    assert [e["field"] for e in refused.value.errors] == [field]
    assert _snapshot(project) == before
    assert not ProjectSettingChange.objects.exists()


def test_the_chinese_message_uses_the_translated_label_never_the_key():
    project = make_project_with_tasks(n_questions=1)

    with translation.override("zh-hans"), pytest.raises(DomainError) as refused:
        project_settings_update(project=project, values={"overlap": 12, "lease_timeout_s": 10}, changed_by=None,
                                now=timezone.now())

    messages = {e["field"]: e["message"] for e in refused.value.errors}
    assert "重叠" in messages["overlap"] and "1 到 9" in messages["overlap"]
    assert "租约" in messages["lease_timeout_s"]
    assert not any("lease_timeout_s" in m or "overlap" in m for m in messages.values())


def test_the_settings_page_shows_the_error_in_chinese_without_field_keys(client):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    client.force_login(pm)

    page = client.post(f"/projects/{project.pk}/settings/", {"name": "p", "overlap": "12", "lease_timeout_min": "0"},
                       HTTP_ACCEPT_LANGUAGE="zh-hans")

    text = page.content.decode()
    assert page.status_code == 422
    assert "重叠人数" in text and "1 到 9" in text and "租约时长" in text
    assert "lease_timeout_s" not in text.split("<form")[0] + text.split("</form>")[-1]
    assert ">lease_timeout_s" not in text and "overlap:" not in text
    project.refresh_from_db()
    assert project.overlap == 3


def test_the_api_refuses_each_bad_value_with_a_field_entry_and_writes_nothing(api):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    client = _token_client(api, pm)
    before = _snapshot(project)

    for body in ({"overlap": 0}, {"overlap": 12}, {"overlap": "abc"}, {"lease_timeout_s": 10},
                 {"due_date": "tomorrow"}, {"id": 5}, {"overlap": 4, "unknown": 1}):
        refused = client.patch(f"/api/v1/projects/{project.pk}/", body, format="json")
        assert refused.status_code == 400, body
        assert refused.json()["code"] == "invalid_settings"
        assert {e["field"] for e in refused.json()["errors"]} <= set(body), body

    assert _snapshot(project) == before


def test_the_api_patch_is_partial_and_returns_every_setting(api):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)

    changed = _token_client(api, pm).patch(f"/api/v1/projects/{project.pk}/",
                                           {"lease_timeout_s": 600, "due_date": "2026-12-31"}, format="json")

    assert changed.status_code == 200
    assert changed.json()["lease_timeout_s"] == 600 and changed.json()["due_date"] == "2026-12-31"
    assert changed.json()["overlap"] == 3 and changed.json()["state"] == "active"


def test_a_new_lease_gets_the_new_timeout_and_an_open_one_keeps_its_own():
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=2, pm=pm)
    first, second = ExpertFactory(), ExpertFactory()
    for e in (first, second):
        project_add_member(project=project, user=e)
    now = timezone.now()
    old_lease = assignment_claim_next(project=project, expert=first, now=now)

    project_settings_update(project=project, values={"lease_timeout_s": 120}, changed_by=pm, now=now)
    project.refresh_from_db()
    new_lease = assignment_claim_next(project=project, expert=second, now=now)

    old_lease.refresh_from_db()
    assert old_lease.expires_at - now == dt.timedelta(minutes=45)
    assert new_lease.expires_at - now == dt.timedelta(seconds=120)


# --- History --------------------------------------------------------------------------

def test_every_change_is_recorded_with_who_when_old_and_new():
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    now = timezone.now()

    project_settings_update(project=project, values={"overlap": "5", "lease_timeout_s": 2700,
                                                     "due_date": "2027-01-15", "hard_min_tier": "gold"},
                            changed_by=pm, now=now)

    rows = {c.setting: (c.old_value, c.new_value, c.changed_by, c.changed_at)
            for c in ProjectSettingChange.objects.filter(project=project)}
    # lease_timeout_s was already 2700: an unchanged value is not a change.
    assert rows == {"overlap": ("3", "5", pm, now), "due_date": ("", "2027-01-15", pm, now),
                    "hard_min_tier": ("silver", "gold", pm, now)}


def test_the_settings_page_shows_the_history_with_translated_labels(client):
    pm = PMFactory(username="lin")
    project = make_project_with_tasks(n_questions=1, pm=pm)
    project_settings_update(project=project, values={"overlap": 4}, changed_by=pm, now=timezone.now())
    client.force_login(pm)

    page = client.get(f"/projects/{project.pk}/settings/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()

    history = page.split('id="history-title"')[1]
    assert "lin" in history and "重叠人数" in history and ">3<" in history and ">4<" in history


def test_the_history_shows_an_on_off_setting_as_on_and_off_in_the_readers_language(client):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    project_settings_update(project=project, values={"tie_extra_experts": False}, changed_by=pm, now=timezone.now())
    client.force_login(pm)

    zh = client.get(f"/projects/{project.pk}/settings/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    en = client.get(f"/projects/{project.pk}/settings/", HTTP_ACCEPT_LANGUAGE="en").content.decode()

    zh_history, en_history = zh.split('id="history-title"')[1], en.split('id="history-title"')[1]
    assert ">开<" in zh_history and ">关<" in zh_history
    assert ">on<" in en_history and ">off<" in en_history
    assert "True" not in zh_history + en_history and "False" not in zh_history + en_history


def test_the_history_api_lists_changes_newest_first(api):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    project_settings_update(project=project, values={"overlap": 4}, changed_by=pm, now=timezone.now())
    project_settings_update(project=project, values={"overlap": 5}, changed_by=pm, now=timezone.now())

    rows = _token_client(api, pm).get(f"/api/v1/projects/{project.pk}/settings-history/").json()

    assert [(r["setting"], r["old_value"], r["new_value"], r["changed_by"]) for r in rows] == [
        ("overlap", "4", "5", pm.username), ("overlap", "3", "4", pm.username)]


def test_a_recorded_change_cannot_be_rewritten():
    project = make_project_with_tasks(n_questions=1)
    project_settings_update(project=project, values={"overlap": 4}, changed_by=None, now=timezone.now())

    with pytest.raises(DatabaseError), transaction.atomic():
        ProjectSettingChange.objects.update(new_value="9")


# --- Overlap ---------------------------------------------------------------------------

def _project_with_a_complete_task(pm):
    project = make_project_with_tasks(n_questions=3, pm=pm)
    experts = [ExpertFactory() for _ in range(4)]
    for e in experts:
        project_add_member(project=project, user=e)
    # Fill one task: the same task for the first three experts.
    task = Task.objects.filter(project=project).order_by("pk").first()
    Task.objects.filter(project=project).exclude(pk=task.pk).update(status=Task.Status.FULL)
    _submit_all(project, experts[:3])
    Task.objects.filter(project=project).exclude(pk=task.pk).update(status=Task.Status.OPEN)
    task.refresh_from_db()
    assert task.status == Task.Status.COMPLETE
    return project, task, experts


def test_raising_overlap_without_apply_leaves_existing_tasks_and_new_ones_get_it():
    pm = PMFactory()
    project, task, experts = _project_with_a_complete_task(pm)

    result = project_settings_update(project=project, values={"overlap": 4}, changed_by=pm, now=timezone.now())

    assert result.tasks_extended == 0
    assert set(Task.objects.filter(project=project).values_list("overlap", flat=True)) == {3}
    task.refresh_from_db()
    assert task.status == Task.Status.COMPLETE
    assert assignment_claim_next(project=project, expert=experts[3], now=timezone.now()).task_id != task.pk


def test_raising_overlap_for_existing_tasks_reopens_a_complete_one_for_a_fourth_expert():
    pm = PMFactory()
    project, task, experts = _project_with_a_complete_task(pm)
    golden = Task.objects.filter(project=project).exclude(pk=task.pk).order_by("pk").last()
    task_mark_golden(task_ids=[golden.pk])

    result = project_settings_update(project=project, values={"overlap": 4}, changed_by=pm, now=timezone.now(),
                                     apply_to_existing=True)

    assert result.tasks_extended == 2  # the complete task and the other regular one; the golden one is untouched
    task.refresh_from_db()
    golden.refresh_from_db()
    assert (task.overlap, task.status, task.completed_at, task.live_count, task.submitted_count) == (
        4, Task.Status.OPEN, None, 3, 3)
    assert golden.overlap == GOLDEN_OVERLAP
    # The fourth expert gets the reopened task (the other open one is taken out of the pool here).
    Task.objects.filter(project=project).exclude(pk=task.pk).update(status=Task.Status.FULL)
    _submit_all(project, experts[3:])
    task.refresh_from_db()
    assert (task.status, task.submitted_count, task.live_count) == (Task.Status.COMPLETE, 4, 4)
    assert task.assignments.get(expert=experts[3]).slot == 4
    assert {c.total_votes for c in task.consensus.all()} == {4}


def test_lowering_overlap_changes_no_existing_task():
    pm = PMFactory()
    project, task, _experts = _project_with_a_complete_task(pm)

    project_settings_update(project=project, values={"overlap": 2}, changed_by=pm, now=timezone.now(),
                            apply_to_existing=True)

    assert set(Task.objects.filter(project=project).values_list("overlap", flat=True)) == {3}
    task.refresh_from_db()
    assert (task.status, task.submitted_count) == (Task.Status.COMPLETE, 3)


def test_the_page_asks_before_applying_and_says_how_many_tasks(client):
    pm = PMFactory()
    project, task, _experts = _project_with_a_complete_task(pm)
    client.force_login(pm)
    form = {"name": project.name, "overlap": "4", "lease_timeout_min": "45", "apply_to_existing": "on"}

    asked = client.post(f"/projects/{project.pk}/settings/", form, HTTP_ACCEPT_LANGUAGE="en")
    preview = client.get(f"/projects/{project.pk}/settings/overlap-preview/?overlap=4", HTTP_HX_REQUEST="true",
                         HTTP_ACCEPT_LANGUAGE="en")

    assert asked.status_code == 200 and 'name="confirmed"' in asked.content.decode()
    assert "3 existing tasks" in asked.content.decode() and "1 completed task reopens" in asked.content.decode()
    assert "3 existing tasks" in preview.content.decode()
    task.refresh_from_db()
    assert task.overlap == 3
    done = client.post(f"/projects/{project.pk}/settings/", {**form, "confirmed": "yes"})
    assert done.status_code == 302
    task.refresh_from_db()
    assert (task.overlap, task.status) == (4, Task.Status.OPEN)


def test_the_api_applies_a_raised_overlap_to_existing_tasks_when_asked(api):
    pm = PMFactory()
    project, task, _experts = _project_with_a_complete_task(pm)

    done = _token_client(api, pm).patch(f"/api/v1/projects/{project.pk}/",
                                        {"overlap": 5, "apply_to_existing": True}, format="json")

    assert done.status_code == 200
    assert set(Task.objects.filter(project=project).values_list("overlap", flat=True)) == {5}


# --- Creating -----------------------------------------------------------------------------

def test_a_pm_creates_a_project_in_the_browser_and_lands_on_it(client):
    pm = PMFactory()
    client.force_login(pm)

    home = client.get("/").content.decode()
    created = client.post("/projects/new/", {"name": "心理咨询评测", "description": "d", "overlap": "4",
                                             "lease_timeout_min": "30", "due_date": "2027-03-01"})

    assert 'href="/projects/new/"' in home
    project = Project.objects.get(name="心理咨询评测")
    assert created.status_code == 302 and created["Location"] == f"/projects/{project.pk}/"
    assert (project.overlap, project.lease_timeout_s, project.due_date) == (4, 1800, dt.date(2027, 3, 1))
    assert client.get(created["Location"]).status_code == 200


def test_the_create_form_refuses_bad_values_and_creates_nothing(client):
    pm = PMFactory()
    client.force_login(pm)

    refused = client.post("/projects/new/", {"name": "p", "overlap": "0", "lease_timeout_min": "abc",
                                             "due_date": "next week"}, HTTP_ACCEPT_LANGUAGE="zh-hans")

    text = refused.content.decode()
    assert refused.status_code == 422 and not Project.objects.exists()
    assert "重叠人数" in text and "租约时长" in text and "截止日期" in text
    assert 'value="next week"' in text


def test_an_expert_cannot_open_the_create_form(client):
    client.force_login(ExpertFactory())

    assert client.get("/projects/new/").status_code == 404


def test_the_api_creates_a_project_with_a_due_date(api):
    created = _token_client(api, PMFactory()).post("/api/v1/projects/", {"name": "p", "due_date": "2027-01-01"},
                                                   format="json")

    assert created.status_code == 201 and created.json()["due_date"] == "2027-01-01"


# --- Another PM's project ---------------------------------------------------------------

PAGES = ["settings/", "settings/overlap-preview/?overlap=5"]
POSTS = ["settings/", "pause/", "resume/", "close/", "archive/", "clone/"]
API_GETS = ["", "settings-history/"]
API_POSTS = ["pause/", "resume/", "close/", "archive/", "clone/"]


def test_another_pm_gets_404_on_every_page_and_endpoint_and_changes_nothing(client, api):
    project = make_project_with_tasks(n_questions=1, pm=PMFactory())
    other = PMFactory()
    client.force_login(other)
    token = _token_client(api, other)
    before = _snapshot(project)

    for path in PAGES:
        assert client.get(f"/projects/{project.pk}/{path}").status_code == 404, path
    for path in POSTS:
        assert client.post(f"/projects/{project.pk}/{path}", {"overlap": "5", "confirmed": "yes"}).status_code == 404
    for path in API_GETS:
        assert token.get(f"/api/v1/projects/{project.pk}/{path}").status_code == 404, path
    assert token.patch(f"/api/v1/projects/{project.pk}/", {"overlap": 5}, format="json").status_code == 404
    for path in API_POSTS:
        assert token.post(f"/api/v1/projects/{project.pk}/{path}", {}, format="json").status_code == 404, path

    assert _snapshot(project) == before
    assert Project.objects.count() == 1


def test_an_expert_member_gets_404_on_the_settings(client):
    project = make_project_with_tasks(n_questions=1)
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    client.force_login(expert)

    assert client.get(f"/projects/{project.pk}/settings/").status_code == 404


def test_a_change_in_the_django_admin_goes_through_the_service_and_its_history(admin_client):
    project = make_project_with_tasks(n_questions=1)
    form = {f: getattr(project, f) for f in ("name", "description", "overlap", "lease_timeout_s",
                                             "calibration_threshold_pct", "calibration_size",
                                             "calibration_retry_delay_s", "control_rate_pct",
                                             "control_pause_below_pct", "control_window", "hard_min_tier",
                                             "tie_extra_cap", "appeal_window_days", "consult_split_min_score",
                                             "consult_split_share_pct", "consult_deadline_h",
                                             "min_seconds_per_item", "review_run_length", "remind_lease_minutes",
                                             "remind_idle_days", "judge_agreement_bar_pct", "fill_order",
                                             "consensus_labels")}
    form["tie_extra_experts"] = "on"
    form |= {"consult_on_unbroken_tie": "on", "consult_on_score_split": "on", "consult_on_many_splits": "on",
             "review_repeated_notes": "on", "remind_lease_expiring": "on", "alert_quality": "on",
             "alert_deadline_risk": "on"}

    done = admin_client.post(f"/admin/annotation/project/{project.pk}/change/", form | {"overlap": 5})

    assert done.status_code == 302
    change = ProjectSettingChange.objects.get(project=project)
    assert (change.setting, change.old_value, change.new_value) == ("overlap", "3", "5")


@pytest.mark.parametrize("seconds", [2**40, 2**31, 7 * 24 * 3600 + 1])
def test_a_lease_longer_than_a_week_is_refused_with_the_range_and_changes_nothing(api, seconds):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)

    response = _token_client(api, pm).patch(f"/api/v1/projects/{project.pk}/", {"lease_timeout_s": seconds},
                                            format="json", HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 400, response.content
    assert "604800" in response.content.decode()
    project.refresh_from_db()
    assert project.lease_timeout_s == 45 * 60
