"""Reveal after submission in Chromium: an expert submits, compares with the judge, revises one item with
a reason (keyboard only), and the PM's quality report shows agreement before and after the reveal."""
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.agreement.services import agreement_report_compute
from annotation.models import Assignment, Label, Task
from annotation.services import project_add_member
from tests.annotation.test_reveal import PANEL, build
from tests.e2e.conftest import sign_in
from tests.factories import ExpertFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

REASON = "回复第一句就点出了用户的疲惫，我漏看了。"


def _lease(task: Task, expert) -> Assignment:
    now = timezone.now()
    Task.objects.filter(pk=task.pk).update(live_count=task.live_count + 1)
    task.refresh_from_db()
    return Assignment.objects.create(task=task, expert=expert, slot=task.live_count, leased_at=now,
                                     expires_at=now + timedelta(hours=1))


def test_an_expert_revises_once_after_the_reveal_and_the_pm_sees_before_and_after(
        live_server, page, browser, artifacts):
    # Two experts submitted already; the third (PANEL[2] = [0, 1, 0]) submits in the browser.
    project, pm, _experts, _assignments, task, _run = build(panel=PANEL[:2])
    expert = ExpertFactory(username="lin.xiao")
    project_add_member(project=project, user=expert)
    lease = _lease(task, expert)

    sign_in(page, live_server.url, expert.username)
    page.goto(f"{live_server.url}/assignments/{lease.pk}/")
    for key in ["0", "1", "0"]:
        page.keyboard.press(key)
    expect(page.locator("#progress-done")).to_have_text("3")
    page.keyboard.press("Enter")
    compare = page.locator(f"a[href='/assignments/{lease.pk}/reveal/']")
    expect(compare).to_be_visible()
    page.screenshot(path=str(artifacts / "reveal-submitted-1440.png"))
    compare.click()
    page.wait_for_url(f"**/assignments/{lease.pk}/reveal/")

    # One difference: item 1 (the expert said miss, the judge hit), with the judge's reasoning.
    expect(page.locator(".reveal-item")).to_have_count(1)
    expect(page.locator(".reveal-judge-reason")).to_contain_text("names the fatigue")
    page.screenshot(path=str(artifacts / "reveal-1440.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(artifacts / "reveal-390.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.set_viewport_size({"width": 1440, "height": 900})

    # Keyboard only: focus the box, tick it with Space, Tab to the reason, type, submit with Enter.
    checkbox = page.locator("input[name^='change-']")
    checkbox.focus()
    page.keyboard.press("Space")
    expect(checkbox).to_be_checked()
    page.keyboard.press("Tab")
    expect(page.locator("textarea[name^='reason-']")).to_be_focused()
    page.keyboard.type(REASON)
    page.keyboard.press("Tab")
    expect(page.locator(".reveal-form button[type='submit']")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".banner-info")).to_contain_text("1")
    expect(page.locator("input[name^='change-']")).to_have_count(0)
    page.screenshot(path=str(artifacts / "reveal-done-1440.png"), full_page=True)

    label = Label.objects.get(assignment=lease, rubric_item__position=1)
    assert (label.value, label.revision.value, label.revision.reason) == (0, 1, REASON)

    agreement_report_compute(project=project, now=timezone.now())
    pm_context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    pm_page = pm_context.new_page()
    sign_in(pm_page, live_server.url, pm.username)
    pm_page.goto(f"{live_server.url}/projects/{project.pk}/dashboard/?tab=judge")
    table = pm_page.locator("table.reveal-before-after")
    expect(table).to_contain_text("0.0%")
    expect(table).to_contain_text("33.3%")
    expect(pm_page.locator(".labels-used")).to_have_attribute("data-labels-used", "first")
    pm_page.locator("table.reveal-before-after").scroll_into_view_if_needed()
    pm_page.screenshot(path=str(artifacts / "reveal-report-1440.png"), full_page=True)
    pm_page.set_viewport_size({"width": 390, "height": 844})
    pm_page.screenshot(path=str(artifacts / "reveal-report-390.png"), full_page=True)
    pm_context.close()
