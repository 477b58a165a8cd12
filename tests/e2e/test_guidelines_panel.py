"""An expert reads the guidelines in Chromium: the page, and the panel on the annotation page (key g)."""
import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.demo import GUIDELINES_FILE
from annotation.rubric_editing.publishing import rubric_version_publish
from annotation.rubric_editing.services import rubric_draft_guidelines_update
from annotation.services import project_add_member
from tests.e2e.conftest import sign_in
from tests.e2e.scenario import build_counselling_project
from tests.factories import ExpertFactory, PMFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ASSIGNMENT_URL = re.compile(r"/assignments/(\d+)/$")


def shoot(page, path) -> None:
    page.screenshot(path=path, caret="initial")  # see test_annotate_keyboard.shoot


@pytest.fixture
def guided():
    project = build_counselling_project(pm=PMFactory(), tasks=1)
    draft = rubric_draft_guidelines_update(project=project, guidelines=GUIDELINES_FILE.read_text(encoding="utf-8"))
    rubric_version_publish(project=project, version=draft, reason="加入标注指南", now=timezone.now())
    expert = ExpertFactory(username="zhou.ning", first_name="周宁")
    project_add_member(project=project, user=expert)
    return project, expert


def _panel_is_beside_the_reply(page) -> None:
    panel = page.locator("#guidelines-panel").bounding_box()
    reply = page.locator(".pane-reply").bounding_box()
    assert panel is not None and reply is not None
    assert panel["x"] >= reply["x"] + reply["width"] - 1  # the reply stays uncovered


def test_g_opens_and_closes_the_panel_but_not_while_typing_a_note(live_server, page, guided, artifacts):
    project, expert = guided
    sign_in(page, live_server.url, expert.username)
    page.get_by_role("button", name="下一个任务").click()
    page.wait_for_url(ASSIGNMENT_URL)
    panel = page.locator("#guidelines-panel")
    expect(panel).to_be_hidden()

    page.keyboard.press("g")
    expect(panel).to_be_visible()
    expect(panel.locator("#dim-warmth")).to_have_text("温暖")
    expect(page.locator("#guidelines-open")).to_have_attribute("aria-expanded", "true")
    _panel_is_beside_the_reply(page)
    shoot(page, artifacts / "guidelines-panel-1440.png")

    # Marking still works with the panel open, and g closes it again.
    page.keyboard.press("h")
    expect(page.locator("#progress-done")).to_have_text("1")
    page.keyboard.press("g")
    expect(panel).to_be_hidden()

    # In a note, g is a letter.
    page.keyboard.press("n")
    note = page.locator(".item.is-current textarea")
    expect(note).to_be_focused()
    page.keyboard.type("good grief")
    expect(note).to_have_value("good grief")
    expect(panel).to_be_hidden()
    page.keyboard.press("Escape")

    # The button toggles it, and a dimension opens it at its section.
    page.locator("#guidelines-open").click()
    expect(panel).to_be_visible()
    page.locator("[data-guidelines-close]").click()
    expect(panel).to_be_hidden()
    link = page.locator("[data-guidelines-section]").first
    section = link.get_attribute("data-guidelines-section")
    link.click()
    expect(panel).to_be_visible()
    expect(panel.locator(f"#{section}")).to_be_in_viewport()
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()


def test_the_panel_is_a_full_screen_sheet_on_a_phone(live_server, browser, guided, artifacts):
    project, expert = guided
    context = browser.new_context(viewport={"width": 390, "height": 844}, locale="zh-CN")
    page = context.new_page()
    try:
        sign_in(page, live_server.url, expert.username)
        page.get_by_role("button", name="下一个任务").click()
        page.wait_for_url(ASSIGNMENT_URL)
        page.locator("#guidelines-open").click()
        panel = page.locator("#guidelines-panel")
        expect(panel).to_be_visible()

        box = panel.bounding_box()
        assert box is not None and box["x"] == 0 and box["width"] == 390 and box["y"] == 0
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        shoot(page, artifacts / "guidelines-panel-390.png")
        page.locator("[data-guidelines-close]").click()
        expect(panel).to_be_hidden()

        page.goto(f"{live_server.url}/projects/{project.pk}/guidelines/")
        expect(page.locator("#dim-warmth")).to_have_text("温暖")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        shoot(page, artifacts / "guidelines-page-390.png")
    finally:
        context.close()


def test_the_guidelines_page_lists_the_dimensions_and_jumps_to_a_section(live_server, page, guided, artifacts):
    project, expert = guided
    sign_in(page, live_server.url, expert.username)
    page.goto(f"{live_server.url}/projects/{project.pk}/guidelines/")

    expect(page.locator(".page-head h1")).to_have_text("标注指南")
    shoot(page, artifacts / "guidelines-page-1440.png")
    page.locator(".guidelines-toc a", has_text="道德").click()
    expect(page).to_have_url(re.compile(r"#dim-morality$"))
    expect(page.locator("#dim-morality")).to_be_in_viewport()
