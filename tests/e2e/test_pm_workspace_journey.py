"""The PM's workspace in Chromium (zh-Hans), end to end: the board filtered to split items of one
dimension, their overlap raised by a batch job (preview, confirm, summary), an urgent task assigned by
hand to a named expert who then draws it first, a paused expert's leases handed over, and a too-fast
submission returned from the review queue with a comment the expert reads. Screenshots of the board
and the workload page at 1440 and 390 px go to artifacts/."""
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.assignment.manual import assignments_create_by_hand
from annotation.models import Assignment, AuditEntry, BatchJob, ItemConsensus, ReviewFlag, Task
from annotation.review.rules import review_flags_check
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from experts.models import ExpertProfile
from tests.e2e.conftest import sign_in
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
COMMENT = "每一项都请对照回复再看一遍，再提交。"


def _work(project, task, expert, *, at, seconds, value=1):
    """`expert` takes `task` (by hand, so the test knows which) and submits it `seconds` later."""
    lease = assignments_create_by_hand(project=project, task_ids=[task.pk], experts=[expert], by=None,
                                       now=at).assignments[0]
    items = rubric_items_for_task(task)
    labels_submit(expert=expert, assignment_id=lease.pk, labels={i.item_key: value for i in items},
                  now=at + timedelta(seconds=seconds))
    review_flags_check(assignment_id=lease.pk, now=at + timedelta(seconds=seconds))
    return lease


@pytest.fixture
def workspace(settings):
    # Two tasks are more than the job threshold: the overlap batch goes through the worker's path.
    settings.BATCH_SYNC_MAX_TASKS = 1
    pm = PMFactory(username="zhou.pm")
    project = make_project_with_tasks(n_questions=6, items_per_question=2, overlap=3, pm=pm)
    names = ["wang.fang", "li.na", "chen.yu", "zhao.lei"]
    experts = [ExpertFactory(username=n) for n in names]
    for expert in experts:
        project_add_member(project=project, user=expert)
    ExpertProfile.objects.filter(user__in=experts).update(max_concurrent_leases=5)
    wang, li, chen, zhao = experts
    tasks = list(Task.objects.filter(project=project).order_by("pk"))
    start = timezone.now() - timedelta(hours=3)
    for n, task in enumerate(tasks[:3]):  # three complete tasks; the first two will hold splits
        for k, expert in enumerate((wang, li, chen)):
            _work(project, task, expert, at=start + timedelta(minutes=10 * n + k), seconds=120,
                  value=1 if k < 2 else 0)
    split_dimension = rubric_items_for_task(tasks[0])[0].dimension
    ItemConsensus.objects.filter(task__project=project).update(zone=ItemConsensus.Zone.UNANIMOUS)
    ItemConsensus.objects.filter(task__in=tasks[:2], rubric_item__dimension=split_dimension).update(
        zone=ItemConsensus.Zone.SPLIT)
    quick = _work(project, tasks[3], chen, at=start + timedelta(hours=1), seconds=2)  # 2 items in 2 s
    assignments_create_by_hand(project=project, task_ids=[tasks[4].pk], experts=[zhao], by=None,
                               now=timezone.now() - timedelta(minutes=5))
    return {"pm": pm, "project": project, "tasks": tasks, "dimension": split_dimension, "quick": quick,
            "wang": wang, "li": li, "chen": chen, "zhao": zhao}


def _shoot(page, artifacts, name):
    page.set_viewport_size(DESKTOP)
    page.screenshot(path=str(artifacts / f"{name}-1440.png"), full_page=True)
    page.set_viewport_size(PHONE)
    page.screenshot(path=str(artifacts / f"{name}-390.png"), full_page=True)
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    page.set_viewport_size(DESKTOP)
    assert overflow <= 0, name


def _confirm(page):
    page.wait_for_selector("#confirm-step")
    consequences = page.locator("#confirm-consequences").inner_text()
    page.locator("#confirm-step button[type=submit]").click()
    return consequences


