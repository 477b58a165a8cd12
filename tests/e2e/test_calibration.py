"""In Chromium: a new expert is sent to calibration, fails, reads the feedback, passes on retry and
starts real work; a PM publishes a new rubric version and the expert is sent back to calibration."""
import re

import pytest
from playwright.sync_api import expect

from annotation.models import CalibrationAttempt, GoldenReference
from tests.e2e.conftest import sign_in
from tests.factories import PMFactory
from tests.support.quality import make_golden_project, member

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

TASK_URL = re.compile(r"/calibration/(\d+)/tasks/(\d+)/$")
RESULT_URL = re.compile(r"/calibration/(\d+)/result/$")
ASSIGNMENT_URL = re.compile(r"/assignments/(\d+)/$")


def shoot(page, path) -> None:
    page.screenshot(path=path, caret="initial", full_page=True)


def answer_calibration(page, *, right: bool) -> None:
    """Answer every task of the attempt on screen: every item right, or every item wrong."""
    while match := TASK_URL.search(page.url):
        attempt_id, position = int(match.group(1)), int(match.group(2))
        task = CalibrationAttempt.objects.get(pk=attempt_id).tasks.get(position=position).task
        for ref in GoldenReference.objects.filter(task=task).select_related("rubric_item"):
            value = ref.value if right else 1 - ref.value
            choice = "hit" if value == 1 else "miss"
            page.locator(f"label[for='c-item-{ref.rubric_item.position}-{choice}']").click()
        page.locator("#calibration-save").click()
        page.wait_for_load_state()


@pytest.fixture
def setup(db):
    pm = PMFactory(username="pm.wang")
    project = make_golden_project(golden=12, regular=4, pm=pm, calibration_retry_delay_s=0, control_rate_pct=0)
    expert = member(project)
    return project, pm, expert


def test_calibration_gate_feedback_retry_work_and_recalibration(live_server, browser, page, setup, artifacts):
    project, pm, expert = setup
    base = live_server.url

    # A new expert asks for work and is sent to calibration.
    sign_in(page, base, expert.username)
    page.get_by_role("button", name="下一个任务").click()
    page.wait_for_url(f"{base}/projects/{project.pk}/calibration/")
    expect(page.locator("#calibration-state")).to_have_attribute("data-status", "needed")
    shoot(page, artifacts / "calibration-needed.png")

    # First attempt: every item wrong. The result shows each with the reference and its rationale.
    page.locator("#calibration-go").click()
    page.wait_for_url(TASK_URL)
    shoot(page, artifacts / "calibration-task.png")
    answer_calibration(page, right=False)
    page.wait_for_url(RESULT_URL)
    expect(page.locator("#result-title")).to_have_attribute("data-passed", "false")
    expect(page.locator(".wrong-item")).to_have_count(30)
    expect(page.locator(".rationale").first).to_contain_text("reason")
    shoot(page, artifacts / "calibration-failed.png")

    # Retry (no delay in this project): every item right, then real work.
    page.locator("#calibration-go").click()
    page.wait_for_url(TASK_URL)
    answer_calibration(page, right=True)
    page.wait_for_url(RESULT_URL)
    expect(page.locator("#result-title")).to_have_attribute("data-passed", "true")
    shoot(page, artifacts / "calibration-passed.png")
    page.locator("#start-work").click()
    page.wait_for_url(ASSIGNMENT_URL)
    expect(page.locator(".item")).to_have_count(3)

    # The PM edits an item in a draft and publishes it with a reason.
    pm_context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    pm_page = pm_context.new_page()
    sign_in(pm_page, base, pm.username)
    pm_page.goto(f"{base}/projects/{project.pk}/rubric/?question=q0")
    pm_page.locator("#start-draft").click()
    pm_page.wait_for_url(re.compile(r"/rubric/"))
    pm_page.locator("li.edit-item textarea[name='content']").first.fill("AI 点出用户情绪背后的具体原因")
    pm_page.locator("li.edit-item button[type='submit']").first.click()
    pm_page.wait_for_load_state()
    expect(pm_page.locator("#diff")).to_contain_text("q0:1")
    pm_page.fill("#publish-reason", "澄清金标题 q0 第 1 条的判定标准")
    shoot(pm_page, artifacts / "rubric-draft-diff.png")
    pm_page.locator("#publish-btn").click()
    pm_page.wait_for_load_state()
    expect(pm_page.locator("#start-draft")).to_be_visible()
    pm_context.close()

    # The edit is on a golden question, which calibration rests on: the expert finishes the task
    # leased under the old version, then is sent back to calibration.
    for toggle in page.locator(".toggle-hit").all():
        toggle.click()
    page.locator("#submit-btn").click()
    page.locator("#next-task").click()
    page.wait_for_url(f"{base}/projects/{project.pk}/calibration/")
    expect(page.locator("#calibration-state")).to_have_attribute("data-status", "stale")
    shoot(page, artifacts / "calibration-stale.png")
    assert CalibrationAttempt.objects.filter(expert=expert, status="stale").count() == 2
