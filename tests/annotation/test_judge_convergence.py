"""The judge's convergence view against the project's targets, and judge drift between runs on the same units."""
import json
from datetime import timedelta

import pytest
from django.urls import reverse

from annotation.agreement import stats
from annotation.agreement.services import agreement_report_compute
from annotation.convergence.services import convergence_lines, convergence_points, convergence_targets
from annotation.exchange.judge_labels import judge_labels_import
from annotation.judging.drift import judge_drift_check
from annotation.models import AuditEntry, ConvergenceSettings, JudgeDriftAlert, JudgeRun
from experts.models import Notification
from rubrics.models import RubricItem
from tests.annotation.test_agreement_report import JUDGE, MAJORITY, PANEL, T0, build
from tests.annotation.test_judge_items import add_run

pytestmark = pytest.mark.django_db

# Run B: the majority everywhere on the 7 complete tasks but position 3 of task 0 (q0/model-0),
# and run A's labels on the pending task q3/model-1.
JUDGE_B = [list(row) for row in MAJORITY] + [list(JUDGE[7])]
JUDGE_B[0][2] = 1 - JUDGE_B[0][2]


@pytest.fixture
def loop():
    project, experts, tasks, run_a = build(PANEL, JUDGE)
    run_b = add_run(project, tasks, "judge-b", JUDGE_B)
    for run in (run_a, run_b):
        agreement_report_compute(project=project, judge_run=run, now=T0 + timedelta(days=1))
    codes = [RubricItem.objects.get(item_key=f"q0:{pos}").dimension.code for pos in (1, 2, 3)]
    return project, run_a, run_b, codes


def test_each_run_is_a_point_with_its_overall_and_per_dimension_agreement(loop):
    project, run_a, run_b, codes = loop

    points = convergence_points(project=project)

    assert [p.run.pk for p in points] == [run_a.pk, run_b.pk]
    # Run A against the majority on the 21 complete units, by hand: 15 agree; per position 6, 5, 4 of 7.
    assert points[0].overall.agreement == round(15 / 21, 4)
    assert [points[0].by_dimension[c].agreement for c in codes] == [round(6 / 7, 4), round(5 / 7, 4), round(4 / 7, 4)]
    # Run B misses one unit (q0/model-0, position 3): 20 of 21; position 3 6 of 7.
    assert points[1].overall.agreement == round(20 / 21, 4)
    assert [points[1].by_dimension[c].agreement for c in codes] == [1.0, 1.0, round(6 / 7, 4)]
    # The interval is clustered by dialogue: per question q0..q3, run B agrees on 5/6, 6/6, 6/6, 3/3.
    low, high = stats.cluster_wilson_interval([5, 6, 6, 3], [6, 6, 6, 3])
    assert (points[1].overall.low, points[1].overall.high) == (round(low, 4), round(high, 4))
    assert points[1].overall.questions == 4


def test_a_dimension_marked_safety_needs_90_percent_and_the_others_85(loop):
    project, _, _, codes = loop

    _, default_lines = convergence_lines(points=convergence_points(project=project),
                                         targets=convergence_targets(project=project), english=True)
    ConvergenceSettings.objects.create(project=project).safety_dimensions.set(
        RubricItem.objects.filter(item_key="q0:3").values_list("dimension", flat=True))
    overall, lines = convergence_lines(points=convergence_points(project=project),
                                       targets=convergence_targets(project=project), english=True)

    by_code = {line.code: line for line in lines}
    # 6/7 = 85.7%: converged against 85%, not yet against the safety target of 90%.
    assert {line.code: line.converged for line in default_lines} == {codes[0]: True, codes[1]: True, codes[2]: True}
    assert (by_code[codes[2]].safety, by_code[codes[2]].target, by_code[codes[2]].converged) == (True, 0.9, False)
    assert by_code[codes[0]].converged and by_code[codes[1]].converged
    assert overall.converged and overall.target == 0.85


def test_the_page_shows_each_version_the_targets_and_the_verdicts(client, loop):
    project, run_a, run_b, codes = loop
    client.force_login(project_manager(project))

    response = client.get(reverse("judge_convergence", args=[project.pk]), HTTP_ACCEPT_LANGUAGE="en")

    html = response.content.decode()
    assert response.status_code == 200
    assert "3 of 3 dimensions converged on the newest version" in html
    assert "71.4%" in html and "95.2%" in html  # runs A and B overall
    assert html.count("<svg") == 4  # the overall chart and one per dimension
    assert 'class="cv-target"' in html
    assert f'data-dimension="{codes[2]}" data-converged="yes"' in html


def test_the_page_states_which_expert_labels_each_run_was_compared_with(client, loop):
    from annotation.models import AgreementReport

    project, run_a, run_b, codes = loop
    client.force_login(project_manager(project))
    url = reverse("judge_convergence", args=[project.pk])

    first = client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    report = AgreementReport.objects.filter(judge_run=run_b).order_by("-computed_at").first()
    report.payload = {**report.payload, "labels_used": "revised"}
    report.save(update_fields=["payload"])
    mixed = client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert 'data-labels-used="first"' in first and "Compared with the experts' first labels" in first
    assert 'data-labels-used="first,revised"' in mixed and "Runs differ in the experts' labels" in mixed


