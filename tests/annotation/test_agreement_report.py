"""The agreement report, hand-checked on a small panel built with the real submission service."""
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.db import connection
from django.db.models import F
from scipy import stats as scipy_stats
from sklearn.metrics import cohen_kappa_score

from annotation.agreement import stats
from annotation.agreement.material import Params
from annotation.agreement.report import golden_reference_matrix, material_load, worked_tasks
from annotation.agreement.scoring import score_model
from annotation.agreement.sections import _sliced_agreement
from annotation.agreement.services import (
    agreement_report_compute,
    agreement_report_process,
    agreement_report_request,
)
from annotation.models import (
    AgreementReport,
    Assignment,
    GoldenReference,
    JudgeLabel,
    JudgeRun,
    JudgeTaskResult,
    Question,
    Task,
)
from annotation.selectors import rubric_items_for_task
from annotation.submission.services import labels_submit
from rubrics.models import Dimension
from tests.factories import ExpertFactory, PMFactory, ResponseFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db

T0 = datetime(2025, 3, 3, 1, 0, tzinfo=UTC)

# Tasks in (question, model) order: q0/model-0, q0/model-1, q1/model-0, ... Each row holds
# the three experts' labels on rubric positions 1..3, in slot order; q3/model-1 has only
# two submissions, so its units are pending.
PANEL = [
    [[1, 0, 1], [1, 0, 0], [1, 0, 1]],
    [[0, 0, 1], [0, 1, 1], [0, 0, 1]],
    [[1, 1, 1], [1, 1, 0], [0, 1, 1]],
    [[0, 0, 0], [0, 0, 0], [0, 0, 1]],
    [[1, 1, 0], [1, 1, 0], [1, 1, 0]],
    [[0, 1, 0], [1, 1, 0], [0, 1, 1]],
    [[1, 0, 0], [1, 0, 0], [0, 0, 0]],
    [[1, 1, 1], [0, 0, 0]],
]
JUDGE = [[1, 1, 1], [0, 0, 0], [1, 0, 1], [1, 0, 0], [1, 1, 1], [0, 1, 0], [1, 0, 1], [1, 1, 1]]
# Worked by hand from the tables above (positions are also dimensions: one per position).
MAJORITY = [[1, 0, 1], [0, 0, 1], [1, 1, 1], [0, 0, 0], [1, 1, 0], [0, 1, 0], [1, 0, 0]]
UNANIMOUS_DISAGREEMENTS = [("q0", "model-0", 2), ("q0", "model-1", 3), ("q1", "model-0", 2),
                           ("q1", "model-1", 1), ("q2", "model-0", 3), ("q3", "model-0", 3)]


def submit(task: Task, expert, values: list[int], at: datetime) -> None:
    """Lease slot n+1 of `task` to `expert` and submit `values` through the real service."""
    Task.objects.filter(pk=task.pk).update(live_count=F("live_count") + 1)
    task.refresh_from_db()
    assignment = Assignment.objects.create(task=task, expert=expert, slot=task.live_count,
                                           leased_at=at - timedelta(seconds=90), expires_at=at + timedelta(hours=1))
    items = rubric_items_for_task(task)
    labels_submit(expert=expert, assignment_id=assignment.pk,
                  labels={item.item_key: v for item, v in zip(items, values)}, now=at)


def ordered_tasks(project) -> list[Task]:
    return list(Task.objects.filter(project=project).select_related("response__question")
                .order_by("response__question__external_id", "response__model_name"))


def build(panel: list[list[list[int]]], judge: list[list[int]] | None):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=4, items_per_question=3, models=2, pm=pm)
    experts = [ExpertFactory() for _ in range(3)]
    tasks = ordered_tasks(project)
    for t, (task, rows) in enumerate(zip(tasks, panel)):
        for slot, (expert, values) in enumerate(zip(experts, rows)):
            submit(task, expert, values, T0 + timedelta(minutes=10 * t + slot))
    run = None
    if judge is not None:
        run = JudgeRun.objects.create(project=project, rubric_version=tasks[0].rubric_version, name="judge-a",
                                      source=JudgeRun.Source.IMPORTED, status=JudgeRun.Status.DONE)
        JudgeLabel.objects.bulk_create(
            JudgeLabel(run=run, task=task, rubric_item=item, value=v)
            for task, values in zip(tasks, judge)
            for item, v in zip(rubric_items_for_task(task), values)
        )
    # Each completed task asked for a recompute as it arrived (eagerly, in tests); the
    # scenarios start from labels in place and no report yet.
    AgreementReport.objects.filter(project=project).delete()
    return project, experts, tasks, run


