"""Workload and deadlines: weekly capacity enforced in the claim, the PM's workload page, the forecast."""
from datetime import date, timedelta

import pytest
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, Project, Task
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from annotation.workload.selectors import expert_loads_for_project, project_deadline
from core.errors import DomainError
from experts.models import ExpertProfile
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


def _member(project, **profile):
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    if profile:
        ExpertProfile.objects.filter(user=expert).update(**profile)
    return expert


def _do_one(project, expert, now):
    lease = assignment_claim_next(project=project, expert=expert, now=now)
    labels = {i.item_key: 1 for i in rubric_items_for_task(lease.task)}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=now + timedelta(seconds=30))
    return lease


def test_an_expert_at_weekly_capacity_gets_no_new_lease_and_is_told_why():
    project = make_project_with_tasks(n_questions=4)
    expert = _member(project, weekly_capacity=2)
    now = timezone.now()
    _do_one(project, expert, now)
    _do_one(project, expert, now)

    with pytest.raises(DomainError) as refused:
        assignment_claim_next(project=project, expert=expert, now=now + timedelta(minutes=1))

    assert refused.value.code == "at_weekly_capacity"
    assert Assignment.objects.filter(expert=expert).count() == 2


def test_capacity_counts_from_monday_so_next_week_the_expert_works_again():
    project = make_project_with_tasks(n_questions=4)
    expert = _member(project, weekly_capacity=1)
    now = timezone.now()
    _do_one(project, expert, now)

    lease = assignment_claim_next(project=project, expert=expert, now=now + timedelta(days=7))

    assert lease is not None


def test_the_api_and_the_home_page_say_the_capacity_is_reached_in_the_users_language(api, client):
    project = make_project_with_tasks(n_questions=3)
    expert = _member(project, weekly_capacity=0)
    api.force_authenticate(expert)
    client.force_login(expert)

    answer = api.post(f"/api/v1/projects/{project.pk}/next-task/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    page = client.post(f"/projects/{project.pk}/next/", HTTP_ACCEPT_LANGUAGE="zh-hans", follow=True)

    assert answer.status_code == 409 and answer.json()["code"] == "at_weekly_capacity"
    assert "每周任务容量" in answer.json()["detail"]
    assert "每周任务容量" in page.content.decode()
    assert not Assignment.objects.exists()


def test_the_workload_row_shows_leases_submissions_capacity_pace_and_pause():
    project = make_project_with_tasks(n_questions=4)
    busy = _member(project, weekly_capacity=10, max_concurrent_leases=2)
    paused = _member(project, status="paused")
    now = timezone.now()
    _do_one(project, busy, now)
    assignment_claim_next(project=project, expert=busy, now=now + timedelta(minutes=2))

    loads = {row.expert.pk: row for row in expert_loads_for_project(project, now=now + timedelta(minutes=3))}

    row = loads[busy.pk]
    assert (row.live, row.today, row.week, row.capacity, row.paused) == (1, 1, 1, 10, False)
    assert row.median_s_per_item == pytest.approx(10.0)  # 30 s over 3 items
    assert loads[paused.pk].paused and loads[paused.pk].median_s_per_item is None


def test_the_forecast_warns_when_the_pace_of_the_last_week_passes_the_due_date():
    project = make_project_with_tasks(n_questions=10)
    now = timezone.now()
    done = list(Task.objects.filter(project=project).order_by("pk")[:7].values_list("pk", flat=True))
    Task.objects.filter(pk__in=done).update(status="complete", completed_at=now - timedelta(days=1))
    Project.objects.filter(pk=project.pk).update(due_date=timezone.localdate(now) + timedelta(days=1))
    project.refresh_from_db()

    deadline = project_deadline(project, now=now)

    # 7 tasks in 7 days: one a day, 3 left, so three days from now: past a due date of tomorrow.
    assert (deadline.done, deadline.total, deadline.throughput_7d) == (7, 10, 7)
    assert deadline.forecast == timezone.localdate(now + timedelta(days=3))
    assert deadline.late


def test_no_progress_in_a_week_with_a_due_date_is_a_warning_too():
    project = make_project_with_tasks(n_questions=2)
    project.due_date = date(2099, 1, 1)

    deadline = project_deadline(project, now=timezone.now())

    assert deadline.forecast is None and deadline.late


def test_the_workload_page_renders_in_chinese_and_its_queries_do_not_grow_with_experts(
        client, django_assert_max_num_queries):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=6, pm=pm)
    now = timezone.now()
    for _ in range(2):
        _do_one(project, _member(project), now)
    client.force_login(pm)
    client.get(f"/projects/{project.pk}/workload/")  # warm the session and permission caches

    with django_assert_max_num_queries(16) as few:
        client.get(f"/projects/{project.pk}/workload/")
    for _ in range(4):
        _do_one(project, _member(project), now)
    with django_assert_max_num_queries(len(few.captured_queries)):
        page = client.get(f"/projects/{project.pk}/workload/", HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert page.status_code == 200
    assert "工作量" in page.content.decode()


def test_another_projects_pm_gets_404_for_the_workload_page(client):
    project = make_project_with_tasks(n_questions=1)
    client.force_login(PMFactory())

    assert client.get(f"/projects/{project.pk}/workload/").status_code == 404


def test_the_workload_fragment_alone_for_htmx(client):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    client.force_login(pm)

    fragment = client.get(f"/projects/{project.pk}/workload/", HTTP_HX_REQUEST="true").content.decode()

    assert 'id="workload"' in fragment and "<html" not in fragment
