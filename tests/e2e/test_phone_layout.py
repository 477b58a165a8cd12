"""Every page each role reaches works at 390 px (a menu instead of the top bar, nothing scrolls
sideways) and at 1440 px (the full top bar); /api/docs/ renders offline under the strict CSP."""
import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from annotation.services import project_add_member
from tests.e2e.conftest import sign_in
from tests.e2e.scenario import build_counselling_project
from tests.factories import AdminFactory, ExpertFactory, PMFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


@pytest.fixture
def team(db):
    pm, expert, admin = PMFactory(username="zhou.pm"), ExpertFactory(username="lin.xiao"), AdminFactory()
    project = build_counselling_project(pm=pm)
    project_add_member(project=project, user=pm)
    project_add_member(project=project, user=expert)
    return project, pm, expert, admin


def pages_for(role: str, project_id: int) -> list[str]:
    p = f"/projects/{project_id}"
    return {
        "expert": ["/", "/payments/", "/me/portrait/", "/notifications/", f"{p}/calibration/"],
        "pm": ["/", f"{p}/", f"{p}/rubric/", f"{p}/quality/", f"{p}/experts/", f"{p}/dashboard/", f"{p}/board/",
               f"{p}/quality/items/", f"{p}/judge-runs/", "/payments/costs/", f"/payments/costs/{project_id}/",
               "/notifications/"],
        "admin": ["/", "/payments/costs/", f"/payments/costs/{project_id}/", f"{p}/"],
    }[role]


def assert_fits_the_phone(page, path: str) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{path} is {width} px wide"


def assert_menu_opens_with_reachable_links(page, path: str) -> None:
    expect(page.locator(".topbar-full").first).to_be_hidden()
    summary = page.locator(".topbar-menu > summary")
    expect(summary).to_be_visible()
    summary.click()
    links = page.locator(".menu-nav a")
    assert links.count() >= 3, path
    for i in range(links.count()):
        link = links.nth(i)
        expect(link).to_be_visible()
        box = link.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (path, link.inner_text())
        assert box["y"] + box["height"] <= PHONE["height"], (path, link.inner_text())
    expect(page.locator(".menu-account button[type=submit]").last).to_be_visible()
    summary.click()
    expect(links.first).to_be_hidden()


def visit_every_page(page, base_url: str, role: str, username: str, project_id: int, shots) -> None:
    page.set_viewport_size(PHONE)
    sign_in(page, base_url, username)
    for path in pages_for(role, project_id):
        page.goto(base_url + path)
        page.wait_for_load_state("networkidle")
        assert_fits_the_phone(page, path)
        page.screenshot(path=shots / f"phone-{role}{path.replace('/', '_')}.png", caret="initial")
        assert_menu_opens_with_reachable_links(page, path)


def test_the_expert_reaches_every_page_and_the_annotation_page_at_390_px(live_server, page, team, artifacts):
    project, _, expert, _ = team

    visit_every_page(page, live_server.url, "expert", expert.username, project.pk, artifacts)
    page.goto(live_server.url + "/")
    page.get_by_role("button", name="下一个任务").click()
    page.wait_for_url(re.compile(r"/assignments/\d+/$"))
    page.wait_for_load_state("networkidle")

    assert_fits_the_phone(page, "annotate")
    page.screenshot(path=artifacts / "phone-expert-annotate.png", caret="initial")
    assert_menu_opens_with_reachable_links(page, "annotate")


def test_the_pm_reaches_every_page_at_390_px_and_a_menu_link_navigates(live_server, page, team, artifacts):
    project, pm, _, _ = team

    visit_every_page(page, live_server.url, "pm", pm.username, project.pk, artifacts)
    page.locator(".topbar-menu > summary").click()
    page.locator(".menu-nav a", has_text="成本").click()

    page.wait_for_url(f"{live_server.url}/payments/costs/")


def test_the_admin_reaches_every_page_at_390_px(live_server, page, team, artifacts):
    project, _, _, admin = team

    visit_every_page(page, live_server.url, "admin", admin.username, project.pk, artifacts)


def test_at_1440_px_the_full_top_bar_shows_and_the_menu_does_not(live_server, page, team):
    project, pm, _, _ = team
    page.set_viewport_size(DESKTOP)
    sign_in(page, live_server.url, pm.username)

    page.goto(f"{live_server.url}/projects/{project.pk}/")

    expect(page.locator("nav.topbar-full a", has_text="项目")).to_be_visible()
    expect(page.locator("nav.topbar-full a", has_text="成本")).to_be_visible()
    expect(page.locator(".topbar-end.topbar-full button", has_text="退出登录")).to_be_visible()
    expect(page.locator(".topbar-menu > summary")).to_be_hidden()


def test_the_api_docs_render_offline_under_the_csp(live_server, page, team, artifacts):
    _, pm, _, _ = team
    hosts: list[str] = []
    page.on("request", lambda request: hosts.append(urlsplit(request.url).hostname or ""))
    sign_in(page, live_server.url, pm.username)

    page.goto(f"{live_server.url}/api/docs/")
    expect(page.locator(".opblock").first).to_be_visible(timeout=15000)
    page.wait_for_load_state("networkidle")

    assert page.locator(".opblock").count() > 20
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/projects/{project_id}/export/").first) \
        .to_be_visible()
    page.screenshot(path=artifacts / "api-docs.png", caret="initial")
    assert set(hosts) <= LOCAL_HOSTS, set(hosts)
