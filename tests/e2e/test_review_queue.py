"""The review queue in the browser: a PM sees a too-fast and a copied-note submission, returns one
with a comment that the expert reads, and accepts the other. Screenshots at 1440 and 390 px (zh-Hans)."""
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.assignment.services import assignment_claim_next
from annotation.models import ReviewFlag
from annotation.review.rules import review_flags_check
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from tests.e2e.conftest import sign_in
from tests.e2e.scenario import build_counselling_project
from tests.factories import ExpertFactory, PMFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SHOTS = Path("/work/shots/review")
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
NOTE = "回复没有回应来访者的问题，只给出了泛泛的安慰。"


def _shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size(DESKTOP)
    page.screenshot(path=str(SHOTS / f"{name}-1440.png"), full_page=True)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], name
    page.screenshot(path=str(SHOTS / f"{name}-390.png"), full_page=True)
    page.set_viewport_size(DESKTOP)


def _submit(project, expert, *, at, seconds, note=""):
    lease = assignment_claim_next(project=project, expert=expert, now=at)
    keys = [item.item_key for item in rubric_items_for_task(lease.task)]
    labels_submit(expert=expert, assignment_id=lease.pk, labels={k: 1 for k in keys},
                  notes={keys[0]: note} if note else None, now=at + timedelta(seconds=seconds))
    review_flags_check(assignment_id=lease.pk, now=at + timedelta(seconds=seconds))
    return lease


@pytest.fixture
def flagged(db):
    pm = PMFactory(username="zhou.pm")
    fast, copier = ExpertFactory(username="lin.xiao"), ExpertFactory(username="chen.yu")
    project = build_counselling_project(pm=pm, questions=3, tasks=3)
    for user in (pm, fast, copier):
        project_add_member(project=project, user=user)
    now = timezone.now() - timedelta(hours=1)
    quick = _submit(project, fast, at=now, seconds=2)
    _submit(project, copier, at=now, seconds=300, note=NOTE)
    copied = _submit(project, copier, at=now + timedelta(minutes=10), seconds=300, note=NOTE)
    return project, pm, fast, quick, copied


def test_a_pm_returns_a_too_fast_submission_with_a_comment_the_expert_reads(live_server, page, flagged):
    project, pm, fast, quick, copied = flagged
    sign_in(page, live_server.url, pm.username)
    page.goto(f"{live_server.url}/projects/{project.pk}/review/")
    expect(page.locator("h1")).to_have_text("复核")
    expect(page.locator(".review-card")).to_have_count(2)
    _shoot(page, "review-queue")

    card = page.locator(f"#review-{quick.pk}")
    card.get_by_placeholder("专家需要修改什么？").fill("每一项都请对照回复再看一遍。")
    card.get_by_role("button", name="退回专家").click()
    expect(page.get_by_text("已连同你的意见退回专家")).to_be_visible()
    page.locator(f"#review-{copied.pk}").get_by_role("button", name="接受").click()
    expect(page.get_by_text("没有待复核的提交")).to_be_visible()
    assert set(ReviewFlag.objects.values_list("status", flat=True)) == {"returned", "accepted"}

    page.context.clear_cookies()
    sign_in(page, live_server.url, fast.username)
    page.goto(f"{live_server.url}/me/history/")
    expect(page.get_by_text("每一项都请对照回复再看一遍。")).to_be_visible()
    page.get_by_role("link", name="去修改").click()
    expect(page.locator(".banner-warn")).to_contain_text("每一项都请对照回复再看一遍。")
