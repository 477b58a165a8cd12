"""The judge under the microscope: per-item agreement, zone-aware acceptability, run comparison, suggestions."""
import re
from datetime import timedelta

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from scipy import stats as scipy_stats

from annotation.agreement import stats
from annotation.agreement.services import agreement_report_compute
from annotation.judging.compare import comparison_summary, judge_runs_compare
from annotation.models import (
    AgreementItemStat,
    JudgeLabel,
    JudgeRun,
    JudgeTaskResult,
    Label,
    Question,
    RubricItemSuggestion,
)
from annotation.selectors import rubric_items_for_task
from core.errors import DomainError
from rubrics.models import RubricItem
from tests.annotation.test_agreement_report import JUDGE, MAJORITY, PANEL, T0, build, ordered_tasks, submit
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db

# Per complete task, which positions have a split panel (worked from PANEL by hand).
SPLIT = [[0, 0, 1], [0, 1, 0], [1, 0, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [1, 0, 0]]
# A judge that matches every unanimous verdict and contradicts every split one.
JUDGE_SPLIT_WRONG = [[m ^ s for m, s in zip(maj, sp)] for maj, sp in zip(MAJORITY, SPLIT)]


# --- The statistics (no database) -----------------------------------------------------------

@pytest.mark.parametrize(("b", "c", "expected"), [
    (1, 6, 2 * (1 + 7) / 2**7),           # P(X <= 1), X ~ Bin(7, 1/2), doubled: 0.125
    (0, 5, 2 / 2**5),                      # 0.0625
    (2, 10, 2 * (1 + 12 + 66) / 2**12),    # 158 / 4096
    (8, 6, 2 * (1 + 14 + 91 + 364 + 1001 + 2002 + 3003) / 2**14),  # 12952 / 16384
    (3, 3, 1.0),                           # symmetric: capped at 1
    (0, 0, 1.0),                           # no discordant pair, no evidence
])
def test_exact_mcnemar_matches_the_hand_computed_binomial_tail(b, c, expected):
    result = stats.mcnemar_exact(b, c)

    assert result.p_value == pytest.approx(expected, rel=1e-12)
    assert (result.b, result.c, result.discordant) == (b, c, b + c)


def test_exact_mcnemar_agrees_with_scipy_on_large_counts():
    result = stats.mcnemar_exact(4000, 4200)

    reference = scipy_stats.binomtest(4000, 8200, 0.5).pvalue
    assert result.p_value == pytest.approx(reference, rel=1e-9)
    assert 0.02 < result.p_value < 0.05


def test_negative_discordant_counts_are_refused():
    with pytest.raises(ValueError):
        stats.mcnemar_exact(-1, 3)


def test_a_judge_label_inside_the_experts_range_is_within_range():
    labels = np.array([[1, 1, 0], [1, 1, 1], [1, 3, -1], [1, 3, -1], [-1, -1, -1]])
    judge = np.array([0, 0, 2, 4, 1])

    within = stats.within_expert_range(judge, labels)

    # split 0/1: any label; unanimous hit: a miss is outside; graded 1..3: 2 inside, 4 outside; no label: no.
    assert within.tolist() == [True, False, True, False, False]


# --- The stored per-item rows -----------------------------------------------------------------

def add_run(project, tasks, name, values):
    run = JudgeRun.objects.create(project=project, rubric_version=tasks[0].rubric_version, name=name,
                                  source=JudgeRun.Source.IMPORTED, status=JudgeRun.Status.DONE)
    JudgeLabel.objects.bulk_create(JudgeLabel(run=run, task=task, rubric_item=item, value=v)
                                   for task, row in zip(tasks, values)
                                   for item, v in zip(rubric_items_for_task(task), row))
    return run


@pytest.fixture
def two_runs():
    project, experts, tasks, run = build(PANEL, JUDGE)
    other = add_run(project, tasks, "judge-b", JUDGE_SPLIT_WRONG)
    return project, experts, tasks, run, other


def stat(report, key):
    return AgreementItemStat.objects.get(report=report, rubric_item__item_key=key)


def test_each_rubric_item_gets_its_agreement_across_models_and_its_zone_mix(two_runs):
    project, _, _, run, _ = two_runs

    report = agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))

    # q0:2: unanimous miss on model-0 (judge said hit), split miss on model-1 (judge said miss).
    row = stat(report, "q0:2")
    assert (row.units, row.agree, row.acceptable, row.unanimous, row.split) == (2, 1, 1, 1, 1)
    assert row.strict == 0.5 and row.strict_low < 0.5 < row.strict_high
    assert (stat(report, "q0:1").agree, stat(report, "q0:1").units) == (2, 2)
    # Twelve items (4 questions x 3 positions) of which 3 x 3 rest on complete panels (q3 has one).
    assert AgreementItemStat.objects.filter(report=report).count() == 12
    assert sum(AgreementItemStat.objects.filter(report=report).values_list("agree", flat=True)) == 15


