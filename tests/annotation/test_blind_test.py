"""Blind-test samples: a stratified, seeded, reproducible draw; only the sample goes to experts; the report."""
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.agreement import stats
from annotation.agreement.services import agreement_report_compute
from annotation.assignment.services import assignment_claim_next
from annotation.blind_test.sampling import allocate, draw
from annotation.blind_test.services import blind_test_create, blind_test_report
from annotation.models import AuditEntry, BlindTest, BlindTestQuestion, Question, Task
from annotation.selectors import project_managers
from annotation.services import project_add_member
from core.errors import DomainError
from tests.annotation.test_agreement_report import JUDGE, PANEL, T0, build
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


# --- The draw (no database) -------------------------------------------------------------------

def population():
    """Ten questions in three strata: scene A normal (5), scene A hard (3), scene B normal (2)."""
    return ([(f"a{i}", "A", "normal") for i in range(5)] + [(f"h{i}", "A", "hard") for i in range(3)]
            + [(f"b{i}", "B", "normal") for i in range(2)])


def test_the_share_is_split_over_strata_by_largest_remainder():
    # 40% of 10 = 4; quotas 2.0, 1.2, 0.8: floors 2, 1, 0, and the one left goes to the largest remainder (B).
    sizes = {("A", "normal"): 5, ("A", "hard"): 3, ("B", "normal"): 2}

    assert allocate(sizes, 4) == {("A", "normal"): 2, ("A", "hard"): 1, ("B", "normal"): 1}


def test_the_same_seed_draws_the_same_sample_and_another_seed_another():
    first = draw(population(), share=0.4, seed=2026)
    again = draw(list(reversed(population())), share=0.4, seed=2026)  # the order questions arrive in is irrelevant
    others = {tuple(draw(population(), share=0.4, seed=s)) for s in range(20)}

    assert first == again
    assert len(first) == 4
    assert sum(q.startswith("a") for q in first) == 2 and sum(q.startswith("h") for q in first) == 1
    assert sum(q.startswith("b") for q in first) == 1
    assert len(others) > 1


def test_the_default_share_is_40_percent_rounded_half_up():
    assert len(draw([(f"q{i}", "", "normal") for i in range(5)], share=0.4, seed=1)) == 2
    assert len(draw([(f"q{i}", "", "normal") for i in range(1)], share=0.4, seed=1)) == 1  # never empty


# --- Creating a sample ------------------------------------------------------------------------

def project_of(n_questions=5):
    project = make_project_with_tasks(n_questions=n_questions, items_per_question=2, pm=PMFactory())
    scenes = ["A", "A", "A", "B", "B", "B", "A", "B", "A", "B"]
    for i, question in enumerate(Question.objects.filter(project=project).order_by("external_id")):
        Question.objects.filter(pk=question.pk).update(primary_scene=scenes[i % len(scenes)],
                                                       difficulty="hard" if i % 4 == 3 else "normal")
    return project


def sampled(test):
    return sorted(BlindTestQuestion.objects.filter(blind_test=test).values_list("question__external_id", flat=True))


def test_a_pm_draws_a_sample_that_is_recorded_audited_and_reproducible(client):
    project = project_of(10)
    pm = project_managers(project).first()
    client.force_login(pm)

    response = client.post(reverse("blind_test_create", args=[project.pk]),
                           {"share": "0.4", "seed": "77", "pass_bar_pct": "75"})

    assert response.status_code == 302
    test = BlindTest.objects.get(project=project)
    rows = list(Question.objects.filter(project=project).values_list("external_id", "primary_scene", "difficulty"))
    assert (test.seed, test.share, test.pass_bar_pct, test.questions_sampled, test.questions_total) == (
        77, 0.4, 75.0, 4, 10)
    assert sampled(test) == draw(rows, share=0.4, seed=77)
    assert sorted(Question.objects.filter(project=project, judge_only=False)
                  .values_list("external_id", flat=True)) == sampled(test)
    entry = AuditEntry.objects.get(action="blind_test.create")
    assert (entry.actor_id, entry.details["seed"], entry.details["questions_sampled"]) == (pm.pk, 77, 4)
    # Drawing again with the same seed gives the same questions; the new sample replaces the old.
    again = blind_test_create(project=project, share=0.4, seed=77, by=pm, now=timezone.now())
    assert sampled(again) == sampled(test) and again.number == 2
    assert list(BlindTest.objects.filter(project=project, is_active=True)) == [again]


