"""Tiers from the work: difficulty gating, promotion and demotion by the rules, history, the home card."""
import pytest
from celery import current_app
from django.template.loader import render_to_string
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, GoldenReference, Project, Question, Task
from annotation.quality.standing import expert_evaluate, expert_home_cards
from annotation.selectors import rubric_items_for_task
from annotation.submission.services import labels_submit
from experts.models import ExpertProfile, Notification, TierChange, TierRule
from tests.factories import AdminFactory, make_project_with_tasks
from tests.support.quality import calibrated, make_golden_project, member

pytestmark = pytest.mark.django_db


def _hard(project: Project, *question_ids: str) -> None:
    Question.objects.filter(project=project, external_id__in=question_ids).update(difficulty="hard")


def _drain(project, expert) -> list[Task]:
    taken = []
    while (lease := assignment_claim_next(project=project, expert=expert, now=timezone.now())) is not None:
        taken.append(lease.task)
        keys = [i.item_key for i in rubric_items_for_task(lease.task)]
        labels_submit(expert=expert, assignment_id=lease.pk, labels=dict.fromkeys(keys, 1), now=timezone.now())
    return taken


def test_bronze_takes_only_normal_tasks_and_silver_takes_hard_ones_too():
    project = make_project_with_tasks(n_questions=4)
    _hard(project, "q0", "q1")
    bronze = member(project)
    silver = member(project, tier="silver")

    bronze_tasks = _drain(project, bronze)
    silver_tasks = _drain(project, silver)

    assert {t.response.question.external_id for t in bronze_tasks} == {"q2", "q3"}
    assert {t.response.question.external_id for t in silver_tasks} == {"q0", "q1", "q2", "q3"}


def test_the_project_decides_which_tier_takes_hard_tasks():
    project = make_project_with_tasks(n_questions=2)
    _hard(project, "q0")
    Project.objects.filter(pk=project.pk).update(hard_min_tier="gold")
    project.refresh_from_db()

    silver_tasks = _drain(project, member(project, tier="silver"))
    gold_tasks = _drain(project, member(project, tier="gold"))

    assert [t.response.question.external_id for t in silver_tasks] == ["q1"]
    assert len(gold_tasks) == 2


def test_hard_control_tasks_never_reach_bronze():
    project = make_golden_project(golden=14, regular=4, control_rate_pct=100, calibration_size=10)
    golden_questions = list(Task.objects.filter(project=project, is_golden=True)
                            .values_list("response__question__external_id", flat=True))
    _hard(project, *golden_questions)
    expert = calibrated(project)

    leases = _drain(project, expert)

    assert len(leases) == 4 and not any(t.is_golden for t in leases)


def _promotion_rules(**silver) -> None:
    values = {"min_completed": 2, "min_golden_accuracy_pct": 80, "min_golden_items": 3, "min_peer_agreement_pct": 0}
    TierRule.objects.filter(tier="silver", kind="promote").update(**{**values, **silver})


def test_the_rules_promote_with_a_reason_in_the_history_and_a_notification():
    _promotion_rules()
    project = make_golden_project(golden=12, regular=3, control_rate_pct=0)
    expert = calibrated(project)  # 30 golden items, all right
    _drain(project, expert)

    changes = expert_evaluate(expert=expert, now=timezone.now())
    again = expert_evaluate(expert=expert, now=timezone.now())

    assert [(c.from_tier, c.to_tier) for c in changes] == [("bronze", "silver")]
    assert "3 tasks completed (needs 2)" in changes[0].reason and "golden accuracy 100.0%" in changes[0].reason
    assert changes[0].rule.kind == "promote" and changes[0].changed_by is None
    assert again == []
    assert ExpertProfile.objects.get(user=expert).tier == "silver"
    assert Notification.objects.get(user=expert).kind == "tier_changed"


def test_not_enough_golden_evidence_means_no_promotion():
    _promotion_rules(min_golden_items=100)
    project = make_golden_project(golden=12, regular=3, control_rate_pct=0)
    expert = calibrated(project)
    _drain(project, expert)

    assert expert_evaluate(expert=expert, now=timezone.now()) == []


