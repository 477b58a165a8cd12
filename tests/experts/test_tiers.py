"""Tier rules on given numbers: promotion, demotion, progress to the next tier, the history, notifications."""
import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import override

from annotation.models import Task
from annotation.services import project_add_member
from core.errors import DomainError
from experts.models import ExpertProfile, Notification, TierChange, TierRule
from experts.notifications import notification_send, notification_text, notifications_mark_read
from experts.templatetags.tier_reasons import tier_reason
from experts.tiers import ExpertStats, tier_decide, tier_evaluate, tier_progress, tier_set
from payments.models import Period
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db

STRONG = ExpertStats(completed=60, golden_items=40, golden_correct=36, peer_items=100, peer_agree=80)


def _rules():
    return {(r.tier, r.kind): r for r in TierRule.objects.filter(is_active=True)}


def test_default_rules_are_seeded_for_every_tier_above_bronze():
    assert set(TierRule.objects.values_list("tier", "kind")) == {
        (t, k) for t in ("silver", "gold", "platinum") for k in ("promote", "demote")}


def test_a_bronze_expert_meeting_silver_is_promoted_one_step():
    decision = tier_decide(tier="bronze", stats=STRONG, rules=_rules())

    assert decision[0] == "silver"
    assert "60 tasks completed (needs 50)" in decision[2]


@pytest.mark.parametrize("stats", [
    ExpertStats(completed=49, golden_items=40, golden_correct=36, peer_items=100, peer_agree=80),
    ExpertStats(completed=60, golden_items=19, golden_correct=19, peer_items=100, peer_agree=80),
    ExpertStats(completed=60, golden_items=40, golden_correct=31, peer_items=100, peer_agree=80),
    ExpertStats(completed=60, golden_items=40, golden_correct=36, peer_items=100, peer_agree=74),
    ExpertStats(completed=60, golden_items=40, golden_correct=36, peer_items=0, peer_agree=0),
])
def test_any_threshold_short_means_no_promotion(stats):
    assert tier_decide(tier="bronze", stats=stats, rules=_rules()) is None


def test_demotion_needs_a_full_window_below_the_threshold():
    low = tuple([(1, 3)] * 20)
    almost = tuple([(1, 3)] * 19)
    fine = tuple([(3, 3)] * 20)

    demoted = tier_decide(tier="gold", stats=ExpertStats(0, 0, 0, 0, 0, recent_controls=low), rules=_rules())

    assert demoted[0] == "silver" and "below 75%" in demoted[2]
    assert tier_decide(tier="gold", stats=ExpertStats(0, 0, 0, 0, 0, recent_controls=almost), rules=_rules()) is None
    assert tier_decide(tier="gold", stats=ExpertStats(0, 0, 0, 0, 0, recent_controls=fine), rules=_rules()) is None
    assert tier_decide(tier="bronze", stats=ExpertStats(0, 0, 0, 0, 0, recent_controls=low), rules=_rules()) is None


def test_an_inactive_rule_does_nothing():
    TierRule.objects.filter(tier="silver", kind="promote").update(is_active=False)

    assert tier_decide(tier="bronze", stats=STRONG, rules=_rules()) is None


def test_evaluation_climbs_while_rules_are_met_and_records_each_step():
    expert = ExpertFactory()
    veteran = ExpertStats(completed=5000, golden_items=500, golden_correct=480, peer_items=900, peer_agree=850)

    changes = tier_evaluate(user=expert, stats=veteran, now=timezone.now())

    assert [(c.from_tier, c.to_tier) for c in changes] == [("bronze", "silver"), ("silver", "gold"),
                                                           ("gold", "platinum")]
    assert ExpertProfile.objects.get(user=expert).tier == "platinum"
    assert Notification.objects.filter(user=expert, kind="tier_changed").count() == 3


def test_progress_names_what_the_next_tier_needs():
    stats = ExpertStats(completed=25, golden_items=20, golden_correct=18, peer_items=0, peer_agree=0)

    with override("en"):
        progress = tier_progress(tier="bronze", stats=stats)

    assert progress.next_tier == "silver"
    rows = {r.label: (r.current, r.needed, r.met, r.progress_pct) for r in progress.requirements}
    assert rows["Tasks completed"] == (25, 50, False, 50)
    assert rows["Golden accuracy"] == (90.0, 80, True, 100)
    assert rows["Agreement with peers"] == (None, 75, False, 0)
    assert tier_progress(tier="platinum", stats=stats).next_tier is None