@pytest.fixture
def panel():
    return build(PANEL, JUDGE)


def complete_arrays():
    labels = np.array([row for task in PANEL[:7] for row in np.array(task).T], dtype=np.int64)
    judge = np.array([v for task in JUDGE[:7] for v in task])
    majority = np.array([v for task in MAJORITY for v in task])
    questions = np.repeat(np.array([0, 0, 1, 1, 2, 2, 3]), 3)
    return labels, judge, majority, questions


def test_judge_agreement_and_kappa_overall(panel):
    project, _, _, run = panel
    labels, judge, majority, questions = complete_arrays()

    payload = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload

    overall = payload["judge"]["overall"]
    assert payload["judge_run"]["id"] == run.pk
    assert overall["n"] == 21
    assert overall["agreement"] == round(15 / 21, 4)
    assert overall["kappa"] == round(stats.cohen_kappa(judge, majority), 4)
    assert stats.majority(labels).majority.tolist() == majority.tolist()
    boot = stats.bootstrap_agreement_kappa(judge, majority, questions, n_boot=1000, seed=0)
    # Four dialogues: a thin slice. The agreement interval is the cluster Wilson one; the
    # bootstrap percentile interval (the figure this test checked before) is kept beside it.
    assert overall["thin"] is True and overall["interval"] == "cluster_wilson"
    assert overall["agreement_ci_bootstrap"] == [round(boot.agreement_ci[0], 4), round(boot.agreement_ci[1], 4)]
    agreed = np.bincount(questions, weights=(judge == majority).astype(float))
    sizes = np.bincount(questions)
    wilson = stats.cluster_wilson_interval(agreed, sizes)
    assert overall["agreement_ci"] == [round(wilson[0], 4), round(wilson[1], 4)]
    # Kappa: the jackknife-t interval by dialogue (the bootstrap one, which under-covers on few
    # dialogues, is kept beside it), recomputed here through sklearn and scipy.
    assert overall["kappa_ci_bootstrap"] == [round(boot.kappa_ci[0], 4), round(boot.kappa_ci[1], 4)]
    ids = np.unique(questions)
    leave_out = np.array([cohen_kappa_score(judge[questions != q], majority[questions != q]) for q in ids])
    se = np.sqrt((ids.size - 1) / ids.size * ((leave_out - leave_out.mean()) ** 2).sum())
    t = scipy_stats.t.ppf(0.975, ids.size - 1)
    point = cohen_kappa_score(judge, majority)
    np.testing.assert_allclose(overall["kappa_ci"], [max(-1, point - t * se), min(1, point + t * se)], atol=1e-4)
    assert overall["questions"] == 4
    assert payload["params"]["thin_dialogues"] == 30 and payload["params"]["headline_excludes_gate"] is True
    # No gate item in this rubric: the headline equals the all-units figure, and no gate line.
    assert payload["judge"]["gate"] is None
    assert {k: v for k, v in payload["judge"]["overall_with_gate"].items() if k != "key"} == {
        k: v for k, v in overall.items() if k != "key"}


def test_agreement_splits_by_dimension_zone_and_model(panel):
    project, _, tasks, _ = panel
    items = rubric_items_for_task(tasks[0])

    payload = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload

    by_dim = {row["key"]: row for row in payload["judge"]["by_dimension"]}
    assert [by_dim[item.dimension.code]["agreement"] for item in items] == [round(6 / 7, 4), round(5 / 7, 4),
                                                                           round(4 / 7, 4)]
    third = by_dim[items[2].dimension.code]["zones"]
    assert (third["unanimous"]["n"], third["unanimous"]["agreement"]) == (3, 0.0)
    assert (third["split"]["n"], third["split"]["agreement"]) == (4, 1.0)
    zones = {row["key"]: row for row in payload["judge"]["by_zone"]}
    assert (zones["unanimous"]["n"], zones["unanimous"]["agreement"]) == (13, round(7 / 13, 4))
    assert (zones["split"]["n"], zones["split"]["agreement"]) == (8, 1.0)
    by_model = {row["key"]: row for row in payload["judge"]["by_model"]}
    assert (by_model["model-0"]["n"], by_model["model-1"]["n"]) == (12, 9)
    assert payload["panel"]["overall"]["unanimous"] == 13