def test_zone_aware_counts_a_split_panel_as_acceptable_and_strict_does_not(two_runs):
    project, _, _, _, split_wrong = two_runs

    report = agreement_report_compute(project=project, judge_run=split_wrong, now=T0 + timedelta(days=1))

    judge = report.payload["judge"]
    assert judge["overall"]["agreement"] == round(13 / 21, 4)  # strict: the 8 split units are misses
    assert judge["zone_aware"]["overall"]["agreement"] == 1.0  # zone-aware: every split label is in range
    assert judge["zone_aware"]["overall"]["n"] == judge["overall"]["n"] == 21
    row = stat(report, "q0:3")  # split on model-0, unanimous on model-1
    assert (row.agree, row.acceptable, row.units) == (1, 2, 2)


def test_the_per_item_rows_cost_the_same_queries_for_two_or_six_questions():
    def compute_queries(n_questions):
        project = make_project_with_tasks(n_questions=n_questions, items_per_question=3, models=1, pm=PMFactory())
        experts = [ExpertFactory() for _ in range(3)]
        tasks = ordered_tasks(project)
        for t, task in enumerate(tasks):
            for e, expert in enumerate(experts):
                submit(task, expert, [1, 0, e % 2], T0 + timedelta(minutes=t * 5 + e))
        run = add_run(project, tasks, "judge", [[1, 1, 1]] * len(tasks))
        with CaptureQueriesContext(connection) as queries:
            report = agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
        assert AgreementItemStat.objects.filter(report=report).count() == 3 * n_questions
        return len(queries)

    assert compute_queries(2) == compute_queries(6)


# --- The pages --------------------------------------------------------------------------------

def test_the_items_page_lists_the_worst_item_first_with_both_measures_named(client, two_runs):
    project, _, _, _, split_wrong = two_runs
    agreement_report_compute(project=project, judge_run=split_wrong, now=T0 + timedelta(days=1))
    client.force_login(project.created_by)

    html = client.get(reverse("judge_items", args=[project.pk]), {"run": split_wrong.pk}).content.decode()

    assert "Strict agreement" in html or "严格一致率" in html
    body = html[html.index("<tbody>"):]
    shown = re.findall(r"<code>(q\d:\d)</code>", body)
    # Worst strict first: q1:3 is split on both models and the judge contradicts both (0 of 2), then
    # q3:1 (0 of 1: one complete panel); the items whose every panel is unanimous come last.
    assert shown[:2] == ["q1:3", "q3:1"]
    assert shown[-1] in {"q0:1", "q1:2", "q2:2", "q3:2", "q3:3"}
    assert len(shown) == 12


def test_the_items_page_filters_by_dimension_and_scene(client, two_runs):
    project, _, _, run, _ = two_runs
    Question.objects.filter(project=project, external_id="q1").update(primary_scene="grief")
    report = agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
    client.force_login(project.created_by)
    code = stat(report, "q0:1").dimension_code

    by_scene = client.get(reverse("judge_items", args=[project.pk]), {"run": run.pk, "scene": "grief"},
                          HTTP_HX_REQUEST="true").content.decode()
    by_dim = client.get(reverse("judge_items", args=[project.pk]), {"run": run.pk, "dimension": code}).content.decode()

    assert "q1:1" in by_scene and "q0:1" not in by_scene and "<html" not in by_scene
    assert "q0:1" in by_dim and "q0:2" not in by_dim


def test_the_items_page_query_count_does_not_grow_with_the_rows_shown(client, two_runs):
    project, _, _, run, _ = two_runs
    report = agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
    client.force_login(project.created_by)
    url = reverse("judge_items", args=[project.pk])
    code = stat(report, "q0:1").dimension_code
    client.get(url, {"run": run.pk})  # the session's first request

    with CaptureQueriesContext(connection) as one:
        client.get(url, {"run": run.pk, "dimension": code})
    with CaptureQueriesContext(connection) as all_rows:
        client.get(url, {"run": run.pk})

    assert len(one) == len(all_rows)


def test_the_item_page_shows_the_judges_reason_beside_the_experts_notes(client, two_runs):
    project, experts, tasks, run, _ = two_runs
    agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
    item = RubricItem.objects.get(version=tasks[0].rubric_version, item_key="q0:2")
    JudgeTaskResult.objects.create(run=run, task=tasks[0], status=JudgeTaskResult.Status.DONE,
                                   reason="回复提到了「陪伴」，判为命中")
    Label.objects.filter(task=tasks[0], rubric_item=item, assignment__expert=experts[0]).update(
        note="没有真正做到陪伴")
    client.force_login(project.created_by)

    html = client.get(reverse("judge_item", args=[project.pk, item.pk]), {"run": run.pk}).content.decode()

    assert "回复提到了「陪伴」，判为命中" in html and "没有真正做到陪伴" in html
    assert "model-0" in html and "model-1" in html
    # One "open a consultation" form per model's unit, on this item.
    open_url = reverse("consultation_open_pm", args=[project.pk])
    assert html.count(f'action="{open_url}"') == 2
    assert html.count(f'name="item" value="{item.pk}"') == 2
    assert experts[0].expert_profile.pseudonym in html


