"""The PM's workload page in Chromium, at desktop and phone widths (zh-Hans); a batch operation from its page."""
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.models import Project, Task
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from experts.models import ExpertProfile
from tests.e2e.conftest import sign_in
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]
SHOTS = Path("/work/shots/assign")


def _project_with_work():
    pm = PMFactory(username="pm_lin")
    project = make_project_with_tasks(n_questions=12, items_per_question=3, pm=pm)
    now = timezone.now()
    for n, name in enumerate(["wang_fang", "li_na", "zhang_wei", "chen_jing"]):
        expert = ExpertFactory(username=name)
        project_add_member(project=project, user=expert)
        ExpertProfile.objects.filter(user=expert).update(weekly_capacity=[4, 10, 20, 5][n], max_concurrent_leases=2)
        for k in range(4 - n):
            lease = assignment_claim_next(project=project, expert=expert, now=now - timedelta(minutes=30 - k))
            labels = {i.item_key: 1 for i in rubric_items_for_task(lease.task)}
            labels_submit(expert=expert, assignment_id=lease.pk, labels=labels,
                          now=now - timedelta(minutes=29 - k, seconds=10 * n))
        if n == 1:
            assignment_claim_next(project=project, expert=expert, now=now)
        if n == 3:
            ExpertProfile.objects.filter(user=expert).update(status="paused")
    done = list(Task.objects.filter(project=project).order_by("pk").values_list("pk", flat=True)[:3])
    Task.objects.filter(pk__in=done).update(status="complete", completed_at=now - timedelta(days=2))
    Project.objects.filter(pk=project.pk).update(due_date=timezone.localdate(now) + timedelta(days=5))
    return pm, project


def test_the_workload_page_reads_at_1440_and_at_390(page, live_server):
    pm, project = _project_with_work()
    sign_in(page, live_server.url, pm.username)

    page.goto(f"{live_server.url}/projects/{project.pk}/workload/")
    page.screenshot(path=str(SHOTS / "workload-1440.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    page.screenshot(path=str(SHOTS / "workload-390.png"), full_page=True)
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")

    assert page.locator("h1").inner_text() == "工作量"
    assert page.locator(".banner-warn").count() == 1  # 3 done in 7 days, 9 left: past the due date
    assert page.locator(".workload-table tbody tr").count() == 4
    assert overflow <= 0


def test_a_pm_raises_overlap_on_a_filtered_set_with_preview_confirm_and_summary(page, live_server):
    pm, project = _project_with_work()
    sign_in(page, live_server.url, pm.username)

    page.goto(f"{live_server.url}/projects/{project.pk}/batch/?status=open")
    page.screenshot(path=str(SHOTS / "batch-1440.png"), full_page=True)
    page.locator("form:has(input[value=overlap]) button").click()
    page.wait_for_selector("#confirm-step")
    preview = page.locator("#confirm-consequences").inner_text()
    page.locator("#confirm-step button[type=submit]").click()
    page.wait_for_selector(".toast, .flash")

    assert "个任务符合筛选条件" in preview
    assert "完成" in page.content()
    assert Task.objects.filter(project=project, overlap=4).count() == Task.objects.filter(
        project=project, status="open").count()
