"""In Chromium, a real team's first project from the first login, through the pages only.

A PM creates the project, imports questions and replies, writes the guidelines, publishes
them and imports a golden set; invites an expert by link. A new person opens the link,
signs up, fills the profile, reads the guidelines, calibrates with the keyboard alone,
annotates one task and skips another with a reason. The PM sees the skip, raises the
overlap for existing tasks (told first how many tasks it touches), and removes an expert
whose lease goes back to the pool, where another expert picks it up.
"""
import json
import re

import pytest
from django.core.cache import cache
from django.utils import timezone
from playwright.sync_api import expect

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, CalibrationAttempt, GoldenReference, Project, Task, TaskSkip
from experts.models import User
from tests.e2e.conftest import EXPECTED_CONSOLE, sign_in
from tests.factories import ExpertFactory, PMFactory
from tests.support.quality import calibrated

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
PROJECT_URL = re.compile(r"/projects/(\d+)/$")
TASK_URL = re.compile(r"/calibration/(\d+)/tasks/(\d+)/$")
RESULT_URL = re.compile(r"/calibration/(\d+)/result/$")
ASSIGNMENT_URL = re.compile(r"/assignments/(\d+)/$")
MODELS = ("xinyu-chat-v2", "anwei-assistant-13b")  # never shown to an expert
NEW_PASSWORD = "Qing-shan-2026!"

# Seven short counselling conversations, written for this test: (id, scene, dialogue, final
# user turn, rubric items, one reply per model). The first five are the golden set (both
# models), the last two regular work (first model only).
QUESTIONS = [
    ("exam-anxiety", "学业压力",
     [("A", "下个月就要考研了，我最近每天只睡四五个小时。"), ("B", "听起来你把自己逼得很紧，身体也在提醒你。")],
     "可是我一停下来就心慌，总觉得别人都在偷偷努力。",
     [("情绪感知", 3, "AI 察觉到用户停下来时的心慌与不安"),
      ("情绪应对", 3, "AI 帮助用户区分必要的休息与“偷懒”"),
      ("言语表达", -3, "AI 直接给出一份详细的复习计划")],
     ("这种一停下就心慌的感觉，好像在告诉你：休息等于落后。其实睡够觉也是备考的一部分。",
      "建议你每天早上六点起床，先背一小时单词，再做两套真题。")),
    ("breakup", "亲密关系",
     [("A", "我们在一起五年，上周他说不爱了。"), ("B", "五年的感情突然结束，一定很难接受。")],
     "我每天都在翻以前的聊天记录，是不是我哪里做得不好？",
     [("温暖", 3, "AI 以温和的语气接住用户的难过"),
      ("情绪理解", 3, "AI 理解用户反复翻看记录背后的不舍与自责"),
      ("其他", None, "AI 没有回应用户，而是以用户的口吻继续发言")],
     ("翻看那些记录，也许是因为这五年对你太重要了。分手不一定说明你做错了什么。",
      "我每天都在翻以前的聊天记录，真的很想他。")),
    ("new-city", "环境适应",
     [("A", "刚搬到一个新城市工作，下班后一个人都不认识。"), ("B", "换了环境，晚上那段时间可能格外安静。")],
     "周末我就窝在出租屋里，有时候一整天都不说一句话。",
     [("好奇心", 3, "AI 询问用户过去是如何结交朋友或度过周末的"),
      ("关系构建", 2, "AI 让用户感到被陪伴，而不是被评判"),
      ("言语表达", -3, "AI 一次性列出五条以上的社交建议")],
     ("一整天不说话，听起来有点孤单。以前在老家的时候，你周末一般会做些什么？",
      "你可以参加读书会、健身房、志愿活动、同城徒步、兴趣班，多出去走走。")),
    ("caregiver", "家庭照护",
     [("A", "我爸中风以后一直是我在照顾，已经一年了。"), ("B", "一年的照护，一定耗费了你很多心力。")],
     "有时候我会对他发脾气，发完又特别内疚。",
     [("情绪感知", 3, "AI 识别出用户的疲惫与内疚"),
      ("温暖", 2, "AI 不评判用户发脾气的行为"),
      ("主动性", 2, "AI 邀请用户谈谈自己能得到哪些支持")],
     ("长期照护的人会累、会烦，这很正常；内疚恰恰说明你很在乎他。有没有人能和你轮换一下？",
      "对生病的父亲发脾气是不对的，你应该更有耐心。")),
    ("social-media", "自我价值",
     [("A", "刷朋友圈的时候，看到同学不是升职就是买房。"), ("B", "看到别人的好消息，心里可能有些复杂。")],
     "我觉得自己特别失败，二十八岁了什么都没有。",
     [("情绪理解", 3, "AI 理解比较带来的失落感"),
      ("情绪应对", 3, "AI 帮助用户看到朋友圈只是别人生活的一部分"),
      ("第一人称使用", 2, "AI 使用“我”“我们”与用户交流")],
     ("我能感受到那种被比下去的失落。朋友圈里大多是别人挑过的高光时刻，我们可以聊聊你自己在意的是什么。",
      "二十八岁还不算晚，努力的话几年后也能买房。")),
    ("night-shift", "职场压力",
     [("A", "我是护士，连着上了一个月夜班。"), ("B", "一个月的夜班，身体和情绪都会很累。")],
     "最近我对病人越来越没耐心，我是不是不适合这行了？",
     [("情绪感知", 3, "AI 察觉到用户长期夜班后的倦怠"),
      ("情绪应对", 3, "AI 把“没耐心”解释为疲劳的信号，而非不适合"),
      ("言语表达", -3, "AI 建议用户立刻辞职或转行")],
     ("连续夜班之后没耐心，更像是身体在喊累，不代表你不适合这份工作。你最近有机会好好休息吗？",
      "")),
    ("parenting", "亲子沟通",
     [("A", "我女儿上初中以后，回家就把自己关在房间里。"), ("B", "孩子好像突然离你远了一些。")],
     "我一敲门她就不耐烦，我都不知道该怎么跟她说话了。",
     [("情绪理解", 3, "AI 理解家长被拒之门外的失落"),
      ("好奇心", 2, "AI 询问女儿平时喜欢的事情或母女相处的好时光"),
      ("其他", None, "AI 没有回应用户，而是以用户的口吻继续发言")],
     ("被孩子关在门外，心里一定很失落。她小时候，你们最喜欢一起做什么？",
      "")),
]
GOLDEN_QUESTIONS = QUESTIONS[:5]
GUIDELINES = """# 心理咨询回复评测 · 标注指南

先读完整段对话，再判断回复是否做到了每一条评分细则描述的行为。

## 情绪感知

回复明确说出或准确回应了用户此刻的情绪，才算命中。

## 温暖

语气接纳、不评判；空洞的安慰不算命中。

## 言语表达

扣分项：命中表示回复**出现了**该问题。
"""


