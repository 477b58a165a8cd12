"""Issue 11's journey in Chromium: a split opens a consultation, the panel votes blind, the votes are
revealed, the experts discuss with an @mention, the PM resolves and writes the case up, and the case
shows beside the same rubric item on another expert's annotation page; the export says `adjudicated`.

Screenshots (zh-Hans, 1440 and 390 px wide) go to artifacts/ and, when it exists, /work/shots/journey/.
"""
import re
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.assignment.services import assignment_claim_next
from annotation.consultations.services import consultation_vote
from annotation.exchange.export import ExportFilters, consensus_rows
from annotation.models import Case, Consultation, ItemConsensus, Response
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from experts.models import Notification
from tests.e2e.conftest import sign_in
from tests.e2e.scenario import QUESTIONS, SECRET_MODEL, build_counselling_project, task_open
from tests.factories import ExpertFactory, PMFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SHOTS = Path("/work/shots/journey")
ASSIGNMENT_URL = re.compile(r"/assignments/(\d+)/$")
# Item 8 of the work-stress question scores -5 ("five or more questions at once"): a split on
# it opens a consultation by the project's default rule (|score| >= 5).
SPLIT_ITEM = 8


def shoot(page, artifacts: Path, name: str) -> None:
    for folder in (artifacts, SHOTS) if SHOTS.parent.exists() else (artifacts,):
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=folder / name, caret="initial", full_page=True)


def _submit(expert, project, split_value: int) -> None:
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    items = rubric_items_for_task(lease.task)
    labels = {i.item_key: (split_value if i.position == SPLIT_ITEM else int(i.position <= 5)) for i in items}
    notes = {items[SPLIT_ITEM - 1].item_key: "连着问了好几个问题" if split_value else "问题不算多，节奏可以"}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, notes=notes, now=timezone.now())


