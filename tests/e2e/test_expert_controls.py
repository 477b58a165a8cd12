"""In Chromium: the expert's own controls. The keep-working key extends the lease, a task is
skipped with a reason from the keyboard, and a whole calibration attempt is answered with the
keyboard alone, keeping its autosaved marks across a reload."""
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.models import Assignment, CalibrationAttempt, CalibrationDraft, GoldenReference, Project, TaskSkip
from annotation.services import project_add_member
from tests.e2e.conftest import sign_in
from tests.e2e.scenario import SECRET_MODEL, build_counselling_project
from tests.factories import ExpertFactory, PMFactory
from tests.support.quality import make_golden_project, member

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ASSIGNMENT_URL = re.compile(r"/assignments/(\d+)/$")
TASK_URL = re.compile(r"/calibration/(\d+)/tasks/(\d+)/$")
RESULT_URL = re.compile(r"/calibration/(\d+)/result/$")


def shoot(page, path) -> None:
    page.screenshot(path=path, caret="initial")


@pytest.fixture
def expert(db):
    expert = ExpertFactory(username="zhou.min", first_name="周敏")
    project = build_counselling_project(pm=PMFactory(), tasks=2)
    Project.objects.filter(pk=project.pk).update(lease_timeout_s=600, control_rate_pct=0)
    project_add_member(project=project, user=expert)
    return expert


def _open_task(page, base_url, expert) -> Assignment:
    sign_in(page, base_url, expert.username)
    page.get_by_role("button", name="下一个任务").click()
    page.wait_for_url(ASSIGNMENT_URL)
    return Assignment.objects.get(pk=int(ASSIGNMENT_URL.search(page.url).group(1)))


def test_the_keep_working_key_extends_the_lease(live_server, page, expert, artifacts):
    lease = _open_task(page, live_server.url, expert)
    # Nearly out of time: the page warns and offers the key.
    Assignment.objects.filter(pk=lease.pk).update(expires_at=timezone.now() + timedelta(seconds=90))
    page.reload()
    clock = page.locator("#lease-clock")
    expect(clock).to_have_attribute("data-level", "warn")
    expect(page.locator("#flash")).to_be_empty()
    expect(page.locator("#lease-time")).to_have_text(re.compile(r"^1:[0-2]\d$"))
    shoot(page, artifacts / "controls-lease-warning.png")

    page.keyboard.press("w")

    expect(page.locator("#lease-clock")).to_have_attribute("data-level", "ok")
    expect(page.locator("#lease-time")).to_have_text(re.compile(r"^(10:00|9:5\d)$"))
    expect(page.locator("#flash")).to_have_text("已延长这项任务的剩余时间。")
    lease.refresh_from_db()
    assert lease.expires_at > timezone.now() + timedelta(seconds=550)


def test_skip_a_task_with_a_reason_from_the_keyboard(live_server, page, expert, artifacts):
    lease = _open_task(page, live_server.url, expert)
    assert SECRET_MODEL not in page.content()
    page.keyboard.press("h")  # a mark first: the draft is kept after the skip

    page.keyboard.press("s")
    dialog = page.locator("#skip-dialog")
    expect(dialog).to_be_visible()
    # "Other" without text is refused in the dialog, which keeps the choice.
    page.keyboard.press("4")
    expect(page.locator("#skip-text")).to_be_focused()
    page.locator("#skip-confirm").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#skip-error")).to_be_visible()
    expect(page.locator("input[name='reason'][value='other']")).to_be_checked()
    shoot(page, artifacts / "controls-skip-dialog.png")
    assert not TaskSkip.objects.exists()

    page.locator("input[name='reason'][value='other']").focus()
    page.keyboard.press("2")
    expect(page.locator("input[name='reason'][value='content_problem']")).to_be_checked()
    page.keyboard.press("Enter")

    page.wait_for_url(f"{live_server.url}/")
    skip = TaskSkip.objects.get()
    assert (skip.assignment_id, skip.reason) == (lease.pk, "content_problem")
    lease.refresh_from_db()
    assert lease.status == "released"
    expect(page.locator(".toast")).to_contain_text("已跳过该任务")
    # The next task is another one: the skipped task never comes back to this expert.
    page.get_by_role("button", name="下一个任务").click()
    page.wait_for_url(ASSIGNMENT_URL)
    assert int(ASSIGNMENT_URL.search(page.url).group(1)) != lease.pk


@pytest.fixture
def calibrating(db):
    project = make_golden_project(golden=12, regular=2, pm=PMFactory(), calibration_retry_delay_s=0,
                                  control_rate_pct=0)
    return project, member(project)


def _keys_for(attempt_id: int, position: int) -> list[str]:
    task = CalibrationAttempt.objects.get(pk=attempt_id).tasks.get(position=position).task
    refs = GoldenReference.objects.filter(task=task).select_related("rubric_item").order_by("rubric_item__position")
    return ["h" if ref.value == 1 else "m" for ref in refs]


def test_calibrate_a_whole_attempt_with_the_keyboard_alone(live_server, page, calibrating, artifacts):
    project, expert = calibrating
    sign_in(page, live_server.url, expert.username)
    page.goto(f"{live_server.url}/projects/{project.pk}/calibration/")
    page.locator("#calibration-go").click()
    page.wait_for_url(TASK_URL)
    answered = 0
    while match := TASK_URL.search(page.url):
        attempt_id, position = int(match.group(1)), int(match.group(2))
        keys = _keys_for(attempt_id, position)
        if position == 2:
            # Halfway through a task (item 1 marked, a note on item 2), a reload keeps both.
            page.keyboard.press(keys[0])
            page.keyboard.press("n")
            page.keyboard.type("参考语境判断")
            page.keyboard.press("Escape")
            expect(page.locator("#save-status")).to_have_attribute("data-state", "saved")
            page.reload()
            expect(page.locator("#item-1")).to_have_attribute("data-value", "1" if keys[0] == "h" else "0")
            expect(page.locator("#c-item-2-note")).to_have_value("参考语境判断")
            expect(page.locator("#progress-done")).to_have_text("1")
            expect(page.locator("#item-2")).to_have_class(re.compile(r"\bis-current\b"))
            shoot(page, artifacts / "controls-calibration-task.png")
            keys = keys[1:]
        for key in keys:
            page.keyboard.press(key)
        expect(page.locator("#annotate-form")).to_have_class(re.compile(r"\bis-ready\b"))
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url, p=position, a=attempt_id: f"/calibration/{a}/tasks/{p}/" not in url)
        answered += 1

    page.wait_for_url(RESULT_URL)
    expect(page.locator("#result-title")).to_have_attribute("data-passed", "true")
    attempt = CalibrationAttempt.objects.get(expert=expert)
    assert answered == attempt.tasks.count() and attempt.status == "passed"
    assert CalibrationDraft.objects.get(attempt=attempt, task=attempt.tasks.get(position=2).task).notes