def test_a_pm_runs_the_workspace_from_board_to_review(page, live_server, workspace, artifacts):
    w = workspace
    project, tasks, base = w["project"], w["tasks"], live_server.url
    before = set(AuditEntry.objects.values_list("pk", flat=True))
    sign_in(page, base, w["pm"].username)

    # The board, filtered to the tasks with split items of one dimension.
    page.goto(f"{base}/projects/{project.pk}/board/")
    page.select_option("#f-zone", "split")
    page.wait_for_url("**zone=split**")
    page.select_option("#f-dimension", w["dimension"].code)
    page.wait_for_url(f"**dimension={w['dimension'].code}**")
    page.wait_for_function("() => document.querySelector('#board-count').innerText.trim().startsWith('2')")
    assert page.locator("tbody tr[data-href]").count() == 2
    _shoot(page, artifacts, "pm-journey-board")

    # Their overlap raised from 3 to 4: preview, confirm, then the job's summary.
    page.goto(f"{base}/projects/{project.pk}/batch/?split_dimension={w['dimension'].code}")
    expect(page.locator(".batch-count strong")).to_have_text("2")
    overlap_form = page.locator("form:has(input[name=op][value=overlap])")
    overlap_form.locator("input[name=value]").fill("4")
    overlap_form.locator("button").click()
    preview = _confirm(page)
    page.wait_for_url("**/batch/jobs/**")
    expect(page.locator("#batch-job-summary")).to_contain_text("2")
    _shoot(page, artifacts, "pm-journey-batch-job")
    assert "2 个任务符合筛选条件" in preview
    assert BatchJob.objects.get().status == "done"
    assert {t.pk: (t.overlap, t.status) for t in Task.objects.filter(pk__in=[tasks[0].pk, tasks[1].pk])} == {
        tasks[0].pk: (4, "open"), tasks[1].pk: (4, "open")}
    assert Task.objects.get(pk=tasks[2].pk).overlap == 3

    # One urgent task assigned by hand to wang.fang.
    urgent = tasks[5]
    page.goto(f"{base}/projects/{project.pk}/batch/?task={urgent.pk}")
    expect(page.locator(".batch-count strong")).to_have_text("1")
    assign_form = page.locator("form:has(input[name=op][value=assign])")
    assign_form.locator(f"input[name=experts][value='{w['wang'].pk}']").check()
    assign_form.locator("button").click()
    _confirm(page)
    expect(page.locator(".toast-success")).to_be_visible()
    lease = Assignment.objects.get(task=urgent, expert=w["wang"], status="leased")

    # zhao.lei is paused, then their open lease goes to li.na with its slot.
    page.goto(f"{base}/projects/{project.pk}/batch/")
    pause_form = page.locator("form:has(button[value=pause])")
    pause_form.locator(f"input[name=experts][value='{w['zhao'].pk}']").check()
    pause_form.locator("button[value=pause]").click()
    _confirm(page)
    expect(page.locator("form:has(button[value=pause]) .pill-warn")).to_have_count(1)
    handover_form = page.locator("form:has(input[name=op][value=handover])")
    handover_form.locator("select[name=from]").select_option(str(w["zhao"].pk))
    handover_form.locator(f"input[name=experts][value='{w['li'].pk}']").check()
    handover_form.locator("button").click()
    handed = _confirm(page)
    expect(page.locator(".toast-success")).to_be_visible()
    assert "1" in handed
    assert Assignment.objects.filter(task=tasks[4], expert=w["li"], status="leased").exists()
    assert not Assignment.objects.filter(expert=w["zhao"], status="leased").exists()

    # The too-fast submission waits in the review queue; it goes back with a comment.
    page.goto(f"{base}/projects/{project.pk}/review/")
    card = page.locator(f"#review-{w['quick'].pk}")
    expect(card).to_be_visible()
    card.get_by_placeholder("专家需要修改什么？").fill(COMMENT)
    card.get_by_role("button", name="退回专家").click()
    expect(page.get_by_text("已连同你的意见退回专家")).to_be_visible()
    assert ReviewFlag.objects.get(assignment=w["quick"]).status == "returned"

    page.goto(f"{base}/projects/{project.pk}/workload/")
    expect(page.locator(".workload-table tbody tr")).to_have_count(4)
    _shoot(page, artifacts, "pm-journey-workload")

    # Every step above is in the audit log, under the PM's name and the project.
    entries = AuditEntry.objects.exclude(pk__in=before)
    assert sorted(entries.values_list("action", flat=True)) == sorted(
        ["batch.overlap", "assign.by_hand", "expert.pause", "leases.hand_over", "review.return"])
    assert set(entries.values_list("actor_id", "project_id")) == {(w["pm"].pk, project.pk)}
    assert all(entries.values_list("request_id", flat=True))

    # wang.fang draws the urgent task first.
    page.context.clear_cookies()
    sign_in(page, base, w["wang"].username)
    page.locator(f"form[action='/projects/{project.pk}/next/'] button").first.click()
    page.wait_for_url(f"**/assignments/{lease.pk}/")

    # chen.yu reads the PM's comment and opens the returned task.
    page.context.clear_cookies()
    sign_in(page, base, w["chen"].username)
    page.goto(f"{base}/me/history/")
    expect(page.get_by_text(COMMENT)).to_be_visible()
    page.get_by_role("link", name="去修改").click()
    expect(page.locator(".banner-warn")).to_contain_text(COMMENT)
