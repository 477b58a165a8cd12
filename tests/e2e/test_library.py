"""The case library and the FAQ in Chromium: a case beside its rubric item, Chinese search, asking a question.

Screenshots (zh-Hans, 1440 and 390 px wide) go to artifacts/ and, when it exists, /work/shots/library/.
"""
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotation.models import Case, FaqEntry
from annotation.services import project_add_member
from tests.e2e.conftest import sign_in
from tests.e2e.scenario import build_counselling_project
from tests.factories import ExpertFactory, PMFactory
from tests.support.library import CASES, FAQ, seed_cases, seed_faq

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ASSIGNMENT_URL = re.compile(r"/assignments/(\d+)/$")
SHOTS = Path("/work/shots/library")
WIDTHS = (1440, 390)


def shoot(page, artifacts: Path, name: str) -> None:
    for folder in (artifacts, SHOTS) if SHOTS.parent.exists() else (artifacts,):
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=folder / name, caret="initial", full_page=True)


@pytest.fixture
def library():
    pm = PMFactory()
    project = build_counselling_project(pm=pm, tasks=1)  # the work-stress task comes first
    expert = ExpertFactory(username="zhou.ning", first_name="周宁")
    project_add_member(project=project, user=expert)
    seed_cases(project, pm)
    seed_faq(project, ExpertFactory(), pm)
    return project, expert


def test_an_expert_reads_the_case_beside_the_item_without_losing_the_draft(live_server, page, library, artifacts):
    project, expert = library
    sign_in(page, live_server.url, expert.username)
    page.get_by_role("button", name="下一个任务").click()
    page.wait_for_url(ASSIGNMENT_URL)
    page.keyboard.press("h")  # a mark on item 1, saved as a draft
    expect(page.locator("#progress-done")).to_have_text("1")

    expect(page.locator("#ask-link")).to_have_attribute("target", "_blank")
    page.screenshot(path=artifacts / "library-annotate-top-1440.png", caret="initial")
    item = page.locator("#item-7")
    cases = item.locator("details.item-cases")
    expect(cases.locator("summary")).to_contain_text("案例（3）")
    cases.locator("summary").click()
    first = cases.locator(".item-case").first
    expect(first).to_contain_text(CASES["early_advice"]["title"])
    expect(first).to_contain_text("本评分项")
    item.scroll_into_view_if_needed()
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        item.scroll_into_view_if_needed()
        page.screenshot(path=artifacts / f"library-annotate-{width}.png", caret="initial")
        if SHOTS.parent.exists():
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SHOTS / f"annotate-case-{width}.png", caret="initial")
    page.set_viewport_size({"width": 1440, "height": 900})

    with page.context.expect_page() as opened:
        first.get_by_role("link").click()
    case_page = opened.value
    case_page.wait_for_load_state()
    expect(case_page.locator("h1")).to_have_text(CASES["early_advice"]["title"])
    case_page.close()

    # The annotation page kept its mark and its shortcuts.
    expect(page.locator("#progress-done")).to_have_text("1")
    page.locator("#item-2").click()
    page.keyboard.press("m")
    expect(page.locator("#progress-done")).to_have_text("2")
    assert Case.objects.get(title=CASES["early_advice"]["title"]).read_count == 1


def test_the_library_search_finds_chinese_phrases_best_first(live_server, page, library, artifacts):
    project, expert = library
    sign_in(page, live_server.url, expert.username)
    page.goto(f"{live_server.url}/projects/{project.pk}/cases/")

    page.fill("#library-q", "建议给得太早")
    rows = page.locator("#library-results .library-row-title a")
    expect(rows.first).to_have_text(CASES["early_advice"]["title"])
    expect(rows.nth(1)).to_have_text(CASES["early_advice_paraphrase"]["title"])
    assert "q=" in page.url  # the search is in the address, so it can be shared and reloaded

    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        shoot(page, artifacts, f"cases-search-{width}.png")


def test_an_expert_meets_the_existing_answer_before_posting_a_similar_question(live_server, page, library,
                                                                               artifacts):
    project, expert = library
    sign_in(page, live_server.url, expert.username)
    page.goto(f"{live_server.url}/projects/{project.pk}/faq/")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        shoot(page, artifacts, f"faq-{width}.png")
    page.set_viewport_size({"width": 1440, "height": 900})

    page.get_by_role("link", name="提问").first.click()
    page.fill("#faq-question", "用户没请求建议时给出建议，算建议给得太早吗")
    expect(page.locator("#faq-similar")).to_contain_text(FAQ["early_advice"][1])
    shoot(page, artifacts, "faq-ask-similar-1440.png")
    page.locator("#faq-post").click()
    expect(page.locator("#faq-confirm")).to_be_visible()
    assert FaqEntry.objects.filter(answered_at__isnull=True).count() == 0

    page.locator("#faq-post-anyway").click()
    expect(page.locator("#faq-entry")).to_contain_text("算建议给得太早吗")
    assert FaqEntry.objects.filter(answered_at__isnull=True, asked_by=expert).count() == 1


def test_a_pm_publishes_a_prefilled_case_and_it_shows_in_the_library(live_server, page, library, artifacts):
    project, _ = library
    sign_in(page, live_server.url, project.created_by.username)
    page.goto(f"{live_server.url}/projects/{project.pk}/cases/new/?title=第一人称的判断&item_keys=work-stress-01:6"
              "&problem=回复只用了“你”，没有“我”&reading=至少出现一次以 AI 自身身份说的“我”或“我们”才算命中")
    expect(page.locator("input[name=title]")).to_have_value("第一人称的判断")
    shoot(page, artifacts, "case-new-1440.png")

    page.locator("#case-save-publish").click()
    expect(page.locator("h1")).to_have_text("第一人称的判断")
    expect(page.locator(".library-case")).to_contain_text("work-stress-01:6")
    shoot(page, artifacts, "case-detail-1440.png")
    page.get_by_role("link", name="案例库").first.click()
    expect(page.locator("#library-results")).to_contain_text("第一人称的判断")
