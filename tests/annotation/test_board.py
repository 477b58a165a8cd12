"""The PM's board (tasks by state, filters, search, paging, shortcuts) and a task's history."""
import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from annotation.assignment.controls import assignment_skip
from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, Consultation, ItemConsensus, Question, Response, Task, TaskSkip
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from rubrics.models import RubricVersion
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def board_url(project) -> str:
    return reverse("board", args=[project.pk])


def task_ids(html: str) -> list[int]:
    return [int(x) for x in re.findall(r'<tr data-href="/projects/\d+/board/tasks/(\d+)/"', html)]


def _experts(project, n):
    experts = [ExpertFactory() for _ in range(n)]
    for e in experts:
        project_add_member(project=project, user=e)
    return experts


def _submit(expert, project, votes):
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    assert lease is not None
    labels = {i.item_key: votes[i.position] for i in rubric_items_for_task(lease.task)}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
    return lease


@pytest.fixture
def board_project():
    """Six regular-looking tasks of one model; the last is golden, the first is about a flatmate quarrel."""
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=6, items_per_question=2, overlap=2, models=1, pm=pm)
    tasks = list(Task.objects.filter(project=project).order_by("pk").select_related("response"))
    Task.objects.filter(pk=tasks[5].pk).update(is_golden=True)
    Question.objects.filter(pk=tasks[0].response.question_id).update(
        final_user_turn="我和室友因为打扫卫生吵架了", primary_scene="室友冲突")
    return project, pm, tasks, _experts(project, 3)


def _held(task, expert, *, status="submitted", slot=1):
    now = timezone.now()
    return Assignment.objects.create(task=task, expert=expert, slot=slot, status=status, leased_at=now,
                                     expires_at=now + timedelta(hours=1),
                                     submitted_at=now if status == "submitted" else None)


def _verdict(task, position, zone, hits, total=2):
    item = rubric_items_for_task(task)[position - 1]
    majority = None if zone == "tied" else int(2 * hits > total)
    provenance = {"tied": "", "unanimous": "unanimous"}.get(zone, "majority")
    ItemConsensus.objects.create(task=task, rubric_item=item, hit_votes=hits, total_votes=total, majority=majority,
                                 zone=zone, provenance=provenance, computed_at=timezone.now())


def _arrange_states(tasks, experts):
    """complete, tied, in progress, skipped, open, golden, in task order."""
    a, b, c = experts
    complete, tied, held, skipped = tasks[:4]
    for task in (complete, tied):
        _held(task, a)
        _held(task, b, slot=2)
        Task.objects.filter(pk=task.pk).update(status=Task.Status.COMPLETE, live_count=2, submitted_count=2)
    _verdict(complete, 1, "unanimous", 2)
    _verdict(complete, 2, "split", 1, total=3)
    _verdict(tied, 1, "tied", 1)
    _held(held, c, status="leased")
    Task.objects.filter(pk=held.pk).update(live_count=1)
    released = _held(skipped, c, status="released")
    TaskSkip.objects.create(assignment=released, project=skipped.project, task=skipped, expert=c,
                            reason="not_my_field", created_at=timezone.now())


def _states(html: str) -> dict[str, int]:
    return {k: int(n) for k, n in re.findall(r'data-state="(\w+)"[^>]*>[^<]*<span class="count">(\d+)</span>', html)}