def test_sending_an_item_to_the_rubric_draft_files_a_suggestion_the_draft_shows(client, two_runs):
    project, _, tasks, run, _ = two_runs
    agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
    item = RubricItem.objects.get(version=tasks[0].rubric_version, item_key="q0:2")
    client.force_login(project.created_by)
    url = reverse("judge_item", args=[project.pk, item.pk])

    sent = client.post(f"{url}?run={run.pk}", {"text": "回复须明确表达愿意陪伴", "run": run.pk})

    assert sent.status_code == 302
    suggestion = RubricItemSuggestion.objects.get(project=project)
    assert (suggestion.item_key, suggestion.judge_run_id, suggestion.consultation_id) == ("q0:2", run.pk, None)
    assert suggestion.figures["strict"] == "50.0%"
    draft = client.get(reverse("rubric_draft", args=[project.pk])).content.decode()
    assert "回复须明确表达愿意陪伴" in draft and url in draft


def test_an_empty_suggestion_writes_nothing_and_says_what_is_missing(client, two_runs):
    project, _, tasks, run, _ = two_runs
    item = RubricItem.objects.get(version=tasks[0].rubric_version, item_key="q0:2")
    client.force_login(project.created_by)

    response = client.post(reverse("judge_item", args=[project.pk, item.pk]), {"text": "", "run": run.pk},
                           HTTP_HX_REQUEST="true", HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 422
    assert "suggested wording" in response.content.decode()
    assert not RubricItemSuggestion.objects.exists()


def test_only_the_projects_pm_reaches_the_items_pages(client, two_runs):
    project, experts, tasks, run, _ = two_runs
    item = RubricItem.objects.get(version=tasks[0].rubric_version, item_key="q0:2")
    client.force_login(PMFactory())

    assert client.get(reverse("judge_items", args=[project.pk])).status_code == 404
    assert client.get(reverse("judge_item", args=[project.pk, item.pk]), {"run": run.pk}).status_code == 404
    assert client.get(reverse("judge_runs_compare", args=[project.pk])).status_code == 404


# --- Comparing two runs -------------------------------------------------------------------------

def test_two_runs_compare_with_the_exact_mcnemar_test_on_their_discordant_units(two_runs):
    _, _, _, run, split_wrong = two_runs

    comparison = judge_runs_compare(a=run, b=split_wrong)

    summary = comparison_summary(comparison)
    # A is wrong on 6 unanimous units, B on 8 split ones: no unit is wrong for both.
    assert summary["paired_units"] == 21
    assert summary["strict"] == [15 / 21, 13 / 21]
    assert summary["zone_aware"] == [15 / 21, 1.0]
    assert (summary["b"], summary["c"]) == (8, 6)
    assert summary["p_value"] == pytest.approx(12952 / 16384)
    assert summary["labels_differ"] == 14 == len(comparison.differences)
    assert sum(d.a.n for d in comparison.by_dimension) == 21


def test_a_run_is_not_compared_with_itself(two_runs):
    _, _, _, run, _ = two_runs

    with pytest.raises(DomainError) as error:
        judge_runs_compare(a=run, b=run)

    assert error.value.code == "compare_same_run"


def test_the_comparison_page_shows_both_runs_the_p_value_and_the_differing_items(client, two_runs):
    project, _, _, run, split_wrong = two_runs
    client.force_login(project.created_by)

    html = client.get(reverse("judge_runs_compare", args=[project.pk]), {"a": run.pk, "b": split_wrong.pk},
                      HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert "judge-a" in html and "judge-b" in html
    assert "71.4%" in html and "61.9%" in html
    assert "p = 0.791" in html
    assert "14 units where the runs" in html
    assert "Zone-aware agreement" in html and "Strict agreement" in html


def test_the_dashboards_judge_tab_shows_zone_aware_agreement_apart_and_links_the_items_page(client, two_runs):
    project, _, _, _, split_wrong = two_runs
    agreement_report_compute(project=project, judge_run=split_wrong, now=T0 + timedelta(days=1))
    client.force_login(project.created_by)

    html = client.get(reverse("quality_dashboard", args=[project.pk]),
                      {"tab": "judge", "run": split_wrong.pk}, HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert "Strict agreement" in html and "Zone-aware agreement" in html
    assert "61.9%" in html and "100.0%" in html
    assert reverse("judge_items", args=[project.pk]) in html