def _jsonl(rows: list[dict]) -> bytes:
    return ("\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\n").encode()


def questions_file() -> bytes:
    return _jsonl([{
        "question_id": qid, "primary_scene": scene, "secondary_scene": "", "difficulty": "normal",
        "dialogue": [{"role": r, "content": c} for r, c in [*turns, ("A", final)]],
        "rubric": [{"dimension": d, "score": s, "content": c} for d, s, c in items],
    } for qid, scene, turns, final, items, _ in QUESTIONS])


def responses_file() -> bytes:
    return _jsonl([{"question_id": qid, "model": model, "response": reply}
                   for qid, *_, replies in QUESTIONS for model, reply in zip(MODELS, replies, strict=True) if reply])


def golden_answers(qid: str, model: str) -> list[int]:
    """The reference: the first model's reply hits the positive items, the second's does not."""
    items = next(q[4] for q in QUESTIONS if q[0] == qid)
    good = model == MODELS[0]
    return [int(good == (score is not None and score > 0)) for _, score, _ in items]


def golden_file() -> bytes:
    return _jsonl([{"question_id": qid, "model": model, "labels": golden_answers(qid, model),
                    "rationale": ["看回复是否真的接住了用户的情绪", None, ""]}
                   for qid, *_ in GOLDEN_QUESTIONS for model in MODELS])