def test_pending_units_are_left_out(panel):
    project, _, tasks, _ = panel

    payload = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload

    assert payload["progress"]["units_pending"] == 3
    assert payload["progress"]["units_complete"] == 21
    assert payload["panel"]["overall"]["n"] == 21
    assert all(row["task_id"] != tasks[7].pk for row in payload["judge"]["unanimous_disagreements"]["items"])
    questions = {row["model"]: row["questions"] for row in payload["leaderboard"]["models"]}
    assert questions == {"model-0": 4, "model-1": 3}


def test_unanimous_disagreement_list(panel):
    project, _, _, _ = panel

    payload = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload

    listed = payload["judge"]["unanimous_disagreements"]
    assert listed["count"] == 6
    assert [(r["question_id"], r["model"], r["position"]) for r in listed["items"]] == UNANIMOUS_DISAGREEMENTS
    first = listed["items"][0]
    assert (first["item_key"], first["content"], first["panel"], first["judge"]) == ("q0:2", "criterion 2 of q0", 0, 1)


def test_panel_statistics_match_the_stats_module(panel):
    project, _, _, _ = panel
    labels, _, _, _ = complete_arrays()

    overall = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload["panel"]["overall"]

    assert overall["percent_agreement"] == round(stats.observed_agreement_multi(labels), 4)
    assert overall["fleiss_kappa"] == round(stats.fleiss_kappa(stats.ratings_to_counts(labels, 2)), 4)
    assert overall["krippendorff_alpha"] == round(stats.krippendorff_alpha_nominal(labels), 4)
    assert overall["gwet_ac1"] == round(stats.gwet_ac1(labels, 2), 4)


def test_per_expert_peer_agreement_and_alternative_annotator(panel):
    project, experts, _, _ = panel
    labels, judge, _, _ = complete_arrays()
    loo = stats.leave_one_out_agreement(labels)
    alt = stats.alternative_annotator_test(judge, labels)

    payload = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload

    rows = {row["user_id"]: row for row in payload["experts"]}
    alt_rows = {row["user_id"]: row for row in payload["judge"]["alternative_annotator"]["experts"]}
    for column, expert in enumerate(experts):
        assert rows[expert.pk]["peer"]["mean"] == round(float(np.nanmean(loo[:, column])), 4)
        assert rows[expert.pk]["pseudonym"] == expert.expert_profile.pseudonym
        assert rows[expert.pk]["tasks"] == (8 if column < 2 else 7)
        assert rows[expert.pk]["median_seconds_per_item"] == 30.0
        assert alt_rows[expert.pk]["judge_mean"] == round(float(alt.judge_mean[column]), 4)
        assert alt_rows[expert.pk]["expert_mean"] == round(float(alt.expert_mean[column]), 4)
        assert alt_rows[expert.pk]["win_rate"] == round(float(alt.win_rate[column]), 4)


def test_leaderboard_uses_heartbench_scores_of_the_majority_and_the_judge(panel):
    project, _, tasks, _ = panel
    _, judge, majority, _ = complete_arrays()
    model0 = np.array([0, 2, 4, 6])  # task rows of model-0 among the complete ones
    rows = (model0[:, None] * 3 + np.arange(3)).ravel()
    question = np.repeat(np.arange(4), 3)
    dim = np.tile(np.arange(3), 4)
    score = np.tile(np.array([1.0, 2.0, -3.0]), 4)

    board = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload["leaderboard"]

    model = next(row for row in board["models"] if row["model"] == "model-0")
    expected_human = score_model(question, dim, score, majority[rows], n_questions=4, n_dims=3).overall
    expected_judge = score_model(question, dim, score, judge[rows], n_questions=4, n_dims=3).overall
    assert model["human"]["score"] == round(expected_human, 2)
    assert model["judge"]["score"] == round(expected_judge, 2)
    assert {row["human"]["rank"] for row in board["models"]} <= {1, 2}
    assert 0.0 <= model["human"]["keep_share"] <= 1.0


