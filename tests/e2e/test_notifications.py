"""In Chromium: the top bar's unread count changes without a reload, on a phone and on a desktop,
and the email choices on the profile are saved; screenshots for review."""
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from experts.models import NotificationPreference
from experts.notifications import notification_send
from tests.e2e.conftest import sign_in
from tests.factories import ExpertFactory, PMFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
SHOTS = Path("/work/shots/notify")
STATEMENT = {"project": "共情评测", "period": "2025-03-03 – 2025-03-09", "payable": "16.00", "currency": "CNY",
             "count": 3}


@pytest.fixture
def expert(db, settings):
    settings.RUBRICA_NOTIFICATION_POLL_S = 1  # a browser test cannot wait 45 s for the poller
    SHOTS.mkdir(parents=True, exist_ok=True)
    return ExpertFactory(username="lin.xiao", first_name="林晓", email="lin.xiao@example.org")


def _statement(expert, n=1):
    for _ in range(n):
        notification_send(users=[expert], kind="statement_issued", params=STATEMENT, now=timezone.now(),
                          link="/payments/")


def test_on_a_phone_the_menu_badge_counts_new_notifications_and_a_read_one_without_a_reload(
        live_server, page, expert):
    page.set_viewport_size(PHONE)
    sign_in(page, live_server.url, expert.username)
    badge = page.locator(".topbar-menu-button .badge-count")
    expect(badge).to_have_count(0)
    page.evaluate("window.stayed = true")  # gone if the page reloads

    _statement(expert, 2)

    expect(badge).to_have_text("2", timeout=8000)
    assert page.evaluate("window.stayed === true")
    page.screenshot(path=SHOTS / "badge-390.png")
    page.locator(".topbar-menu > summary").click()
    expect(page.locator(".menu-nav .notification-link .badge-count")).to_have_text("2")
    page.screenshot(path=SHOTS / "badge-390-menu.png")

    page.locator(".menu-nav .notification-link").click()
    page.wait_for_url(f"{live_server.url}/notifications/")
    page.evaluate("window.stayed = true")
    page.get_by_role("button", name="标为已读", exact=True).first.click()

    expect(page.locator(".topbar-menu-button .badge-count")).to_have_text("1")
    expect(page.locator(".notification.is-unread")).to_have_count(1)
    assert page.evaluate("window.stayed === true")
    page.screenshot(path=SHOTS / "notifications-390.png", full_page=True)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"]


def test_on_a_desktop_the_top_bar_badge_appears_and_the_profile_saves_email_choices(live_server, page, expert):
    page.set_viewport_size(DESKTOP)
    sign_in(page, live_server.url, expert.username)
    page.evaluate("window.stayed = true")

    _statement(expert)

    badge = page.locator(".topbar-full .notification-link .badge-count")
    expect(badge).to_have_text("1", timeout=8000)
    assert page.evaluate("window.stayed === true")
    page.screenshot(path=SHOTS / "badge-1440.png")

    page.goto(f"{live_server.url}/me/profile/")
    page.get_by_label("对账单已出具").check()
    page.get_by_label("提交被驳回").check()
    page.get_by_role("button", name="保存邮件设置").click()
    expect(page.get_by_text("邮件设置已保存。")).to_be_visible()
    expect(page.get_by_label("对账单已出具")).to_be_checked()
    expect(page.get_by_label("有人@了我")).not_to_be_checked()
    on = set(NotificationPreference.objects.filter(user=expert, email=True).values_list("kind", flat=True))
    assert on == {"statement_issued", "submission_rejected"}
    page.evaluate("window.scrollTo(0, 0)")  # a full-page shot keeps the sticky top bar where it was
    page.screenshot(path=SHOTS / "profile-email-1440.png", full_page=True)

    page.set_viewport_size(PHONE)
    page.reload()
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=SHOTS / "profile-email-390.png", full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_a_project_manager_chooses_email_on_the_notifications_page(live_server, page, expert):
    pm = PMFactory(username="zhou.pm", first_name="周", email="zhou@example.org")
    notification_send(users=[pm], kind="expert_paused", now=timezone.now(), link="/",
                      params={"project": "共情评测", "expert": "E-1A2B", "accuracy": 61, "window": 20,
                              "threshold": 70})
    page.set_viewport_size(DESKTOP)
    sign_in(page, live_server.url, pm.username)
    page.goto(f"{live_server.url}/notifications/")

    page.get_by_label("有专家被暂停").check()
    page.get_by_role("button", name="保存邮件设置").click()

    expect(page.get_by_text("邮件设置已保存。")).to_be_visible()
    expect(page.get_by_label("有专家被暂停")).to_be_checked()
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=SHOTS / "notifications-pm-1440.png", full_page=True)