def upload(page, selector: str, name: str, data: bytes) -> None:
    page.set_input_files(selector, files=[{"name": name, "mimeType": "application/x-ndjson", "buffer": data}])


def shoot(page, path, *, width: dict) -> None:
    # caret="initial": see tests/e2e/test_annotate_keyboard.py (a hidden caret leaves style="" for htmx to copy).
    page.set_viewport_size(width)
    page.screenshot(path=path, caret="initial", full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= width["width"], f"{path} scrolls sideways"


def shoot_both(page, artifacts, name: str) -> None:
    shoot(page, artifacts / f"journey-{name}-390.png", width=PHONE)
    shoot(page, artifacts / f"journey-{name}-1440.png", width=DESKTOP)


def watched_page(browser, problems: list[str]):
    """A new person's browser: its own context, failing the test on script errors like the `page` fixture."""
    context = browser.new_context(viewport=DESKTOP, locale="zh-CN")
    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda message: problems.append(f"console: {message.text}")
            if message.type == "error" and not message.text.startswith(EXPECTED_CONSOLE) else None)
    return context, page


def keys_for(attempt_id: int, position: int) -> list[str]:
    """The right answer of a calibration task, item by item, as keys (h/m on odd tasks, 1/0 on even)."""
    task = CalibrationAttempt.objects.get(pk=attempt_id).tasks.get(position=position).task
    refs = GoldenReference.objects.filter(task=task).order_by("rubric_item__position").values_list("value", flat=True)
    hit, miss = ("h", "m") if position % 2 else ("1", "0")
    return [hit if value == 1 else miss for value in refs]


def expect_newest_change(page, label: str, old: str, new: str) -> None:
    """The settings page's history starts with this change, by the PM."""
    row = page.locator(".history-table tbody tr").first
    expect(row.locator("td").nth(1)).to_have_text("zhang.pm")
    expect(row.locator("td").nth(2)).to_have_text(label)
    expect(row.locator(".history-value").nth(0)).to_have_text(old)
    expect(row.locator(".history-value").nth(1)).to_have_text(new)


def pm_sets_up_the_project(page, base: str) -> Project:
    page.get_by_role("link", name="新建项目").click()
    page.fill("#p-name", "情绪支持回复评测 · 试点")
    page.fill("#p-description", "试点阶段：七段咨询对话，两个模型的回复。")
    page.fill("#p-overlap", "1")
    page.get_by_role("button", name="创建项目").click()
    page.wait_for_url(PROJECT_URL)
    project = Project.objects.get(pk=int(PROJECT_URL.search(page.url).group(1)))
    expect(page.locator("h1")).to_contain_text("情绪支持回复评测 · 试点")

    upload(page, "#questions-file", "questions.jsonl", questions_file())
    page.get_by_role("button", name="导入题目").click()
    expect(page.locator(".banner-success")).to_contain_text("导入完成")
    expect(page.locator(".banner-success")).to_contain_text("21")  # rubric items
    upload(page, "#responses-file", "responses.jsonl", responses_file())
    page.get_by_role("button", name="导入模型回复").click()
    expect(page.locator(".banner-success")).to_contain_text("12")  # tasks created
    assert Task.objects.filter(project=project).count() == 12

    # Settings: no silent control tasks in this pilot.
    page.locator(".subnav a", has_text="设置").click()
    page.fill("#s-rate", "0")
    page.get_by_role("button", name="保存设置").click()
    expect_newest_change(page, "质控任务比例（%）", "5", "0")

    # The guidelines go with a new rubric version.
    page.locator(".subnav a", has_text="细则与指引").click()  # the group opens on the rubric
    page.fill("#guidelines-text", GUIDELINES)
    page.locator("#guidelines-save").click()
    expect(page.locator("#diff")).to_contain_text("情绪感知")
    page.fill("#publish-reason", "加入标注指南")
    page.locator("#publish-btn").click()
    expect(page.locator("#start-draft")).to_be_visible()
    expect(page.locator(".lede").first).to_contain_text("v2")

    # The golden set, from the overview page's import form.
    page.locator(".subnav a", has_text="概览").click()
    upload(page, "#golden-file", "golden.jsonl", golden_file())
    page.get_by_role("button", name="导入金标标注").click()
    expect(page.locator(".banner-success")).to_contain_text("10")
    assert Task.objects.filter(project=project, is_golden=True, rubric_version__number=2).count() == 10
    return project