def test_labels_per_day_and_counts(panel):
    project, _, _, _ = panel

    progress = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload["progress"]

    assert progress["labels_per_day"] == [{"date": "2025-03-03", "submissions": 23, "labels": 69}]
    assert progress["tasks_complete"] == 7


def test_a_project_without_a_judge_has_no_judge_section():
    project, _, _, _ = build(PANEL, None)

    report = agreement_report_compute(project=project, now=T0 + timedelta(days=1))

    assert report.status == AgreementReport.Status.DONE
    assert report.payload["judge"] is None and report.payload["judge_run"] is None
    assert report.payload["leaderboard"]["models"][0]["human"]["score"] is not None
    assert "judge" not in report.payload["leaderboard"]["models"][0]


def test_an_empty_project_gives_an_empty_report():
    project = make_project_with_tasks(n_questions=1, items_per_question=2)

    report = agreement_report_compute(project=project, now=T0)

    assert report.units == 0
    assert report.payload["panel"]["overall"]["n"] == 0
    assert report.payload["panel"]["overall"]["fleiss_kappa"] is None
    assert report.payload["experts"] == []


def test_golden_accuracy_is_empty_without_references_and_appears_with_them(panel):
    project, experts, tasks, _ = panel
    Task.objects.filter(pk=tasks[7].pk).update(is_golden=True)
    items = rubric_items_for_task(tasks[7])

    assert golden_reference_matrix(project).task_id.size == 0
    before = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload
    assert all(row["golden"] is None for row in before["experts"])

    GoldenReference.objects.bulk_create(GoldenReference(task=tasks[7], rubric_item=item, value=v, created_at=T0)
                                        for item, v in zip(items, [1, 1, 0]))
    after = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload

    assert golden_reference_matrix(project).value.tolist() == [1, 1, 0]
    golden = {row["user_id"]: row["golden"] for row in after["experts"]}
    assert golden[experts[0].pk]["mean"] == round(2 / 3, 4)
    assert golden[experts[1].pk]["mean"] == round(1 / 3, 4)
    assert golden[experts[2].pk] is None
    assert after["progress"]["units_pending"] == 0


def test_a_drop_below_the_experts_own_baseline_raises_a_drift_alert(settings):
    settings.RUBRICA_DRIFT_WINDOW = 6
    settings.RUBRICA_DRIFT_BASELINE = 6
    settings.RUBRICA_DRIFT_MARGIN = 0.10
    steady = [1, 0, 1]
    flipped = [0, 1, 0]
    panel = [[steady, steady, steady if t < 4 else flipped] for t in range(8)]
    project, experts, _, _ = build(panel, None)

    rows = {row["user_id"]: row for row in
            agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload["experts"]}

    drifting = rows[experts[2].pk]["peer"]
    assert drifting["baseline"] == 1.0
    assert drifting["alert_active"] is True
    # The calibrated limit (alpha 0.05 over 3 disjoint windows after the baseline):
    # sin(pi/2 - z(0.05/12) * sqrt(1/24 + 1/24))^2 = 0.5238, first crossed at item 15 (3/6);
    # the plain margin rule would have flagged item 13 (5/6 < 0.9), see the next test.
    assert drifting["limit"] == 0.5238  # z(0.05/12) = 2.6383 (scipy.stats.norm.isf)
    assert drifting["alerts"] == [{"from_item": 15, "to_item": 24, "from_date": "2025-03-03",
                                   "to_date": "2025-03-03", "lowest": 0.0}]
    assert rows[experts[0].pk]["peer"]["alerts"] == []


def test_without_alpha_the_drift_rule_is_the_plain_margin(settings):
    settings.RUBRICA_DRIFT_WINDOW = 6
    settings.RUBRICA_DRIFT_BASELINE = 6
    settings.RUBRICA_DRIFT_MARGIN = 0.10
    settings.RUBRICA_DRIFT_ALPHA = None
    steady = [1, 0, 1]
    flipped = [0, 1, 0]
    panel = [[steady, steady, steady if t < 4 else flipped] for t in range(8)]
    project, experts, _, _ = build(panel, None)

    rows = {row["user_id"]: row for row in
            agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload["experts"]}

    drifting = rows[experts[2].pk]["peer"]
    assert drifting["limit"] == 0.9
    assert drifting["alerts"] == [{"from_item": 13, "to_item": 24, "from_date": "2025-03-03",
                                   "to_date": "2025-03-03", "lowest": 0.0}]