def test_the_board_counts_tasks_by_state_and_lists_them(client, board_project):
    project, pm, tasks, experts = board_project
    _arrange_states(tasks, experts)
    client.force_login(pm)

    html = client.get(board_url(project), HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert _states(html) == {"open": 1, "in_progress": 1, "tied": 1, "complete": 1, "golden": 1, "skipped": 1}
    assert task_ids(html) == [t.pk for t in tasks]
    for state, task in zip(("complete", "tied", "in_progress", "skipped", "open", "golden"), tasks, strict=True):
        assert task_ids(client.get(board_url(project), {"state": state}).content.decode()) == [task.pk]


def test_a_task_awaiting_a_consultation_counts_as_tied(client, board_project):
    project, pm, tasks, experts = board_project
    _arrange_states(tasks, experts)
    item = rubric_items_for_task(tasks[0])[1]
    now = timezone.now()
    Consultation.objects.create(project=project, task=tasks[0], rubric_item=item, trigger="pm", opened_at=now,
                                deadline_at=now + timedelta(hours=72))
    client.force_login(pm)

    html = client.get(board_url(project), {"state": "tied"}).content.decode()

    assert task_ids(html) == [tasks[0].pk, tasks[1].pk]


def test_each_state_lists_the_tasks_it_counts_when_their_conditions_overlap(client, board_project):
    """The state filter is read from the task's columns and the lists (not the state's CASE): the
    first state that applies still wins, in the counts and in the list."""
    project, pm, tasks, experts = board_project
    _arrange_states(tasks, experts)
    _verdict(tasks[5], 1, "tied", 1)  # golden, and tied too
    Task.objects.filter(pk=tasks[3].pk).update(live_count=1)  # skipped once, and held again
    now = timezone.now()
    Consultation.objects.create(project=project, task=tasks[4], rubric_item=rubric_items_for_task(tasks[4])[0],
                                trigger="pm", opened_at=now, deadline_at=now + timedelta(hours=72))
    other = make_project_with_tasks(n_questions=1, items_per_question=2, overlap=2, models=1)
    _verdict(Task.objects.get(project=other), 1, "tied", 1)  # another project's tie changes nothing here
    client.force_login(pm)

    expected = {"open": [], "in_progress": [tasks[2]], "tied": [tasks[1], tasks[4]], "complete": [tasks[0]],
                "golden": [tasks[5]], "skipped": [tasks[3]]}
    counts = _states(client.get(board_url(project)).content.decode())
    assert counts == {state: len(listed) for state, listed in expected.items()}
    for state, listed in expected.items():
        assert task_ids(client.get(board_url(project), {"state": state}).content.decode()) == [t.pk for t in listed]


def test_filters_narrow_the_list_and_the_counts(client, board_project):
    project, pm, tasks, experts = board_project
    _arrange_states(tasks, experts)
    a, b, c = experts
    item = rubric_items_for_task(tasks[1])[0]
    client.force_login(pm)

    def listed(**params):
        return task_ids(client.get(board_url(project), params).content.decode())

    everything = [t.pk for t in tasks]
    assert listed(expert=a.pk) == [tasks[0].pk, tasks[1].pk]
    assert listed(expert=c.pk, state="skipped") == [tasks[3].pk]
    assert listed(zone="split") == [tasks[0].pk]
    assert listed(zone="tied") == [tasks[1].pk]
    assert listed(scene="室友冲突") == [tasks[0].pk]
    assert listed(model="model-0") == everything and listed(model="nobody") == []
    assert listed(version=1) == everything and listed(version=7) == []
    assert listed(dimension=item.dimension.code) == everything
    assert listed(dimension="no-such-dimension") == []
    assert listed(difficulty="hard") == []
    assert listed(expert="not-a-number") == [] and listed(state="nonsense") == []
    counts = _states(client.get(board_url(project), {"expert": a.pk}).content.decode())
    assert counts == {"open": 0, "in_progress": 0, "tied": 1, "complete": 1, "golden": 0, "skipped": 0}


def test_with_more_models_than_a_select_can_hold_the_model_filter_is_a_text_field(client, monkeypatch):
    from annotation.board import selectors

    pm = PMFactory()
    project = make_project_with_tasks(n_questions=2, items_per_question=2, overlap=2, models=3, pm=pm)
    client.force_login(pm)
    assert client.get(board_url(project)).content.decode().count('<option value="model-') == 3
    cache.delete(f"board-choices:{project.pk}")
    monkeypatch.setattr(selectors, "MODEL_CHOICES_MAX", 2)

    html = client.get(board_url(project), {"model": "model-2"}).content.decode()

    assert '<option value="model-' not in html
    assert re.search(r'<input type="text" id="f-model" name="model" value="model-2"', html)
    expected = list(Task.objects.filter(project=project, response__model_name="model-2").values_list("pk", flat=True))
    assert sorted(task_ids(html)) == sorted(expected) and expected


def test_search_matches_the_final_turn_and_the_dialogue(client, board_project):
    project, pm, tasks, _ = board_project
    question = Question.objects.get(pk=tasks[2].response.question_id)
    question.dialogue = [{"role": "A", "content": "我最近失眠很严重"}, {"role": "B", "content": "多久了？"}]
    question.save(update_fields=["dialogue"])
    client.force_login(pm)

    by_turn = client.get(board_url(project), {"q": "打扫卫生"}, **HTMX).content.decode()
    by_dialogue = client.get(board_url(project), {"q": "失眠很严重"}, **HTMX).content.decode()
    nothing = client.get(board_url(project), {"q": "完全无关的词语"}, **HTMX).content.decode()

    assert by_turn.lstrip().startswith('<section id="board-results"') and "<html" not in by_turn
    assert task_ids(by_turn) == [tasks[0].pk]
    assert task_ids(by_dialogue) == [tasks[2].pk]
    assert task_ids(nothing) == []


def test_the_board_pages_fifty_tasks_at_a_time(client):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=60, items_per_question=1, pm=pm)
    ids = list(Task.objects.filter(project=project).order_by("pk").values_list("pk", flat=True))
    client.force_login(pm)

    first = client.get(board_url(project)).content.decode()
    match = re.search(r'after=(\d+)" rel="next"', first)
    assert match
    second = client.get(board_url(project), {"after": match.group(1)}).content.decode()

    assert task_ids(first) == ids[:50]
    assert task_ids(second) == ids[50:]
    assert 'rel="next"' not in second
    assert task_ids(client.get(board_url(project), {"after": "junk"}).content.decode()) == ids[:50]