def test_a_split_goes_from_blind_votes_to_a_case_beside_the_item(live_server, browser, artifacts):
    pm = PMFactory(username="pm.lin")
    project = build_counselling_project(pm=pm, questions=1, tasks=1)
    panel = [ExpertFactory(username=name) for name in ("chen.yu", "li.na", "wang.fang")]
    newcomer = ExpertFactory(username="zhou.ning")
    for expert in (*panel, newcomer):
        project_add_member(project=project, user=expert)
    for expert, value in zip(panel, (1, 1, 0)):
        _submit(expert, project, value)

    consultation = Consultation.objects.get()
    assert consultation.rubric_item.position == SPLIT_ITEM and consultation.status == "open"
    url = f"{live_server.url}/consultations/{consultation.pk}/"
    first, second, third = panel
    pseudonym = second.expert_profile.pseudonym

    def new_page(width: int = 1440):
        context = browser.new_context(viewport={"width": width, "height": 900}, locale="zh-CN")
        return context, context.new_page()

    # The first expert votes blind: nobody's vote is visible yet.
    context, page = new_page()
    sign_in(page, live_server.url, first.username)
    page.goto(f"{live_server.url}/me/consultations/")
    page.locator(f'a[href="/consultations/{consultation.pk}/"]').first.click()
    expect(page.locator("#consultation-case")).to_contain_text("连着问了好几个问题")  # the panel's notes
    page.check('input[name="choice"][value="hit"]')
    page.fill("#vote-reason", "回复里一连问了五个问题，用户会有被审问的感觉。")
    page.get_by_role("button", name="投票").click()
    expect(page.locator("#consultation-case")).to_contain_text("回复里一连问了五个问题")  # their own vote
    expect(page.locator("#consultation-case")).not_to_contain_text("问题不算多，我觉得可以")
    context.close()
    # The other two vote (their own pages are tested elsewhere); the last vote reveals.
    consultation_vote(user=second, consultation=consultation, choice="hit", reason="五个问题，太密了。",
                      now=timezone.now())
    consultation_vote(user=third, consultation=consultation, choice="miss", reason="问题不算多，我觉得可以。",
                      now=timezone.now())

    # Revealed: the first expert reads every vote and answers the third with an @mention.
    context, page = new_page()
    sign_in(page, live_server.url, first.username)
    page.goto(url)
    votes = page.locator("#consultation-case")
    expect(votes).to_contain_text("问题不算多，我觉得可以。")
    page.fill("#post-text", f"@{pseudonym} 你也觉得五个问题太密了吗？我们按“一次超过五个”来读这一条。")
    page.get_by_role("button", name="发送").click()
    expect(page.locator("#consultation-case")).to_contain_text("我们按“一次超过五个”来读这一条")
    context.close()
    assert Notification.objects.filter(user=second, kind="mention").count() == 1

    # The mentioned expert sees the notification without anyone telling them.
    context, page = new_page(390)
    sign_in(page, live_server.url, second.username)
    page.goto(f"{live_server.url}/notifications/")
    expect(page.locator("main")).to_contain_text("提到了你")
    context.close()

    # The PM resolves, then writes the case up from the consultation and publishes it.
    for width in (1440, 390):
        context, page = new_page(width)
        sign_in(page, live_server.url, pm.username)
        page.goto(url)
        if width == 1440:
            page.check('input[name="outcome"][value="hit"]')
            page.select_option("#resolve-category", "guideline_gap")
            page.fill("#resolve-text", "一次提出五个及以上问题即算命中，不论问题是否相关。")
            page.get_by_role("button", name="裁定").click()
            expect(page.locator("#resolution")).to_contain_text("一次提出五个及以上问题即算命中")
            # The heading's status follows at once (the page reloads when the status moves on).
            expect(page.locator(".consult-status-resolved")).to_have_text("已裁定")
            expect(page.locator("[role=status]").first).to_contain_text("已裁定")
            page.evaluate("window.scrollTo(0, 0)")
        shoot(page, artifacts, f"journey-consultation-{width}.png")
        context.close()
    row = ItemConsensus.objects.get(task=consultation.task, rubric_item=consultation.rubric_item)
    assert (row.majority, row.provenance) == (1, "adjudicated")

    context, page = new_page()
    sign_in(page, live_server.url, pm.username)
    page.goto(url)
    page.locator("#consultation-case-link a").click()
    expect(page.locator("#case-source")).to_be_visible()
    expect(page.locator('textarea[name="reading"]')).to_have_value("一次提出五个及以上问题即算命中，不论问题是否相关。")
    page.fill('input[name="title"]', "一次问太多问题算不算“提问过多”")
    page.locator("#case-save-publish").click()
    page.wait_for_url(re.compile(r"/cases/\d+/$"))
    context.close()
    case = Case.objects.get()
    assert case.consultation_id == consultation.pk and case.is_published

    # Another expert, on another reply to the same question, sees the case beside the same item.
    task_open(Response.objects.create(project=project, question=consultation.task.response.question,
                                      model_name=f"{SECRET_MODEL}-b", text=QUESTIONS[0]["reply"]))
    for width in (1440, 390):
        context, page = new_page(width)
        sign_in(page, live_server.url, newcomer.username)
        if width == 1440:
            page.get_by_role("button", name="下一个任务").click()
            page.wait_for_url(ASSIGNMENT_URL)
            assignment_url = page.url
        else:
            page.goto(assignment_url)
        item = page.locator(f"#item-{SPLIT_ITEM}")
        cases = item.locator("details.item-cases")
        expect(cases.locator("summary")).to_contain_text("案例（1）")
        cases.locator("summary").click()
        expect(cases).to_contain_text("一次问太多问题算不算“提问过多”")
        item.scroll_into_view_if_needed()
        page.screenshot(path=artifacts / f"journey-case-beside-item-{width}.png", caret="initial")
        if SHOTS.parent.exists():
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SHOTS / f"journey-case-beside-item-{width}.png", caret="initial")
        context.close()

    # The export row of the item says how its label was reached.
    exported = [r for r in consensus_rows(project=project, filters=ExportFilters())
                if r["task_id"] == consultation.task_id and r["position"] == SPLIT_ITEM]
    assert [(r["provenance"], r["majority"]) for r in exported] == [("adjudicated", 1)]