def test_requests_within_the_debounce_window_make_one_computation(panel, django_capture_on_commit_callbacks):
    project, _, _, _ = panel

    with django_capture_on_commit_callbacks(execute=False) as scheduled:
        first = agreement_report_request(project=project, now=T0, debounce_s=30)
        second = agreement_report_request(project=project, now=T0 + timedelta(seconds=5), debounce_s=30)

    assert first.pk == second.pk
    assert len(scheduled) == 1
    assert first.status == AgreementReport.Status.PENDING


def test_a_pending_report_is_computed_once(panel):
    project, _, _, run = panel
    pending = agreement_report_request(project=project, now=T0, debounce_s=30)

    done = agreement_report_process(report_id=pending.pk, now=T0 + timedelta(seconds=30))
    again = agreement_report_process(report_id=pending.pk, now=T0 + timedelta(seconds=31))

    assert done.pk == pending.pk and done.status == AgreementReport.Status.DONE
    assert done.judge_run_id == run.pk and done.units == 24 and done.duration_ms is not None
    assert again is None
    later = agreement_report_request(project=project, now=T0 + timedelta(seconds=40), debounce_s=30)
    assert later.pk != pending.pk


def test_recompute_refreshes_every_reported_run(panel):
    project, _, tasks, run = panel
    other = JudgeRun.objects.create(project=project, rubric_version=tasks[0].rubric_version, name="judge-b",
                                    source=JudgeRun.Source.IMPORTED, status=JudgeRun.Status.DONE)
    JudgeLabel.objects.bulk_create(JudgeLabel(run=other, task=task, rubric_item=item, value=1)
                                   for task in tasks for item in rubric_items_for_task(task))
    agreement_report_compute(project=project, judge_run=run, now=T0)
    pending = agreement_report_request(project=project, now=T0 + timedelta(minutes=1), debounce_s=30)

    agreement_report_process(report_id=pending.pk, now=T0 + timedelta(minutes=2))

    fresh = AgreementReport.objects.filter(status="done", computed_at=T0 + timedelta(minutes=2))
    assert sorted(fresh.values_list("judge_run_id", flat=True)) == sorted([run.pk, other.pk])


def test_the_headline_leaves_gate_items_out_and_shows_them_on_their_own_line(panel):
    project, _, tasks, _ = panel
    _, judge, majority, questions = complete_arrays()
    third = rubric_items_for_task(tasks[0])[2]
    # Published items cannot change; the third position's dimension becomes the gate instead.
    Dimension.objects.filter(pk=third.dimension_id).update(is_gate=True)
    position = np.tile(np.arange(3), 7)

    judge_section = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload["judge"]

    body, gate = position < 2, position == 2
    assert judge_section["overall"]["key"] == "non_gate"
    assert judge_section["overall"]["n"] == 14
    assert judge_section["overall"]["agreement"] == round(float((judge[body] == majority[body]).mean()), 4)
    assert judge_section["gate"]["n"] == 7
    assert judge_section["gate"]["agreement"] == round(float((judge[gate] == majority[gate]).mean()), 4)
    # The old headline, every unit, stays under its own key.
    assert judge_section["overall_with_gate"]["n"] == 21
    assert judge_section["overall_with_gate"]["agreement"] == round(15 / 21, 4)
    boot = stats.bootstrap_agreement_kappa(judge[body], majority[body], questions[body], n_boot=1000, seed=0)
    assert judge_section["overall"]["kappa"] == round(boot.kappa, 4)


def test_every_slice_of_the_small_panel_says_it_rests_on_few_dialogues(panel):
    project, _, _, _ = panel

    judge_section = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload["judge"]

    rows = [*judge_section["by_dimension"], *judge_section["by_model"], *judge_section["by_zone"]]
    assert rows and all(r["thin"] and r["questions"] < 30 and r["interval"] == "cluster_wilson" for r in rows)
    assert judge_section["thin_slices"] == sum(len(judge_section[k]) for k in
                                               ("by_dimension", "by_category", "by_model", "by_difficulty",
                                                "by_zone"))
    for r in rows:
        low, high = r["agreement_ci"]
        assert low <= r["agreement"] <= high