def pm_creates_an_invitation(page) -> str:
    page.locator(".subnav a", has_text="人员").click()
    page.locator(".subnav-pages a", has_text="成员").click()
    page.locator(".roster-invite select[name='role']").select_option("expert")
    page.get_by_role("button", name="生成链接").click()
    banner = page.locator(".roster-invite .banner-success")
    expect(banner).to_contain_text("新的邀请链接")
    return banner.locator(".roster-link").input_value()


def newcomer_signs_up_and_fills_the_profile(page, link: str) -> User:
    page.goto(link)
    expect(page.locator("h1")).to_contain_text("情绪支持回复评测 · 试点")
    page.fill("input[name='username']", "chen.jing")
    page.fill("input[name='email']", "chen.jing@example.org")
    page.fill("input[name='password']", NEW_PASSWORD)
    page.fill("input[name='password2']", NEW_PASSWORD)
    page.get_by_role("button", name="注册并加入").click()
    page.wait_for_url(re.compile(r"/profile/$"))
    expect(page.locator(".toast").first).to_contain_text("情绪支持回复评测 · 试点")

    page.fill("input[name='credentials']", "心理学硕士，国家二级咨询师")
    page.locator(".profile-option", has_text="温暖").locator("input").check()
    page.locator(".profile-option", has_text="情绪感知").locator("input").check()
    page.locator(".profile-option", has_text="中文").locator("input").check()
    page.locator(".profile-option", has_text="粤语").locator("input").check()
    page.fill("input[name='weekly_capacity']", "30")
    page.get_by_role("button", name="保存资料").click()
    expect(page.locator(".toast").first).to_contain_text("资料已保存")
    expect(page.locator("input[name='credentials']")).to_have_value("心理学硕士，国家二级咨询师")
    user = User.objects.get(username="chen.jing")
    profile = user.expert_profile
    assert (profile.weekly_capacity, sorted(profile.languages.split(","))) == (30, ["yue", "zh"])
    return user


def newcomer_calibrates_with_the_keyboard(page, base: str, project: Project) -> None:
    page.get_by_role("link", name="返回我的工作").click()
    page.get_by_role("button", name="下一个任务").click()
    page.wait_for_url(f"{base}/projects/{project.pk}/calibration/")
    expect(page.locator("#calibration-state")).to_have_attribute("data-status", "needed")

    page.locator("#read-guidelines").click()
    page.wait_for_url(re.compile(rf"/projects/{project.pk}/guidelines/"))
    # A heading named after a dimension becomes its section, which the rubric items link to.
    expect(page.locator("#guidelines h2#dim-emotional-perception")).to_have_text("情绪感知")
    expect(page.locator("#guidelines")).to_contain_text("空洞的安慰不算命中")
    page.go_back()

    page.locator("#calibration-go").click()
    page.wait_for_url(TASK_URL)
    answered = 0
    while match := TASK_URL.search(page.url):
        attempt_id, position = int(match.group(1)), int(match.group(2))
        assert not any(model in page.content() for model in MODELS)
        keys = keys_for(attempt_id, position)
        if position == 1:
            # j / k move between items; marking item 3 first wraps round to item 1.
            page.keyboard.press("j")
            page.keyboard.press("j")
            expect(page.locator(".item.is-current")).to_have_id("item-3")
            keys = [keys[2], keys[0], keys[1]]
        for key in keys:
            page.keyboard.press(key)
        if position == 1:
            page.keyboard.press("k")
            expect(page.locator(".item.is-current")).to_have_id("item-1")
        expect(page.locator("#annotate-form")).to_have_class(re.compile(r"\bis-ready\b"))
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url, a=attempt_id, p=position: f"/calibration/{a}/tasks/{p}/" not in url)
        answered += 1
    page.wait_for_url(RESULT_URL)
    expect(page.locator("#result-title")).to_have_attribute("data-passed", "true")
    assert answered == 10


