"""The board's search (1, 2 and 3+ characters, any case) alone and under every filter.

The expected tasks are computed the plain way, a substring test over the dialogue's turns
and the final user turn; PostgreSQL (icontains) and SQLite (matched in Python) must agree
with it for every term and every filter.
"""
import itertools
import re

import pytest
from django.urls import reverse

from annotation.models import ItemConsensus, Question, Task
from annotation.selectors import rubric_items_for_task
from tests.annotation.test_board import _experts, _held, _verdict
from tests.factories import PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db

TEXTS = [  # (final user turn, dialogue turns, primary scene, difficulty)
    ("我和室友因为打扫卫生吵架了", ["最近工作压力大", "多久了？"], "室友冲突", "hard"),
    ("Work stress is HIGH", ["我不知道怎么办"], "职场", "normal"),
    ("谢谢", ["工作", "嗯"], "职场", "hard"),
    ("晚安", [], "", "normal"),
]
TERMS = ["我", "工作", "作压", "不知道", "打扫卫生", "stress", "STRESS", "sTrEsS", "h", "工作嗯", "%", "_",
         "无此之词", "100%"]


@pytest.fixture
def searched():
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=len(TEXTS), items_per_question=2, overlap=2, models=2, pm=pm)
    questions = list(Question.objects.filter(project=project).order_by("external_id"))
    for question, (final, turns, scene, difficulty) in zip(questions, TEXTS, strict=True):
        question.final_user_turn = final
        question.dialogue = [{"role": "AB"[i % 2], "content": t} for i, t in enumerate(turns)]
        question.primary_scene, question.difficulty = scene, difficulty
        question.save()
    tasks = list(Task.objects.filter(project=project).order_by("pk").select_related("response__question"))
    a, b = _experts(project, 2)
    # Some state, expert and zone to filter on: a complete task with a split verdict held by a, a golden one.
    _held(tasks[0], a)
    _held(tasks[0], b, slot=2)
    Task.objects.filter(pk=tasks[0].pk).update(status=Task.Status.COMPLETE, live_count=2, submitted_count=2)
    _verdict(tasks[0], 1, ItemConsensus.Zone.SPLIT, 1, total=3)
    _held(tasks[3], a, status="leased")
    Task.objects.filter(pk=tasks[3].pk).update(live_count=1)
    Task.objects.filter(pk=tasks[5].pk).update(is_golden=True)
    return project, pm, tasks, a


def _holds(task, term: str) -> bool:
    q = task.response.question
    return any(term.upper() in text.upper() for text in [q.final_user_turn, *(t["content"] for t in q.dialogue)])


def _ids(html: str) -> list[int]:
    return [int(x) for x in re.findall(r'<tr data-href="/projects/\d+/board/tasks/(\d+)/"', html)]


def _filters(tasks, expert, project):
    dimension = rubric_items_for_task(tasks[0])[0].dimension.code
    states = {tasks[0].pk: "complete", tasks[3].pk: "in_progress", tasks[5].pk: "golden"}
    return {  # name: (query params, which tasks they keep)
        "none": ({}, lambda t: True),
        "scene": ({"scene": "职场"}, lambda t: t.response.question.primary_scene == "职场"),
        "difficulty": ({"difficulty": "hard"}, lambda t: t.response.question.difficulty == "hard"),
        "model": ({"model": "model-1"}, lambda t: t.response.model_name == "model-1"),
        "version": ({"version": "1"}, lambda t: True),
        "dimension": ({"dimension": dimension}, lambda t: True),
        "expert": ({"expert": str(expert.pk)}, lambda t: t.pk in (tasks[0].pk, tasks[3].pk)),
        "zone": ({"zone": "split"}, lambda t: t.pk == tasks[0].pk),
        "state_open": ({"state": "open"}, lambda t: t.pk not in states),
        "state_complete": ({"state": "complete"}, lambda t: states.get(t.pk) == "complete"),
        "state_golden": ({"state": "golden"}, lambda t: states.get(t.pk) == "golden"),
        "scene_and_model": ({"scene": "职场", "model": "model-0"}, lambda t: (
            t.response.question.primary_scene == "职场" and t.response.model_name == "model-0")),
    }


def test_every_term_under_every_filter_lists_and_counts_what_a_substring_test_finds(client, searched):
    project, pm, tasks, expert = searched
    client.force_login(pm)
    url = reverse("board", args=[project.pk])
    checked = 0
    for term, (name, (params, keep)) in itertools.product(TERMS, _filters(tasks, expert, project).items()):
        html = client.get(url, {**params, "q": term}, HTTP_ACCEPT_LANGUAGE="en").content.decode()
        expected = [t.pk for t in tasks if keep(t) and _holds(t, term)]
        assert _ids(html) == expected, (term, name)
        assert f"{len(expected)} task" in html, (term, name)
        checked += 1
    assert checked == len(TERMS) * 12
    # The terms reach every kind of answer: many tasks, one question's two tasks, none.
    assert len([t for t in tasks if _holds(t, "我")]) == 4 and not any(_holds(t, "无此之词") for t in tasks)


def test_a_new_or_edited_question_is_found_at_once(client, searched):
    project, pm, tasks, _ = searched
    client.force_login(pm)
    url = reverse("board", args=[project.pk])
    question = tasks[6].response.question
    question.dialogue = [{"role": "A", "content": "新的一句：失眠"}]
    question.save()

    assert _ids(client.get(url, {"q": "失眠"}).content.decode()) == [tasks[6].pk, tasks[7].pk]
    assert _ids(client.get(url, {"q": "晚安"}).content.decode()) == [tasks[6].pk, tasks[7].pk]


def test_an_import_the_search_does_not_cover_yet_is_named_until_its_follow_up_has_run(
        client, django_capture_on_commit_callbacks):
    from annotation.exchange.questions import questions_import
    from annotation.exchange.responses import responses_import
    from annotation.services import project_create
    from tests.annotation.test_import_questions import NOW, heartbench_row, jsonl

    pm = PMFactory()
    project = project_create(name="imported", created_by=pm)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        questions_import(project=project, data=jsonl(heartbench_row("q1"), heartbench_row("q2")), now=NOW)
    responses_import(project=project, now=NOW, model="m", data=jsonl(
        {"question_id": "q1", "response": "嗯"}, {"question_id": "q2", "response": "好"}))
    client.force_login(pm)
    url = reverse("board", args=[project.pk])

    before = client.get(url, {"q": "睡不着"}, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    unfiltered = client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "The search does not cover 2 questions yet" in before and _ids(before) == []
    assert "The search does not cover" not in unfiltered and len(_ids(unfiltered)) == 2
    zh = client.get(url, {"q": "睡不着"}, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "搜索暂未覆盖 2 道题目" in zh

    for callback in callbacks:
        callback()  # the import's follow-up task
    after = client.get(url, {"q": "睡不着"}, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "The search does not cover" not in after and len(_ids(after)) == 2
