"""An expert annotates whole tasks in Chromium with the keyboard alone."""
import re

import pytest
from playwright.sync_api import expect

from annotation.models import Response
from annotation.services import project_add_member
from tests.e2e.conftest import sign_in
from tests.e2e.scenario import QUESTIONS, SECRET_MODEL, build_counselling_project, task_open
from tests.factories import ExpertFactory, PMFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ASSIGNMENT_URL = re.compile(r"/assignments/(\d+)/$")


def shoot(page, path) -> None:
    # caret="initial": hiding the caret makes Playwright leave style="" on inputs, which
    # htmx would then copy while settling a swap, tripping the page's own CSP.
    page.screenshot(path=path, caret="initial")


def current_item(page):
    return page.locator(".item.is-current")


def expect_marks(page, marks: dict[int, str]) -> None:
    for position, value in marks.items():
        expect(page.locator(f"#item-{position}")).to_have_attribute("data-value", value)


@pytest.fixture
def expert(db):
    expert = ExpertFactory(username="lin.xiao", first_name="林晓")
    # One open task at first, so the first page is always the long work-stress dialogue.
    project = build_counselling_project(pm=PMFactory(), tasks=1)
    project_add_member(project=project, user=expert)
    return expert


def test_annotate_a_task_with_the_keyboard_alone(live_server, page, expert, artifacts):
    sign_in(page, live_server.url, expert.username)
    shoot(page, artifacts / "home.png")
    page.get_by_role("button", name="下一个任务").click()
    page.wait_for_url(ASSIGNMENT_URL)
    first_url = page.url
    expect(page.locator("#final-turn .bubble")).to_have_text(QUESTIONS[0]["final"])
    task_open(Response.objects.get(question__external_id=QUESTIONS[1]["id"]))
    total = page.locator(".item").count()
    assert SECRET_MODEL not in page.content()
    expect(current_item(page)).to_have_id("item-1")

    # h / m and 1 / 0 mark the current item, and the next unmarked item becomes current.
    for key in ["h", "m", "1", "0"]:
        page.keyboard.press(key)
    expect(page.locator("#progress-done")).to_have_text("4")
    expect(current_item(page)).to_have_id("item-5")
    expect(page.locator("#save-status")).to_have_attribute("data-state", "saved")

    # A reload keeps the autosaved draft, and the first unmarked item is current again.
    page.reload()
    expect_marks(page, {1: "1", 2: "0", 3: "1", 4: "0"})
    expect(current_item(page)).to_have_id("item-5")

    # n opens the note; typing there (even h, m, 1, 0) marks nothing; Esc returns to the item.
    page.keyboard.press("n")
    expect(page.locator("#item-5-note")).to_be_focused()
    page.keyboard.type("把“不适合”重新解释为压力下的反应 ok hm 10")
    page.keyboard.press("Escape")
    expect(page.locator("#item-5")).not_to_have_attribute("data-value", re.compile("."))
    expect(current_item(page)).to_have_id("item-5")
    page.keyboard.press("h")
    expect(current_item(page)).to_have_id("item-6")
    expect(page.locator("#save-status")).to_have_attribute("data-state", "saved")
    shoot(page, artifacts / "annotate.png")

    # j / k move, digits 2–9 jump, Home and G go to the ends.
    page.keyboard.press("k")
    expect(current_item(page)).to_have_id("item-5")
    page.keyboard.press("j")
    expect(current_item(page)).to_have_id("item-6")
    page.keyboard.press("3")
    expect(current_item(page)).to_have_id("item-3")
    page.keyboard.press("G")
    expect(current_item(page)).to_have_id(f"item-{total}")
    page.keyboard.press("Home")
    expect(current_item(page)).to_have_id("item-1")

    # Enter with items left jumps to the first unmarked one and says how many are left.
    page.keyboard.press("Enter")
    expect(current_item(page)).to_have_id("item-6")
    expect(page.locator("#flash")).to_contain_text(f"还有 {total - 5} 项未标注")

    # A mark followed at once by a reload is not lost (keepalive save or the local copy).
    page.keyboard.press("m")
    page.reload()
    expect_marks(page, {6: "0"})
    expect(page.locator("#item-5-note")).to_have_value(re.compile("压力下的反应"))

    page.keyboard.press("?")
    expect(page.locator("#help")).to_be_visible()
    shoot(page, artifacts / "help.png")
    page.keyboard.press("Escape")
    expect(page.locator("#help")).to_be_hidden()

    for _ in range(total - 6):
        page.keyboard.press("h")
    expect(page.locator("#progress-done")).to_have_text(str(total))
    expect(page.locator("#submit-hint")).to_contain_text("按 Enter 提交")

    page.keyboard.press("Enter")
    expect(page.locator("#done-title")).to_have_text("已提交")
    expect(page.locator("#next-task")).to_be_focused()
    shoot(page, artifacts / "submitted.png")

    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: ASSIGNMENT_URL.search(url) is not None and url != first_url)
    expect(page.locator("#final-turn .bubble")).to_have_text(QUESTIONS[1]["final"])
    expect(page.locator("#progress-done")).to_have_text("0")


def test_annotation_page_in_english(live_server, page, expert, artifacts):
    sign_in(page, live_server.url, expert.username)
    page.get_by_role("button", name="EN").click()
    page.get_by_role("button", name="Next task").click()
    page.wait_for_url(ASSIGNMENT_URL)

    for key in ["h", "h", "m"]:
        page.keyboard.press(key)
    expect(page.locator("#save-status")).to_have_attribute("data-state", "saved")

    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.locator(".pane-reply .pane-label")).to_have_text("Reply to judge")
    expect(page.locator(".final-flag")).to_have_text("Final user turn")
    shoot(page, artifacts / "annotate-en.png")

    # Submitting by mouse with items left: the server refuses, every mark stays, and the
    # re-rendered form answers the keyboard again, starting at the first missing item.
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#form-error")).to_contain_text("have no mark yet")
    expect_marks(page, {1: "1", 2: "1", 3: "0"})
    expect(current_item(page)).to_have_id("item-4")
    page.keyboard.press("m")
    expect(page.locator("#item-4")).to_have_attribute("data-value", "0")
    expect(current_item(page)).to_have_id("item-5")