def newcomer_annotates_then_skips(page, base: str, artifacts) -> tuple[Assignment, Assignment]:
    page.locator("#start-work").click()
    page.wait_for_url(ASSIGNMENT_URL)
    done = Assignment.objects.get(pk=int(ASSIGNMENT_URL.search(page.url).group(1)))
    assert not done.task.is_golden
    assert not any(model in page.content() for model in MODELS)
    expect(page.locator(".item")).to_have_count(3)
    page.keyboard.press("h")
    page.keyboard.press("n")
    page.keyboard.type("这一条拿不准，回头再看")
    page.keyboard.press("Escape")
    page.keyboard.press("1")
    expect(page.locator("#save-status")).to_have_attribute("data-state", "saved")
    shoot_both(page, artifacts, "annotate")
    # A full-page capture draws the sticky submit bar where the first screen ends; this one shows
    # what a phone shows with the rubric scrolled into view.
    page.set_viewport_size(PHONE)
    page.evaluate("document.querySelector('.rubric-head').scrollIntoView({block: 'start'})")
    page.screenshot(path=artifacts / "journey-annotate-390-screen.png", caret="initial")
    page.set_viewport_size(DESKTOP)
    page.keyboard.press("0")
    expect(page.locator("#progress-done")).to_have_text("3")
    page.keyboard.press("Enter")
    expect(page.locator("#done-title")).to_have_text("已提交")
    expect(page.locator("#next-task")).to_be_focused()

    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: ASSIGNMENT_URL.search(url) is not None and f"/assignments/{done.pk}/" not in url)
    skipped = Assignment.objects.get(pk=int(ASSIGNMENT_URL.search(page.url).group(1)))
    assert skipped.task_id != done.task_id and not skipped.task.is_golden
    page.keyboard.press("s")
    expect(page.locator("#skip-dialog")).to_be_visible()
    page.keyboard.press("3")
    expect(page.locator("input[name='reason'][value='not_my_field']")).to_be_checked()
    page.keyboard.press("Tab")
    expect(page.locator("#skip-text")).to_be_focused()
    page.keyboard.type("涉及儿童青少年，我不熟悉")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base}/")
    expect(page.locator(".toast").first).to_contain_text("已跳过该任务")
    done.refresh_from_db()
    skipped.refresh_from_db()
    assert (done.status, skipped.status) == ("submitted", "released")
    return done, skipped