def test_the_board_runs_a_constant_number_of_queries(client, django_assert_max_num_queries):
    pm = PMFactory()
    small = make_project_with_tasks(n_questions=3, items_per_question=2, models=2, pm=pm)
    large = make_project_with_tasks(n_questions=40, items_per_question=2, models=2, pm=pm)
    _experts(small, 2)
    _experts(large, 2)
    # Neither project's filter choices cached (SQLite reuses the ids of rolled-back tests' projects).
    cache.delete_many([f"board-choices:{small.pk}", f"board-choices:{large.pk}"])
    client.force_login(pm)

    # SQLite reads the project's questions for the search (in Python): one query more. One is the
    # count of judge-only open tasks (annotation.blind_test).
    with django_assert_max_num_queries(15 if connection.vendor == "postgresql" else 16) as small_queries:
        client.get(board_url(small), {"q": "压力", "zone": "split"})
    with django_assert_max_num_queries(len(small_queries.captured_queries)):
        response = client.get(board_url(large), {"q": "压力", "zone": "split"})

    assert response.status_code == 200


def test_another_projects_pm_and_the_experts_get_404(client, board_project):
    project, pm, tasks, (a, *_) = board_project
    history = reverse("task_history", args=[project.pk, tasks[0].pk])
    other_pm = PMFactory()
    other = make_project_with_tasks(n_questions=1, pm=other_pm)
    other_task = Task.objects.get(project=other)

    for who in (other_pm, a):
        client.force_login(who)
        assert client.get(board_url(project)).status_code == 404
        assert client.get(history).status_code == 404
    client.force_login(pm)
    # The project's own PM, asking for another project's task under their project: 404 too.
    assert client.get(reverse("task_history", args=[project.pk, other_task.pk])).status_code == 404
    assert client.get(reverse("task_history", args=[other.pk, other_task.pk])).status_code == 404


def test_the_history_shows_who_held_the_task_their_labels_skips_and_the_consensus(client):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, items_per_question=2, overlap=2, pm=pm)
    a, b, c = _experts(project, 3)
    skipped = assignment_claim_next(project=project, expert=c, now=timezone.now())
    assignment_skip(expert=c, assignment_id=skipped.pk, reason="other", text="看不懂这段对话", now=timezone.now())
    lease = _submit(a, project, {1: 1, 2: 0})
    _submit(b, project, {1: 1, 2: 1})
    client.force_login(pm)

    html = client.get(reverse("task_history", args=[project.pk, lease.task_id]),
                      HTTP_ACCEPT_LANGUAGE="en").content.decode()

    for expert in (a, b, c):
        assert expert.expert_profile.pseudonym in html
    assert html.count("<td>Submitted</td>") == 2 and "<td>Given back</td>" in html
    assert "看不懂这段对话" in html
    # A 1–1 split of a panel of two is a tie: no majority, and an extra expert is drawn.
    assert "<td>Unanimous</td>" in html and "<td>Tied</td>" in html and "no majority" in html
    assert "(2/2)" in html and "(1/2)" in html  # votes per item
    assert re.search(r"<td>hit</td><td>hit</td>", html)  # the first item: both experts hit
    assert re.search(r"<td>miss</td><td>hit</td>", html)  # the second: the labels each expert gave


def test_the_board_tab_and_the_shortcut_script_are_on_the_page(client, board_project):
    project, pm, *_ = board_project
    client.force_login(pm)

    html = client.get(board_url(project), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()

    assert f'href="/projects/{project.pk}/board/" aria-current="page">任务看板</a>' in html
    assert "js/board.js" in html and 'id="board-help"' in html and "<kbd>j</kbd>" in html
    for tag in re.findall(r"<script[^>]*>", html):
        assert "src=" in tag


def test_superseded_tasks_stay_off_the_board(client, board_project):
    project, pm, tasks, _ = board_project
    Task.objects.filter(pk=tasks[4].pk).update(status=Task.Status.SUPERSEDED)
    client.force_login(pm)

    html = client.get(board_url(project)).content.decode()

    assert tasks[4].pk not in task_ids(html)
    assert RubricVersion.objects.filter(rubric=project.rubric).count() == 1
    assert Response.objects.filter(project=project).count() == 6