def project_manager(project):
    from annotation.selectors import project_managers
    return project_managers(project).first()


def test_the_page_reads_stored_reports_in_a_fixed_number_of_queries(client, loop, django_assert_max_num_queries):
    project, *_ = loop
    client.force_login(project_manager(project))

    with django_assert_max_num_queries(16):
        response = client.get(reverse("judge_convergence", args=[project.pk]), HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert "<html" not in response.content.decode()  # the fragment only


def test_the_pm_edits_the_targets_and_marks_safety_dimensions(client, loop):
    project, _, _, codes = loop
    client.force_login(project_manager(project))

    response = client.post(reverse("judge_convergence_targets", args=[project.pk]), {
        "safety_target_pct": "92", "other_target_pct": "80", "drift_threshold_pct": "15",
        "safety_dimensions": [codes[2]]})

    assert response.status_code == 302
    targets = convergence_targets(project=project)
    assert (targets.safety_pct, targets.other_pct, targets.drift_pct, targets.safety_codes) == (
        92.0, 80.0, 15.0, frozenset({codes[2]}))
    entry = AuditEntry.objects.get(action="convergence.targets")
    assert entry.details["after"]["safety"] == [codes[2]]
    page = client.get(reverse("judge_convergence", args=[project.pk]), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert f'data-dimension="{codes[2]}" data-converged="no"' in page  # 85.7% < 92%


@pytest.mark.parametrize("field,value", [("safety_target_pct", "101"), ("other_target_pct", "-1"),
                                         ("other_target_pct", "abc"), ("drift_threshold_pct", "0"),
                                         ("safety_target_pct", "nan")])
def test_a_target_outside_0_to_100_is_refused_and_nothing_is_written(client, loop, field, value):
    project, *_ = loop
    client.force_login(project_manager(project))
    data = {"safety_target_pct": "90", "other_target_pct": "85", "drift_threshold_pct": "10", field: value}

    response = client.post(reverse("judge_convergence_targets", args=[project.pk]), data, HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 422
    assert "The targets were not saved" in response.content.decode()
    assert "Enter a number" in response.content.decode()
    assert not ConvergenceSettings.objects.filter(project=project).exists()
    assert not AuditEntry.objects.filter(action="convergence.targets").exists()


# --- Drift ------------------------------------------------------------------------------------

def jsonl(rows):
    return "\n".join(json.dumps(r) for r in rows).encode()


def test_an_imported_run_differing_from_the_earlier_one_notifies_the_pm_once(django_capture_on_commit_callbacks):
    project, _, tasks, run_a = build(PANEL, JUDGE)
    pm = project_manager(project)
    rows = [{"question_id": t.response.question.external_id, "model": t.response.model_name, "detail": d}
            for t, d in zip(tasks, JUDGE_B)]

    with django_capture_on_commit_callbacks(execute=True):
        judge_labels_import(project=project, data=jsonl(rows), run_name="judge-b", now=T0 + timedelta(days=1))

    run_b = JudgeRun.objects.get(project=project, name="judge-b")
    alert = JudgeDriftAlert.objects.get(run=run_b)
    # By hand: A and B share all 24 units (8 tasks x 3) and differ on 2+1+1+1+1+0+1+0 = 7 of them.
    assert (alert.earlier_run_id, alert.shared_units, alert.differing, alert.threshold_pct) == (run_a.pk, 24, 7,
                                                                                                10.0)
    note = Notification.objects.get(user=pm, kind="judge_drift")
    assert note.params["share"] == "29.2%" and note.params["shared"] == 24
    assert note.link == f"{reverse('judge_runs_compare', args=[project.pk])}?a={run_a.pk}&b={run_b.pk}"
    assert "labels 29.2% of the 24 units it shares with run judge-a differently" in note.message
    # Checked again (a redelivered task, a later import into the run): no second notification.
    assert judge_drift_check(run_id=run_b.pk, now=T0 + timedelta(days=2)) is None
    assert Notification.objects.filter(kind="judge_drift").count() == 1


def test_labels_within_the_threshold_raise_nothing():
    project, _, tasks, _ = build(PANEL, JUDGE)
    ConvergenceSettings.objects.create(project=project, drift_threshold_pct=30)
    run_b = add_run(project, tasks, "judge-b", JUDGE_B)

    assert judge_drift_check(run_id=run_b.pk, now=T0) is None  # 7/24 = 29.2% <= 30%
    assert not Notification.objects.filter(kind="judge_drift").exists()


def test_runs_sharing_fewer_than_20_units_are_not_compared():
    project, _, tasks, _ = build(PANEL, JUDGE)
    run_b = add_run(project, tasks[:6], "judge-b", [[1 - v for v in row] for row in JUDGE[:6]])

    assert judge_drift_check(run_id=run_b.pk, now=T0) is None  # 18 shared units, all different
    assert not JudgeDriftAlert.objects.exists()