def test_without_a_seed_a_random_one_is_drawn_and_recorded():
    project = project_of(5)

    test = blind_test_create(project=project, by=None, now=timezone.now())

    rows = list(Question.objects.filter(project=project).values_list("external_id", "primary_scene", "difficulty"))
    assert test.share == 0.4 and test.pass_bar_pct == 75.0
    assert sampled(test) == draw(rows, share=0.4, seed=test.seed)


@pytest.mark.parametrize("data,message", [
    ({"share": "0"}, "Enter a share more than 0 and at most 1"),
    ({"share": "1.5"}, "Enter a share more than 0 and at most 1"),
    ({"share": "-0.2"}, "Enter a share more than 0 and at most 1"),
    ({"share": "forty"}, "Enter a share more than 0 and at most 1"),
    ({"seed": "-1"}, "Enter a whole number from 0 to 9007199254740992"),
    ({"seed": "1.5"}, "Enter a whole number from 0 to 9007199254740992"),
    ({"seed": "9007199254740993"}, "Enter a whole number from 0 to 9007199254740992"),
    ({"pass_bar_pct": "101"}, "Enter a number from 0 to 100"),
    ({"pass_bar_pct": "-5"}, "Enter a number from 0 to 100"),
])
def test_bad_input_is_refused_with_a_message_and_writes_nothing(client, data, message):
    project = project_of(5)
    client.force_login(project_managers(project).first())
    form = {"share": "0.4", "seed": "3", "pass_bar_pct": "75", **data}

    response = client.post(reverse("blind_test_create", args=[project.pk]), form, HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 422
    assert message in response.content.decode()
    assert "Nothing was drawn" in response.content.decode()
    assert not BlindTest.objects.exists() and not BlindTestQuestion.objects.exists()
    assert not Question.objects.filter(judge_only=True).exists()
    assert not AuditEntry.objects.filter(action="blind_test.create").exists()


def test_a_project_without_questions_is_told_so():
    project = make_project_with_tasks(n_questions=0, pm=PMFactory())

    with pytest.raises(DomainError):
        blind_test_create(project=project, seed=1, by=None, now=timezone.now())
    assert not BlindTest.objects.exists()


# --- Only the sample goes to experts ----------------------------------------------------------

def test_experts_are_offered_only_the_sampled_questions_tasks():
    project = project_of(10)
    Question.objects.filter(project=project).update(difficulty="normal")  # every expert's tier takes them all
    test = blind_test_create(project=project, share=0.3, seed=5, by=None, now=timezone.now())
    experts = [ExpertFactory() for _ in range(3)]
    for expert in experts:
        project_add_member(project=project, user=expert)
    now = timezone.now()

    claimed = []
    for expert in experts:
        while (a := assignment_claim_next(project=project, expert=expert, now=now)) is not None:
            claimed.append(a.task.response.question.external_id)
            a.status = "released"
            a.save(update_fields=["status"])
            Task.objects.filter(pk=a.task_id).update(live_count=0, status="open")

    assert sorted(set(claimed)) == sampled(test)  # 3 of 10 questions; the other 7 stay judge-only
    assert len(claimed) == 3 * 3


def test_questions_imported_while_a_sample_is_active_stay_judge_only_and_the_pm_is_told(client):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from rest_framework.test import APIClient

    from annotation.exchange.questions import questions_import
    from tests.annotation.test_import_questions import heartbench_row, jsonl

    project = project_of(10)
    before = questions_import(project=project, data=jsonl(heartbench_row("before-the-test")), now=timezone.now())
    test = blind_test_create(project=project, share=0.4, seed=5, by=None, now=timezone.now())
    pm = project_managers(project).first()
    api = APIClient()
    api.force_authenticate(pm)

    late_file = SimpleUploadedFile("late.jsonl", jsonl(heartbench_row("late-1"), heartbench_row("late-2")))
    answer = api.post(reverse("api-questions-import", args=[project.pk]), {"file": late_file}, format="multipart")
    client.force_login(pm)
    page = client.post(reverse("project_import", args=[project.pk, "questions"]),
                       {"file": SimpleUploadedFile("later.jsonl", jsonl(heartbench_row("late-3")))},
                       HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert before.judge_only == 0 and answer.status_code == 201 and answer.json()["judge_only"] == 2
    assert "outside its sample and stays judge-only" in page
    late = Question.objects.filter(project=project, external_id__startswith="late-")
    assert late.count() == 3 and all(late.values_list("judge_only", flat=True))
    assert not BlindTestQuestion.objects.filter(blind_test=test, question__in=late).exists()
    # A new sample draws from every question, the late ones included.
    blind_test_create(project=project, share=1.0, seed=6, by=None, now=timezone.now())
    assert not Question.objects.filter(project=project, judge_only=True).exists()


def test_the_board_counts_the_judge_only_tasks_apart(client):
    project = project_of(10)
    blind_test_create(project=project, share=0.4, seed=5, by=None, now=timezone.now())
    client.force_login(project_managers(project).first())

    page = client.get(reverse("board", args=[project.pk]), HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert "6 open tasks are judge-only" in page


# --- The report -------------------------------------------------------------------------------

@pytest.fixture
def reported():
    project, experts, tasks, run = build(PANEL, JUDGE)
    # Seed 7 draws q0 and q2 of the four questions (one stratum): the sample the figures below rest on.
    test = blind_test_create(project=project, share=0.5, seed=7, by=None, now=T0)
    assert sampled(test) == ["q0", "q2"]
    agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
    return project, run, test


def test_the_report_gives_the_agreement_on_the_sample_with_a_dialogue_clustered_interval(reported):
    project, run, test = reported

    report = blind_test_report(test=test, run=run, english=True)

    # By hand, judge vs majority on the sample: q0 agrees on 2 + 2 of 6 units, q2 on 2 + 3 of 6: 9 of 12 = 75%.
    assert (report.overall.agree, report.overall.units, report.overall.agreement) == (9, 12, 0.75)
    assert report.overall.ci == stats.cluster_wilson_interval([4, 5], [6, 6])
    assert report.passed is True  # exactly at the 75% bar: met
    assert (report.questions_sampled, report.questions_scored, report.experts, report.per_item) == (2, 2, 3, 3)
    # Per position (one dimension each): 4/4, 3/4, 2/4; items below 75%: q0:2, q0:3 and q2:3 (1 of 2 each).
    assert [(d.agree, d.units) for d in report.by_dimension] == [(4, 4), (3, 4), (2, 4)]
    assert [d.agree for d in report.dimensions_below] == [2]
    assert sorted(s.rubric_item.item_key for s in report.items_below) == ["q0:2", "q0:3", "q2:3"]


def test_a_missed_bar_lists_the_dimensions_and_items_below_it(client, reported):
    project, run, test = reported
    BlindTest.objects.filter(pk=test.pk).update(pass_bar_pct=80)
    client.force_login(project_managers(project).first())

    page = client.get(reverse("blind_test", args=[project.pk]), HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert "Human–judge agreement 75.0% on 2 sampled questions, 3 experts, 3 per item." in page
    assert 'data-passed="no"' in page and "The bar is missed" in page
    assert page.count('<span class="badge badge-negative">below</span>') == 2  # 75% and 50% < 80%
    assert 'data-item="q0:2"' in page and 'data-item="q0:3"' in page and 'data-item="q2:3"' in page


def test_the_report_page_renders_in_a_fixed_number_of_queries(client, reported, django_assert_max_num_queries):
    project, *_ = reported
    client.force_login(project_managers(project).first())

    with django_assert_max_num_queries(24):
        response = client.get(reverse("blind_test", args=[project.pk]), HTTP_HX_REQUEST="true")

    assert response.status_code == 200 and "<html" not in response.content.decode()
    assert 'data-passed="yes"' in response.content.decode()