def test_sustained_low_control_accuracy_demotes():
    TierRule.objects.filter(tier="silver", kind="demote").update(demote_below_pct=70, window=3)
    TierRule.objects.filter(tier="silver", kind="promote").update(is_active=False)
    project = make_golden_project(golden=16, regular=10, control_rate_pct=100, control_pause_below_pct=0)
    expert = calibrated(project, tier="silver")

    for _ in range(3):
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
        refs = dict(GoldenReference.objects.filter(task=lease.task).values_list("rubric_item__item_key", "value"))
        labels_submit(expert=expert, assignment_id=lease.pk, labels={k: 1 - v for k, v in refs.items()},
                      now=timezone.now())
    changes = expert_evaluate(expert=expert, now=timezone.now())

    assert [(c.from_tier, c.to_tier) for c in changes] == [("silver", "bronze")]
    assert "control-task accuracy 0.0% over the last 3 control tasks is below 70%" in changes[0].reason


def test_each_submission_sends_the_evaluation_task_by_name(django_capture_on_commit_callbacks):
    _promotion_rules(min_golden_accuracy_pct=0, min_golden_items=0)
    project = make_project_with_tasks(n_questions=2)
    expert = member(project)

    assert "annotation.expert_evaluate" in current_app.tasks
    with django_capture_on_commit_callbacks(execute=True):
        _drain(project, expert)

    assert TierChange.objects.filter(profile__user=expert, to_tier="silver").exists()


def test_the_home_card_shows_tier_progress_and_calibration():
    project = make_golden_project(golden=12, regular=2)
    expert = member(project)

    card = expert_home_cards(expert, [project])[project.pk]
    html = render_to_string("annotation/quality/_home_card.html", {"card": card, "project": project})

    assert card.progress.next_tier == "silver"
    assert [r.needed for r in card.progress.requirements] == [50, 20, 80, 75]
    assert card.calibration.status == "needed"
    assert f"/projects/{project.pk}/calibration/" in html
    assert 'data-calibration="needed"' in html and 'data-tier="bronze"' in html


def test_an_admin_tier_change_needs_a_reason_and_is_kept_in_the_history(client):
    expert = member(make_project_with_tasks(n_questions=1))
    profile = ExpertProfile.objects.get(user=expert)
    admin = AdminFactory()
    client.force_login(admin)
    url = f"/admin/experts/expertprofile/{profile.pk}/change/"
    form = {"credentials": "licensed counsellor", "languages": "zh", "weekly_capacity": 200, "status": "active",
            "status_reason": "", "tier": "gold", "max_concurrent_leases": 1,
            "tier_changes-TOTAL_FORMS": 0, "tier_changes-INITIAL_FORMS": 0}

    refused = client.post(url, form)
    refused_changes = TierChange.objects.filter(profile=profile).count()
    accepted = client.post(url, {**form, "tier_reason": "senior counsellor, reviewed by the lead"})

    assert refused.status_code == 200 and 'class="errorlist' in refused.content.decode()
    assert refused_changes == 0
    assert accepted.status_code == 302
    change = TierChange.objects.get(profile=profile)
    assert (change.from_tier, change.to_tier, change.changed_by) == ("bronze", "gold", admin)
    assert change.reason == "senior counsellor, reviewed by the lead"
    profile.refresh_from_db()
    assert (profile.tier, profile.credentials) == ("gold", "licensed counsellor")


def test_tier_at_submission_is_kept_on_the_assignment():
    project = make_project_with_tasks(n_questions=1)
    expert = member(project, tier="gold")

    _drain(project, expert)

    assert Assignment.objects.get(expert=expert).tier_at_submission == "gold"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_evaluation_with_nothing_to_change_never_waits_for_the_profile_a_claim_holds():
    """The evaluation after each submission locks the profile only to change the tier: a claim of the
    expert's (which holds the profile's lock while it draws) is not waited for, nor made to wait."""
    from django.db import connection

    from tests.support.faults import side_connection

    _promotion_rules(min_golden_items=100)
    project = make_golden_project(golden=12, regular=3, control_rate_pct=0)
    expert = calibrated(project)
    _drain(project, expert)
    profile = ExpertProfile.objects.get(user=expert)
    with side_connection() as side:  # the profile locked elsewhere, as a claim holds it
        side.execute(f"SELECT 1 FROM {profile._meta.db_table} WHERE id = %s FOR NO KEY UPDATE", [profile.pk])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
        try:
            assert expert_evaluate(expert=expert, now=timezone.now()) == []
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = 0")
    # A change still locks and is made.
    TierRule.objects.filter(kind="promote").update(min_golden_items=10)
    assert [(c.from_tier, c.to_tier) for c in expert_evaluate(expert=expert, now=timezone.now())] == [
        ("bronze", "silver")]