def test_a_manual_change_needs_a_reason_and_the_history_is_its_own_record():
    expert = ExpertFactory()
    profile = ExpertProfile.objects.get(user=expert)

    with pytest.raises(DomainError):
        tier_set(profile=profile, to_tier="gold", reason=" ", by=None, now=timezone.now())
    change = tier_set(profile=profile, to_tier="gold", reason="reviewed", by=None, now=timezone.now())
    same = tier_set(profile=profile, to_tier="gold", reason="again", by=None, now=timezone.now())

    assert (change.from_tier, change.to_tier, change.reason) == ("bronze", "gold", "reviewed")
    assert same is None
    with pytest.raises(IntegrityError), transaction.atomic():
        TierChange.objects.create(profile=profile, from_tier="gold", to_tier="gold", reason="x",
                                  changed_at=timezone.now())


def test_rule_thresholds_are_checked_by_the_database():
    with pytest.raises(IntegrityError), transaction.atomic():
        TierRule.objects.filter(tier="silver", kind="promote").update(min_golden_accuracy_pct=120)
    with pytest.raises(IntegrityError), transaction.atomic():
        TierRule.objects.create(tier="bronze", kind="promote")


def test_notifications_render_in_the_readers_language_and_are_marked_read():
    expert = ExpertFactory()
    notification_send(users=[expert], kind="tier_changed", now=timezone.now(),
                      params={"from_tier": "bronze", "to_tier": "silver", "reason": "well done"})
    note = Notification.objects.get(user=expert)

    with override("en"):
        english = notification_text(note)

    assert note.message == english == "Your tier changed from Bronze to Silver: well done"
    assert notifications_mark_read(user=expert, now=timezone.now()) == 1
    assert notifications_mark_read(user=expert, now=timezone.now()) == 0


def test_an_automatic_tier_reason_is_stored_as_a_code_and_shown_in_the_readers_language():
    expert = ExpertFactory()

    changes = tier_evaluate(user=expert, stats=STRONG, now=timezone.now())
    change = TierChange.objects.get(pk=changes[0].pk)
    note = Notification.objects.filter(user=expert).order_by("pk").first()
    with override("zh-hans"):
        reason_zh = tier_reason(change)
        note_zh = notification_text(note)
    with override("en"):
        reason_en = tier_reason(change)

    assert change.reason_code == "promote_rules_met" and change.reason_params["completed"] == 60
    assert "60 tasks completed (needs 50)" in change.reason and reason_en == change.reason
    assert "已完成 60 个任务（要求 50 个）" in reason_zh and "tasks" not in reason_zh
    assert "已完成 60 个任务" in note_zh and "tasks completed" not in note_zh


def test_an_old_tier_change_without_a_code_keeps_its_text_and_a_manual_one_its_words():
    expert = ExpertFactory()
    profile = ExpertProfile.objects.get(user=expert)
    manual = tier_set(profile=profile, to_tier="gold", reason="reviewed by the lead", by=None, now=timezone.now())
    old = TierChange.objects.create(profile=profile, from_tier="gold", to_tier="silver", reason="old English text",
                                    changed_at=timezone.now())

    with override("zh-hans"):
        assert tier_reason(manual) == "reviewed by the lead"
        assert tier_reason(old) == "old English text"
    assert manual.reason_code == "" and manual.reason_params == {}


def test_the_pm_reads_an_automatic_tier_reason_in_chinese_on_the_experts_page(client):
    expert, pm = ExpertFactory(), PMFactory()
    project = make_project_with_tasks(n_questions=1)
    project_add_member(project=project, user=expert)
    project_add_member(project=project, user=pm)
    tier_evaluate(user=expert, stats=STRONG, now=timezone.now())
    client.force_login(pm)

    page = client.get(f"/projects/{project.pk}/experts/{expert.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert page.status_code == 200
    assert "已完成 60 个任务（要求 50 个）" in page.content.decode()
    assert "tasks completed" not in page.content.decode()


def test_a_notification_is_opened_with_a_link_not_offered_as_a_task_and_unread_ones_say_so(client):
    expert = ExpertFactory()
    notification_send(users=[expert], kind="tier_changed", now=timezone.now(), link="/me/portrait/",
                      params={"from_tier": "bronze", "to_tier": "silver", "reason": "reviewed"})
    client.force_login(expert)

    page = client.get("/notifications/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    opened = client.get(f"/notifications/{Notification.objects.get(user=expert).pk}/open/")

    assert f'<a href="/notifications/{Notification.objects.get(user=expert).pk}/open/">查看</a>' in page
    assert "未读" in page and "可领取" not in page
    assert opened.status_code == 302 and opened.url == "/me/portrait/"
    assert Notification.objects.get(user=expert).read_at is not None


@pytest.mark.parametrize(("label", "chinese"), [
    ("period", "进行中"), ("task", "可领取"),
])
def test_open_means_in_progress_for_a_period_and_available_for_a_task(label, chinese):
    choice = {"period": Period.Status.OPEN, "task": Task.Status.OPEN}[label]
    with override("zh-hans"):
        assert str(choice.label) == chinese