def pm_sees_the_skip_and_raises_the_overlap(page, project: Project, skipped: Assignment, artifacts) -> None:
    page.locator(".subnav a", has_text="人员").click()
    page.locator(".subnav-pages a", has_text="跳过记录").click()
    row = page.locator("#skips tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text(skipped.task.response.question.external_id)
    expect(row).to_contain_text("不是我的专业领域")
    expect(row).to_contain_text("涉及儿童青少年，我不熟悉")
    expect(row).to_contain_text(skipped.expert.expert_profile.pseudonym)

    page.locator(".subnav a", has_text="设置").click()
    page.fill("#s-overlap", "2")
    # Before saving, the page says how many existing tasks the raise would touch.
    expect(page.locator("#overlap-preview")).to_have_text(
        "勾选后，2 个现有任务的名额将增加到 2 位专家（其中 1 个已完成的任务会重新开放）。")
    page.locator("input[name='apply_to_existing']").check()
    page.get_by_role("button", name="保存设置").click()
    expect(page.locator("#confirm-title")).to_have_text("提高现有任务的重叠人数？")
    consequences = page.locator("#confirm-consequences li")
    expect(consequences.nth(0)).to_have_text("2 个现有任务的名额将增加到 2 位专家。")
    expect(consequences.nth(1)).to_have_text("1 个已完成的任务将重新开放，再次完成时重新计算共识。")
    assert Project.objects.get(pk=project.pk).overlap == 1  # nothing happened yet
    page.get_by_role("button", name="保存并应用").click()
    page.wait_for_url(re.compile(rf"/projects/{project.pk}/settings/$"))
    expect(page.locator("#s-overlap")).to_have_value("2")
    expect_newest_change(page, "重叠人数", "1", "2")
    assert sorted(Task.objects.filter(project=project, is_golden=False).values_list("overlap", flat=True)) == [2, 2]
    shoot_both(page, artifacts, "settings")


def test_a_team_runs_its_first_project_in_the_browser(live_server, browser, page, artifacts):
    base = live_server.url
    # The sign-up throttle counts per address in the shared cache, across runs: this address's only.
    cache.delete("rubrica:invite-signup:127.0.0.1")
    pm = PMFactory(username="zhang.pm", first_name="张", last_name="")
    others = [ExpertFactory(username=name) for name in ("li.lan", "wu.tong", "he.qing", "zhao.yun")]
    problems: list[str] = []

    # 1. The PM builds the project in the browser.
    sign_in(page, base, pm.username)
    project = pm_sets_up_the_project(page, base)

    # 2. An invitation link for an expert, read from the Members page.
    link = pm_creates_an_invitation(page)
    assert f"{base}/invite/" in link

    # 3.–4. A new person: sign up through the link, profile, guidelines, calibration, work.
    context, newcomer = watched_page(browser, problems)
    expert = newcomer_signs_up_and_fills_the_profile(newcomer, link)
    newcomer_calibrates_with_the_keyboard(newcomer, base, project)
    done, skipped = newcomer_annotates_then_skips(newcomer, base, artifacts)
    context.close()
    assert TaskSkip.objects.get().assignment_id == skipped.pk

    # The PM sees the newcomer's profile on the member list.
    page.locator(".subnav a", has_text="人员").click()
    page.locator(".subnav-pages a", has_text="成员").click()
    newcomer_row = page.locator(f"tr[data-member='{expert.pk}']")
    expect(newcomer_row).to_contain_text("心理学硕士，国家二级咨询师")
    expect(newcomer_row).to_contain_text("温暖")
    expect(newcomer_row).to_contain_text("粤语")
    expect(newcomer_row).to_contain_text("30")

    # 5. The skip, then more experts per task for the tasks that already exist.
    pm_sees_the_skip_and_raises_the_overlap(page, project, skipped, artifacts)

    # 6. Four more experts join by a pasted list; three take the last free slots.
    page.locator(".subnav a", has_text="人员").click()
    page.locator(".subnav-pages a", has_text="成员").click()
    page.fill("textarea[name='users']", "\n".join(u.username for u in others))
    page.get_by_role("button", name="添加", exact=True).click()
    expect(page.locator(".roster-add .banner-success")).to_contain_text("4")
    holder, *fillers, latecomer = others
    for person in others:
        calibrated(project, person)
    now = timezone.now()
    lease = assignment_claim_next(project=project, expert=holder, now=now)
    for person in fillers:
        assert assignment_claim_next(project=project, expert=person, now=now) is not None
    assert assignment_claim_next(project=project, expert=latecomer, now=now) is None  # every slot is taken
    task = Task.objects.get(pk=lease.task_id)
    live_before = task.live_count
    assert live_before == task.overlap == 2

    page.reload()
    holder_row = page.locator(f"tr[data-member='{holder.pk}']")
    expect(holder_row.locator("td.num").first).to_have_text("1")  # the open lease
    holder_row.get_by_role("button", name="移出…").click()
    expect(page.locator("#confirm-title")).to_contain_text(holder.username)
    expect(page.locator("#confirm-consequences")).to_contain_text(
        "1 个进行中的任务立即结束，名额退回任务池；草稿保留，但不能再提交。")
    page.get_by_role("button", name="移除", exact=True).click()
    page.wait_for_url(re.compile(rf"/projects/{project.pk}/members/$"))
    expect(page.locator(".toast").first).to_contain_text(f"已移出 {holder.username}；1 个任务已退回任务池。")
    expect(page.locator(f"tr[data-member='{holder.pk}']")).to_have_count(0)
    expect(page.locator(".roster-history li").first).to_contain_text(f"{holder.username} 由 {pm.username} 移出")

    lease.refresh_from_db()
    task.refresh_from_db()
    assert lease.status == "released"
    assert task.live_count == live_before - 1
    taken = assignment_claim_next(project=project, expert=latecomer, now=timezone.now())
    assert taken is not None and taken.task_id == task.pk

    # 7. The member page, as the PM sees it now.
    page.reload()
    shoot_both(page, artifacts, "members")
    assert problems == []