def test_each_leaderboard_uses_its_own_data_and_the_like_for_like_view_their_intersection(panel):
    project, _, tasks, run = panel
    # A failed judge call: the judge labelled q0/model-0 only in part.
    JudgeLabel.objects.filter(run=run, task=tasks[0], rubric_item=rubric_items_for_task(tasks[0])[0]).delete()
    _, judge, majority, _ = complete_arrays()
    question, dim = np.repeat(np.arange(4), 3), np.tile(np.arange(3), 4)
    score = np.tile(np.array([1.0, 2.0, -3.0]), 4)
    full_judge = np.array([v for task in JUDGE for v in task])

    board = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload["leaderboard"]

    human = {r["model"]: r for r in board["human_all"]["models"]}
    judged = {r["model"]: r for r in board["judge_all"]["models"]}
    like = {r["model"]: r for r in board["models"]}
    assert board["basis"] == "intersection"
    assert board["human_all"]["basis"] == "every_complete_task"
    assert board["judge_all"]["basis"] == "every_task_the_run_judged"
    # Human: every complete task (q3/model-1 is pending). Judge: every task judged in full
    # (q0/model-0 is not, q3/model-1 is). Like for like: both.
    assert (human["model-0"]["questions"], human["model-1"]["questions"]) == (4, 3)
    assert (judged["model-0"]["questions"], judged["model-1"]["questions"]) == (3, 4)
    assert (like["model-0"]["questions"], like["model-1"]["questions"]) == (3, 3)
    assert board["tasks"] == {"complete": 7, "judged": 7, "both": 6, "judge_failed_dropped": 1,
                              "judge_not_judged": 0}
    model1 = (np.array([1, 3, 5, 7])[:, None] * 3 + np.arange(3)).ravel()
    expected = score_model(question, dim, score, full_judge[model1], n_questions=4, n_dims=3).overall
    assert judged["model-1"]["score"] == round(expected, 2)
    model0 = (np.array([0, 2, 4, 6])[:, None] * 3 + np.arange(3)).ravel()
    expected = score_model(question, dim, score, majority[model0], n_questions=4, n_dims=3).overall
    assert human["model-0"]["score"] == round(expected, 2)
    assert board["judge_all"]["quirks"]["failed_calls_dropped"] == 1


def test_the_judges_board_counts_tasks_no_expert_has_labelled_yet():
    # Experts have done six tasks; the judge all eight (q3 under both models only by the judge).
    project, _, _, _ = build(PANEL[:6], JUDGE)
    question, dim = np.repeat(np.arange(4), 3), np.tile(np.arange(3), 4)
    score = np.tile(np.array([1.0, 2.0, -3.0]), 4)
    full_judge = np.array([v for task in JUDGE for v in task])

    board = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload["leaderboard"]

    judged = {r["model"]: r for r in board["judge_all"]["models"]}
    assert (judged["model-0"]["questions"], judged["model-1"]["questions"]) == (4, 4)
    for model, offset in (("model-0", 0), ("model-1", 1)):
        units = (np.array([0, 2, 4, 6])[:, None] * 3 + offset * 3 + np.arange(3)).ravel()
        expected = score_model(question, dim, score, full_judge[units], n_questions=4, n_dims=3).overall
        assert judged[model]["score"] == round(expected, 2)
    assert board["tasks"] == {"complete": 6, "judged": 8, "both": 6, "judge_failed_dropped": 0,
                              "judge_not_judged": 0}
    # The like-for-like view stays on what both sides cover.
    assert {r["model"]: r["questions"] for r in board["models"]} == {"model-0": 3, "model-1": 3}


def test_the_scorer_quirks_are_counted_beside_the_scores(panel):
    project, _, _, _ = panel

    board = agreement_report_compute(project=project, now=T0 + timedelta(days=1)).payload["leaderboard"]

    # Position 3 scores -3 and is alone in its dimension: a penalty-only ability on each of
    # the 7 complete tasks; the majority left it untouched (a free 100) on 4 of them.
    assert board["human_all"]["quirks"] == {"gate_hits_not_zeroing": 0, "penalty_only_cells": 7,
                                            "penalty_only_untouched": 4}
    # The judge, on its 8 fully judged tasks, hit position 3 on q0/m0, q1/m0, q2/m0, q3/m0, q3/m1.
    assert board["judge_all"]["quirks"] == {"gate_hits_not_zeroing": 0, "penalty_only_cells": 8,
                                            "penalty_only_untouched": 3, "failed_calls_dropped": 0}


