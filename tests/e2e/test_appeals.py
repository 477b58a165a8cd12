"""Appeals in the browser: an expert contests a rejection from their history; another PM accepts it
after the confirmation step; the expert reads the outcome. Screenshots at 1440 and 390 px (zh-Hans)."""
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.assignment.services import assignment_claim_next
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from payments.ledger import ledger_post_earning
from payments.models import Appeal, LedgerEntry
from payments.services import submission_reject
from tests.e2e.conftest import sign_in
from tests.e2e.scenario import build_counselling_project
from tests.factories import ExpertFactory, PMFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SHOTS = Path("/work/shots/appeals")
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}


def _shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size(DESKTOP)
    page.screenshot(path=str(SHOTS / f"{name}-1440.png"), full_page=True)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], name
    page.screenshot(path=str(SHOTS / f"{name}-390.png"), full_page=True)
    page.set_viewport_size(DESKTOP)


@pytest.fixture
def rejected(db):
    pm, other_pm = PMFactory(username="zhou.pm"), PMFactory(username="wang.pm")
    expert = ExpertFactory(username="lin.xiao")
    project = build_counselling_project(pm=pm, questions=1, tasks=1)
    for user in (pm, other_pm, expert):
        project_add_member(project=project, user=user)
    now = timezone.now()
    lease = assignment_claim_next(project=project, expert=expert, now=now)
    labels = {item.item_key: 0 for item in rubric_items_for_task(lease.task)}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=now)
    ledger_post_earning(assignment_id=lease.pk, now=now)
    submission_reject(actor=pm, assignment_id=lease.pk, reason="所有条目都标为未命中，用时不到 10 秒",
                      reason_code="spam", now=now)
    return project, other_pm, expert, lease


def test_an_expert_contests_a_rejection_and_another_pm_accepts_it(live_server, page, rejected):
    project, other_pm, expert, lease = rejected
    sign_in(page, live_server.url, expert.username)
    page.goto(f"{live_server.url}/me/history/")
    page.get_by_role("link", name="申诉").click()
    expect(page.locator("h1")).to_have_text("对驳回提出申诉")
    page.fill("#appeal-reason", "这位来访者并没有提出具体请求，指南第 3 条允许此时不给建议，所以这些条目确实未命中。")
    _shoot(page, "contest-form")
    page.get_by_role("button", name="提交申诉").click()
    expect(page.locator(".appeal-table")).to_contain_text("等待裁决")

    page.context.clear_cookies()
    sign_in(page, live_server.url, other_pm.username)
    page.goto(f"{live_server.url}/payments/costs/{project.pk}/")
    page.get_by_role("link", name="申诉", exact=True).first.click()
    expect(page.locator(".appeal-card")).to_have_count(1)
    page.get_by_label("接受", exact=True).check()
    page.fill(".appeal-decide textarea", "指南第 3 条确实允许不给建议；驳回撤销。")
    _shoot(page, "decider-queue")
    page.get_by_role("button", name="裁决").click()
    page.get_by_role("button", name="接受并入账").click()
    expect(page.locator(".appeal-card")).to_contain_text("指南第 3 条确实允许不给建议")

    appeal = Appeal.objects.get()
    assert appeal.status == "accepted"
    assert LedgerEntry.objects.filter(kind="adjustment", assignment=lease).count() == 1
    page.context.clear_cookies()
    sign_in(page, live_server.url, expert.username)
    page.goto(f"{live_server.url}/me/history/")
    expect(page.locator(".history-appeal")).to_contain_text("已接受")
    _shoot(page, "expert-history-outcome")
