"""The project tabs in a browser: one row of groups at 1440 px, a sideways-scrolling row on a phone,
reachable with the keyboard; screenshots of the project page and the board at both widths."""
import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import sign_in
from tests.factories import PMFactory, make_project_with_tasks

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_project_tabs_fit_one_row_and_scroll_on_a_phone(page, live_server, artifacts):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=8, items_per_question=2, models=2, pm=pm)
    sign_in(page, live_server.url, pm.username)

    page.goto(f"{live_server.url}/projects/{project.pk}/")
    tabs = page.locator("nav.project-tabs a")
    expect(tabs).to_have_count(7)
    tops = {round(box["y"]) for box in (tabs.nth(i).bounding_box() for i in range(7))}
    assert len(tops) == 1  # one row at 1440 px
    page.screenshot(path=str(artifacts / "nav-project-1440.png"))

    # The keyboard reaches the groups in order, and a group opens on its first page with its pages below.
    tabs.first.focus()
    for _ in range(3):
        page.keyboard.press("Tab")
    expect(page.locator("nav.project-tabs a", has_text="人员")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_be_visible()
    expect(page.locator("nav.project-tabs a[aria-current='true']")).to_have_text("人员")
    expect(page.locator("nav.subnav-pages a[aria-current='page']")).to_have_text("工作量")
    page.locator("nav.subnav-pages a", has_text="成员").click()
    expect(page.locator("nav.subnav-pages a[aria-current='page']")).to_have_text("成员")

    page.goto(f"{live_server.url}/projects/{project.pk}/board/")
    expect(page.locator("nav.project-tabs a[aria-current='page']")).to_have_text("任务看板")
    page.screenshot(path=str(artifacts / "nav-board-1440.png"))

    page.set_viewport_size({"width": 390, "height": 844})
    for name, url in (("project", f"/projects/{project.pk}/"), ("board", f"/projects/{project.pk}/board/"),
                      ("members", f"/projects/{project.pk}/members/")):
        page.goto(live_server.url + url)
        # The page itself never scrolls sideways; the tab row does, and its last tab can be scrolled to.
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        last = page.locator("nav.project-tabs a").last
        last.scroll_into_view_if_needed()
        box = last.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 391
        page.locator("nav.project-tabs").evaluate("n => n.scrollLeft = 0")
        page.screenshot(path=str(artifacts / f"nav-{name}-390.png"))