@pytest.mark.parametrize(("dialogues", "thin"), [(29, True), (30, False)])
def test_a_slice_is_thin_below_thirty_dialogues_and_not_at_thirty(dialogues, thin):
    rng = np.random.default_rng(dialogues)
    cluster = np.repeat(np.arange(dialogues), 5)
    judge = rng.integers(0, 2, cluster.size)
    human = np.where(rng.random(cluster.size) < 0.8, judge, 1 - judge)

    (row,), = _sliced_agreement(judge, human, cluster, [(np.zeros(cluster.size, np.int64), 1)], Params(n_boot=200))

    assert row["questions"] == dialogues and row["thin"] is thin
    wilson = stats.cluster_wilson_interval(np.bincount(cluster, weights=(judge == human).astype(float)),
                                           np.bincount(cluster))
    assert row["agreement_ci"] == [round(wilson[0], 4), round(wilson[1], 4)]
    boot = stats.bootstrap_agreement_kappa(judge, human, cluster, n_boot=200, seed=0)
    assert row["agreement_ci_bootstrap"] == [round(boot.agreement_ci[0], 4), round(boot.agreement_ci[1], 4)]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_labels_arriving_while_a_recompute_waits_join_it_without_waiting_on_the_project(settings):
    """Every completed task asks for a recompute: one already waiting answers it without the project's
    lock, so these requests never queue behind a PM's project change (or behind each other)."""
    from annotation.agreement.tasks import agreement_report_request_task
    from tests.support.faults import side_connection

    settings.RUBRICA_AGREEMENT_DEBOUNCE_S = 30
    project = make_project_with_tasks(n_questions=1, items_per_question=1)
    # What a debounced request leaves (in-process mode computes it at once, so it is written here).
    first = AgreementReport.objects.create(project=project, requested_at=T0, status=AgreementReport.Status.PENDING).pk
    with side_connection() as side:  # the project's row locked elsewhere, as a PM's change holds it
        side.execute(f"SELECT 1 FROM {project._meta.db_table} WHERE id = %s FOR UPDATE", [project.pk])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
        try:
            again = agreement_report_request_task.run(project_id=project.pk)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = 0")

    assert again == first
    assert list(AgreementReport.objects.values_list("pk", "status")) == [(first, AgreementReport.Status.PENDING)]
    # Once it ran (no row waits), the next request writes the next row, under the lock (and, in-process, runs it).
    AgreementReport.objects.filter(pk=first).update(status=AgreementReport.Status.DONE)
    later = agreement_report_request_task.run(project_id=project.pk)
    assert later != first and AgreementReport.objects.filter(pk=later).exists()


def test_the_wait_before_a_recompute_grows_with_what_the_last_one_took(panel, settings, monkeypatch):
    """On a large project a recompute can outlast the debounce; labels arriving steadily would then keep a
    worker computing reports. The wait is at least nine times the last computation's time, an hour at most."""
    from annotation.agreement import services

    project, _, _, _ = panel
    settings.RUBRICA_AGREEMENT_DEBOUNCE_S = 30
    countdowns: list[float] = []
    monkeypatch.setattr(services, "task_send_on_commit", lambda name, **kwargs: countdowns.append(kwargs["countdown"]))

    def wait_of_a_request(minute: int, **kwargs) -> float:
        agreement_report_request(project=project, now=T0 + timedelta(minutes=minute), **kwargs)
        AgreementReport.objects.filter(project=project, status=AgreementReport.Status.PENDING).delete()
        return countdowns[-1]

    assert wait_of_a_request(0) == 30  # no report yet: the debounce
    done = agreement_report_compute(project=project, now=T0)
    for minute, took_ms, wait in ((1, 1_200, 30), (2, 40_000, 360), (3, 3_000_000, 3600)):
        AgreementReport.objects.filter(pk=done.pk).update(duration_ms=took_ms)
        assert wait_of_a_request(minute) == wait, took_ms
    # A PM's "recompute now" does not wait, however long the last one took.
    assert wait_of_a_request(4, debounce_s=0) == 0


