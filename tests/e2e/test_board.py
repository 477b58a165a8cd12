"""The board and the dashboard's first screen in Chromium: keyboard shortcuts, the fold at 1440×900, a 390 px phone."""
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from annotation.agreement.services import agreement_report_compute
from annotation.models import Assignment, Project
from payments.ledger import ledger_post_earning
from tests.annotation.test_agreement_report import JUDGE, PANEL, T0, build
from tests.e2e.conftest import sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SHOTS = Path("/work/shots/board")
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def reported():
    project, experts, tasks, run = build(PANEL, JUDGE)
    agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
    Project.objects.filter(pk=project.pk).update(due_date=timezone.localdate() + timedelta(days=10))
    for assignment in Assignment.objects.filter(task__project=project, status=Assignment.Status.SUBMITTED):
        ledger_post_earning(assignment_id=assignment.pk, now=assignment.submitted_at)
    SHOTS.mkdir(parents=True, exist_ok=True)
    return project, tasks


def test_the_first_screen_fits_above_the_fold_and_reads_on_a_phone(page, live_server, reported):
    project, _ = reported
    sign_in(page, live_server.url, project.created_by.username)

    page.goto(f"{live_server.url}/projects/{project.pk}/dashboard/")
    page.wait_for_load_state("networkidle")
    cards = page.locator("[data-card]")
    last = cards.nth(3).bounding_box()
    page.screenshot(path=str(SHOTS / "dashboard-1440.png"))
    page.set_viewport_size(PHONE)
    page.reload()
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(SHOTS / "dashboard-390.png"), full_page=True)

    assert cards.count() == 4
    assert last["y"] + last["height"] <= 900  # all four cards above the fold at 1440×900
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert "评审模型可信吗？" in page.locator(".headline-cards").inner_text()


def test_the_board_answers_to_the_keyboard(page, live_server, reported):
    project, tasks = reported
    sign_in(page, live_server.url, project.created_by.username)
    page.goto(f"{live_server.url}/projects/{project.pk}/board/")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(SHOTS / "board-1440.png"), full_page=True)

    page.keyboard.press("?")
    assert page.locator("#board-help").is_visible()
    assert "下一个任务" in page.locator("#board-help").inner_text()
    page.keyboard.press("Escape")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "board-search"
    page.keyboard.press("Escape")
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    page.keyboard.press("j")
    assert page.locator("tr.is-current").count() == 1
    second = page.locator("tbody tr[data-href]").nth(1).get_attribute("data-href")
    assert page.locator("tr.is-current").get_attribute("data-href") == second
    page.keyboard.press("Enter")
    page.wait_for_url(f"**{second}")
    assert page.locator("#h-held").is_visible()

    page.goto(f"{live_server.url}/projects/{project.pk}/board/")
    page.fill("#board-search", "zzz-nothing-matches")
    page.wait_for_function("() => document.querySelector('#board-count').innerText.startsWith('0')")
    page.fill("#board-search", "")
    page.select_option("#f-model", "model-1")
    page.wait_for_url("**model=model-1**")
    page.wait_for_function("() => !document.querySelector('#board-count').innerText.startsWith('0')")
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/projects/{project.pk}/board/")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(SHOTS / "board-390.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