def _untouched_model(project, name: str) -> list[Task]:
    """Another model answers every question of `project`: one open task each, nobody's work yet."""
    version = Task.objects.filter(project=project).first().rubric_version
    tasks = [Task.objects.create(project=project, response=ResponseFactory(question=q, project=project,
                                                                           model_name=name),
                                 rubric_version=version, overlap=project.overlap, shuffle_key=n)
             for n, q in enumerate(Question.objects.filter(project=project).order_by("external_id"))]
    return tasks


def _lease(task: Task, expert) -> None:
    Assignment.objects.create(task=task, expert=expert, slot=1, leased_at=T0, expires_at=T0 + timedelta(hours=1))


def _figures(report: AgreementReport) -> dict:
    return {k: v for k, v in report.payload.items() if k != "computed_at"}


def test_tasks_nobody_worked_on_change_no_figure_and_are_not_read(panel):
    project, experts, tasks, run = panel
    before = _figures(agreement_report_compute(project=project, now=T0 + timedelta(days=1)))
    # model-2 and model-3 answer every question; one of those tasks is leased, nothing is
    # submitted. Another project's worked tasks are not this one's.
    fresh = _untouched_model(project, "model-2") + _untouched_model(project, "model-3")
    _lease(fresh[0], experts[0])
    build(PANEL[:2], JUDGE[:2])

    after = _figures(agreement_report_compute(project=project, now=T0 + timedelta(days=2)))

    assert after == before
    material = material_load(project=project, version=tasks[0].rubric_version)
    assert material.task_id.tolist() == sorted(t.pk for t in tasks)
    assert material.models == ["model-0", "model-1"]

    # The judge answering one of them (a failed call, no label) makes it count, as a failed call.
    JudgeTaskResult.objects.create(run=run, task=fresh[3], status=JudgeTaskResult.Status.FAILED, error="timeout")
    failed = agreement_report_compute(project=project, now=T0 + timedelta(days=3)).payload["leaderboard"]["tasks"]
    assert failed["judge_failed_dropped"] == before["leaderboard"]["tasks"]["judge_failed_dropped"] + 1
    assert fresh[3].pk in material_load(project=project, version=tasks[0].rubric_version).task_id


@pytest.mark.postgres
@pytest.mark.parametrize("judged_by", ["label", "result"])
def test_both_ways_of_finding_the_worked_tasks_find_the_same_ones(panel, judged_by):
    """The array lookup (PostgreSQL) and the subquery (the embedded SQLite mode) read the same tasks."""
    project, experts, tasks, run = panel
    fresh = _untouched_model(project, "model-2")
    if judged_by == "label":
        item = rubric_items_for_task(fresh[1])[0]
        JudgeLabel.objects.create(run=run, task=fresh[1], rubric_item=item, value=1)
    else:
        JudgeTaskResult.objects.create(run=run, task=fresh[1], status=JudgeTaskResult.Status.FAILED, error="timeout")
    _lease(fresh[2], experts[0])
    # A task whose submissions were all rejected (and that the judge did not answer) is nobody's work any more.
    rejected = tasks[7].assignments.order_by("slot")
    Task.objects.filter(pk=tasks[7].pk).update(submitted_count=0)
    rejected.update(status=Assignment.Status.REJECTED, rejected_at=T0, rejected_reason="spam")
    JudgeLabel.objects.filter(task=tasks[7]).delete()
    build(PANEL[:2], JUDGE[:2])  # another project's worked tasks
    # Every submitted task in the database: the lookup keeps the project's own under the version.
    submitted = np.array(sorted(Assignment.objects.filter(status=Assignment.Status.SUBMITTED)
                                .values_list("task_id", flat=True)), np.int64)
    version = tasks[0].rubric_version

    by_array = worked_tasks(project, version, submitted, by_array=True)
    by_subquery = worked_tasks(project, version, submitted, by_array=False)

    expected = sorted([t.pk for t in tasks[:7]] + [fresh[1].pk])
    for found in (by_array, by_subquery):
        assert found.task_id.tolist() == expected
        assert found.model_name == [Task.objects.get(pk=pk).response.model_name for pk in expected]
        assert found.question_id.tolist() == [Task.objects.get(pk=pk).response.question_id for pk in expected]
        assert found.golden.tolist() == [False] * len(expected)
        assert found.overlap.tolist() == [3] * len(expected)
