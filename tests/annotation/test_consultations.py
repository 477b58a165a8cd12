"""Consultations: they open by the project's rules or by hand, vote blind, reveal, discuss and resolve
with provenance `adjudicated`; and nobody outside reads them."""
from datetime import timedelta

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.agreement.report import material_load, report_params
from annotation.agreement.sections import judge_section, leaderboard_section
from annotation.assignment.services import assignment_claim_next
from annotation.consultations.opening import consultation_open_by_expert, consultation_open_by_pm
from annotation.consultations.selectors import (
    consultation_access_for_user,
    consultation_case_material,
    consultation_view,
    invite_candidates,
)
from annotation.consultations.services import (
    consultation_invite,
    consultation_post,
    consultation_resolve,
    consultation_vote,
    consultations_reveal_due,
    rubric_suggestion_take,
)
from annotation.exchange.export import consensus_rows
from annotation.models import (
    Adjudication,
    Assignment,
    Consultation,
    ConsultationVote,
    ItemConsensus,
    RubricItemSuggestion,
    Task,
)
from annotation.projects.fields import settings_clean
from annotation.projects.services import project_settings_update
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.rejection import submission_reject_labels
from annotation.submission.services import labels_submit
from core.errors import Conflict, DomainError, Forbidden, NotFound
from experts.models import ExpertProfile, Notification, Tier
from rubrics.models import RubricItem, RubricVersion
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def _experts(project, n, tier=None):
    experts = [ExpertFactory() for _ in range(n)]
    for e in experts:
        project_add_member(project=project, user=e)
        if tier:
            ExpertProfile.objects.filter(user=e).update(tier=tier)
    return experts


def _submit(expert, project, votes, notes=None):
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    assert lease is not None
    items = rubric_items_for_task(lease.task)
    labels = {i.item_key: votes[i.position] for i in items}
    notes = {i.item_key: notes[i.position] for i in items if notes and i.position in notes}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, notes=notes, now=timezone.now())
    return lease


def _settings(project, **values):
    project_settings_update(project=project, values=values, changed_by=None, now=timezone.now())
    project.refresh_from_db()


def _tied_case(pm=None, notes=None):
    """Overlap 2, no extra experts: a 1-1 split on item 1 stays tied and opens a consultation."""
    pm = pm or PMFactory()
    project = make_project_with_tasks(n_questions=1, items_per_question=3, overlap=2, pm=pm)
    _settings(project, tie_extra_experts="off")
    a, b = _experts(project, 2)
    _submit(a, project, {1: 1, 2: 1, 3: 0}, notes=notes)
    _submit(b, project, {1: 0, 2: 1, 3: 0})
    return project, pm, a, b


def _access(user, consultation, now=None):
    return consultation_access_for_user(user, consultation.pk, now=now or timezone.now())


# ----------------------------------------------------------------------------- opening


def test_a_tie_the_extra_experts_could_not_break_opens_one_with_the_panel_and_its_notes():
    project, pm, a, b = _tied_case(notes={1: "用户没有明确求助，这条难判断。"})

    consultation = Consultation.objects.get()
    assert (consultation.trigger, consultation.status, consultation.rubric_item.position) == (
        "tie_unbroken", "open", 1)
    assert set(consultation.participants.values_list("user_id", flat=True)) == {a.pk, b.pk}
    assert consultation.deadline_at - consultation.opened_at == timedelta(hours=72)
    assert Notification.objects.filter(kind="consultation_vote", user__in=[a, b]).count() == 2
    view = consultation_view(_access(pm, consultation))
    assert view.notes == [{"author": ExpertProfile.objects.get(user=a).pseudonym,
                           "text": "用户没有明确求助，这条难判断。"}]


def test_the_submission_that_opens_a_consultation_reads_the_panels_labels_once():
    """The consensus and the consultation's panel come from one read of the task's labels."""
    project = make_project_with_tasks(n_questions=1, items_per_question=3, overlap=2)
    _settings(project, tie_extra_experts="off")
    a, b = _experts(project, 2)
    _submit(a, project, {1: 1, 2: 1, 3: 0})

    with CaptureQueriesContext(connection) as last:
        _submit(b, project, {1: 0, 2: 1, 3: 0})

    consultation = Consultation.objects.get()
    assert list(consultation.participants.order_by("pk").values_list("user_id", flat=True)) == [a.pk, b.pk]
    label_reads = [q["sql"] for q in last.captured_queries
                   if q["sql"].startswith("SELECT") and 'FROM "annotation_label"' in q["sql"]]
    assert len(label_reads) == 1, label_reads


def test_a_tie_with_an_extra_expert_still_to_come_opens_nothing_yet():
    project = make_project_with_tasks(n_questions=1, items_per_question=1, overlap=2)
    a, b = _experts(project, 2)
    _submit(a, project, {1: 1})
    _submit(b, project, {1: 0})

    assert Task.objects.get().status == "open"  # an extra expert is drawn first
    assert not Consultation.objects.exists()


@pytest.mark.parametrize(("split_item", "opens"), [(3, True), (2, False)])
def test_a_split_on_an_item_with_a_high_score_opens_one_and_a_low_score_split_does_not(split_item, opens):
    project = make_project_with_tasks(n_questions=1, items_per_question=3, overlap=3)
    _settings(project, consult_split_min_score=3)  # item 3 scores -3, items 1 and 2 score 1 and 2
    for expert, vote in zip(_experts(project, 3), [1, 0, 1], strict=True):
        _submit(expert, project, {1: 1, 2: 1, 3: 1} | {split_item: vote})

    opened = list(Consultation.objects.values_list("rubric_item__position", "trigger"))
    assert opened == ([(3, "score_split")] if opens else [])


def test_a_task_where_more_than_a_third_of_the_items_split_opens_one_per_split_item():
    project = make_project_with_tasks(n_questions=1, items_per_question=3, overlap=3)
    experts = _experts(project, 3)
    for expert, (one, two) in zip(experts, [(1, 1), (0, 0), (1, 1)], strict=True):
        _submit(expert, project, {1: one, 2: two, 3: 1})

    assert sorted(Consultation.objects.values_list("rubric_item__position", "trigger")) == [
        (1, "many_splits"), (2, "many_splits")]


@pytest.mark.parametrize("split_items", [3, 7])
def test_opening_many_consultations_takes_as_many_statements_as_opening_three(
        split_items, django_assert_max_num_queries):
    """The last submission opens one consultation per split item, each with its panel told to vote,
    in a fixed number of statements (before: six more per item)."""
    project = make_project_with_tasks(n_questions=1, items_per_question=8, overlap=3)
    experts = _experts(project, 3)
    agree = {p: 1 for p in range(1, 9)}
    _submit(experts[0], project, agree)
    _submit(experts[1], project, agree | {p: 0 for p in range(1, split_items + 1)})
    lease = assignment_claim_next(project=project, expert=experts[2], now=timezone.now())
    labels = {i.item_key: agree[i.position] for i in rubric_items_for_task(lease.task)}

    with django_assert_max_num_queries(22):  # 34 for three items and 58 for seven before
        labels_submit(expert=experts[2], assignment_id=lease.pk, labels=labels, now=timezone.now())

    opened = Consultation.objects.order_by("rubric_item__position")
    assert [c.rubric_item.position for c in opened] == list(range(1, split_items + 1))
    for consultation in opened:
        assert set(consultation.participants.values_list("user_id", flat=True)) == {e.pk for e in experts}
        link = reverse("consultation_detail", args=[consultation.pk])
        assert set(Notification.objects.filter(kind="consultation_vote", link=link)
                   .values_list("user_id", flat=True)) == {e.pk for e in experts}


def test_the_rules_never_open_a_second_consultation_on_an_item_that_had_one():
    """A rejection reopens the task and the new panel splits the same items again, and one more: only
    the new one gets a consultation (the items that had one come with the consensus's read of the labels)."""
    project = make_project_with_tasks(n_questions=1, items_per_question=3, overlap=3)
    pm, experts = PMFactory(), _experts(project, 4)
    leases = [_submit(e, project, {1: one, 2: two, 3: 1})
              for e, (one, two) in zip(experts, [(1, 1), (0, 0), (1, 1)], strict=False)]
    assert sorted(Consultation.objects.values_list("rubric_item__position", flat=True)) == [1, 2]

    submission_reject_labels(assignment=leases[2], reason_code="spam", text="", by=pm, now=NOW)
    _submit(experts[3], project, {1: 1, 2: 1, 3: 0})

    assert sorted(Consultation.objects.values_list("rubric_item__position", "trigger")) == [
        (1, "many_splits"), (2, "many_splits"), (3, "many_splits")]


def test_exactly_a_third_split_is_not_more_than_a_third():
    project = make_project_with_tasks(n_questions=1, items_per_question=3, overlap=3)
    for expert, one in zip(_experts(project, 3), [1, 0, 1], strict=True):
        _submit(expert, project, {1: one, 2: 1, 3: 1})

    assert not Consultation.objects.exists()


def test_rules_switched_off_open_nothing():
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, items_per_question=3, overlap=2, pm=pm)
    _settings(project, tie_extra_experts="off", consult_on_unbroken_tie="off", consult_on_many_splits="off")
    a, b = _experts(project, 2)
    _submit(a, project, {1: 1, 2: 1, 3: 0})
    _submit(b, project, {1: 0, 2: 0, 3: 0})

    assert not Consultation.objects.exists()


@pytest.mark.parametrize(("key", "bad"), [("consult_split_min_score", 0), ("consult_split_min_score", 101),
                                          ("consult_split_share_pct", 100), ("consult_deadline_h", 0),
                                          ("consult_deadline_h", "soon"), ("consult_show_judge", "maybe")])
def test_the_consultation_settings_refuse_values_outside_their_range(key, bad):
    with pytest.raises(DomainError) as err:
        settings_clean({key: bad})
    assert err.value.errors[0]["field"] == key


def test_the_settings_page_shows_and_saves_the_consultation_rules(client):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, pm=pm)
    client.force_login(pm)
    page = client.get(reverse("project_settings", args=[project.pk]), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert 'name="consult_split_min_score"' in page.content.decode()

    posted = {"name": project.name, "description": "", "overlap": 3, "lease_timeout_min": 45,
              "tie_extra_cap": 2, "tie_extra_experts": "on", "calibration_threshold_pct": 80,
              "calibration_size": 10, "calibration_retry_delay_s": 3600, "control_rate_pct": 5,
              "control_pause_below_pct": 60, "control_window": 10, "hard_min_tier": "silver",
              "consult_split_min_score": 8, "consult_split_share_pct": 50, "consult_deadline_h": 24,
              "consult_show_judge": ["off", "on"], "consult_on_unbroken_tie": "off"}
    client.post(reverse("project_settings", args=[project.pk]), posted)
    project.refresh_from_db()
    assert (project.consult_split_min_score, project.consult_split_share_pct, project.consult_deadline_h,
            project.consult_show_judge, project.consult_on_unbroken_tie) == (8, 50, 24, True, False)


def test_an_expert_asks_on_an_item_of_a_task_they_submitted_and_must_say_why():
    project = make_project_with_tasks(n_questions=1, items_per_question=2, overlap=2)
    a, b, outsider = _experts(project, 3)
    lease = _submit(a, project, {1: 1, 2: 1})
    item = RubricItem.objects.get(item_key="q0:2")

    with pytest.raises(DomainError) as err:
        consultation_open_by_expert(expert=a, assignment_id=lease.pk, rubric_item_id=item.pk, reason="  ", now=NOW)
    assert err.value.code == "consultation_reason"
    with pytest.raises(NotFound):
        consultation_open_by_expert(expert=outsider, assignment_id=lease.pk, rubric_item_id=item.pk,
                                    reason="unclear", now=NOW)
    first = consultation_open_by_expert(expert=a, assignment_id=lease.pk, rubric_item_id=item.pk,
                                        reason="“及时”没有定义", now=NOW)
    again = consultation_open_by_expert(expert=a, assignment_id=lease.pk, rubric_item_id=item.pk,
                                        reason="another reason", now=NOW)

    assert first.created and not again.created
    assert again.consultation.pk == first.consultation.pk
    assert (first.consultation.trigger, first.consultation.opening_reason) == ("expert", "“及时”没有定义")
    assert Consultation.objects.count() == 1


def test_a_pm_opens_on_any_item_and_another_projects_pm_cannot():
    project, pm, a, b = _tied_case()
    task = Task.objects.get()
    item = RubricItem.objects.get(item_key="q0:3")
    other_pm = PMFactory()
    make_project_with_tasks(n_questions=1, pm=other_pm)

    with pytest.raises(NotFound):
        consultation_open_by_pm(pm=other_pm, task_id=task.pk, rubric_item_id=item.pk, reason="", now=NOW)
    result = consultation_open_by_pm(pm=pm, task_id=task.pk, rubric_item_id=item.pk, reason="抽查", now=NOW)

    assert result.created and result.consultation.trigger == "pm"
    assert Consultation.objects.count() == 2


# ----------------------------------------------------------------------------- blind vote


def test_votes_stay_blind_until_everyone_has_voted_then_all_are_revealed():
    project, pm, a, b = _tied_case()
    consultation = Consultation.objects.get()

    consultation_vote(user=a, consultation=consultation, choice="hit", reason="共情到位", now=NOW)
    during = consultation_view(_access(b, consultation))
    assert during.votes == [] and not during.revealed and during.panel is None
    assert [p["voted"] for p in during.participants] == [True, False]
    assert consultation_view(_access(pm, consultation)).panel["hit_votes"] == 1  # the PM sees the panel's labels

    result = consultation_vote(user=b, consultation=consultation, choice="ambiguous", reason="两可", now=NOW)

    assert result.revealed
    consultation.refresh_from_db()
    assert consultation.status == "revealed"
    after = consultation_view(_access(a, consultation))
    assert sorted(v["choice"] for v in after.votes) == ["ambiguous", "hit"]
    assert (after.panel["hit_votes"], after.panel["total_votes"]) == (1, 2)
    assert Notification.objects.filter(kind="consultation_revealed").count() == 2


def test_a_passed_deadline_reveals_on_read_and_by_the_beat():
    project, pm, a, b = _tied_case()
    consultation = Consultation.objects.get()
    consultation_vote(user=a, consultation=consultation, choice="miss", reason="没有给建议", now=NOW)
    later = consultation.deadline_at + timedelta(minutes=1)

    access = _access(pm, consultation, now=later)

    assert access.consultation.status == "revealed"
    assert consultations_reveal_due(now=later) == 0  # already revealed: nothing twice
    assert Notification.objects.filter(kind="consultation_revealed").count() == 2


def test_the_beat_and_the_list_reveal_past_deadlines(client):
    project, pm, a, b = _tied_case()
    consultation = Consultation.objects.get()
    later = consultation.deadline_at + timedelta(seconds=1)

    assert consultations_reveal_due(now=consultation.deadline_at - timedelta(seconds=1)) == 0
    assert consultations_reveal_due(now=later) == 1
    consultation.refresh_from_db()
    assert consultation.status == "revealed"
    Consultation.objects.filter(pk=consultation.pk).update(status="open", revealed_at=None,
                                                          deadline_at=timezone.now() - timedelta(hours=1))
    client.force_login(pm)
    listing = client.get(reverse("consultation_list", args=[project.pk]), {"status": "revealed"})
    assert consultation.rubric_item.item_key in listing.content.decode()


def test_a_repeated_blind_vote_changes_nothing_and_another_choice_is_refused():
    project = make_project_with_tasks(n_questions=1, items_per_question=1, overlap=2)
    _settings(project, tie_extra_experts="off")
    a, b = _experts(project, 2)
    lease = _submit(a, project, {1: 1})
    _submit(b, project, {1: 0})
    consultation = Consultation.objects.get()
    consultation_vote(user=a, consultation=consultation, choice="hit", reason="是", now=NOW)

    again = consultation_vote(user=a, consultation=consultation, choice="hit", reason="是", now=NOW)
    with pytest.raises(Conflict) as err:
        consultation_vote(user=a, consultation=consultation, choice="miss", reason="改主意", now=NOW)

    assert not again.changed
    assert err.value.code == "consultation_voted"
    assert ConsultationVote.objects.count() == 1
    assert lease.task_id == consultation.task_id


def test_a_vote_needs_a_known_choice_and_a_reason_and_an_outsider_cannot_vote():
    project, pm, a, b = _tied_case()
    consultation = Consultation.objects.get()
    (outsider,) = _experts(project, 1)

    for choice, reason in [("maybe", "x"), ("hit", ""), (None, "x")]:
        with pytest.raises(DomainError):
            consultation_vote(user=a, consultation=consultation, choice=choice, reason=reason, now=NOW)
    with pytest.raises(Forbidden):
        consultation_vote(user=outsider, consultation=consultation, choice="hit", reason="x", now=NOW)
    assert not ConsultationVote.objects.exists()


def test_the_final_vote_changes_until_the_resolution():
    project, pm, a, b = _tied_case()
    consultation = Consultation.objects.get()
    consultation_vote(user=a, consultation=consultation, choice="hit", reason="1", now=NOW)
    consultation_vote(user=b, consultation=consultation, choice="miss", reason="2", now=NOW)

    consultation_vote(user=b, consultation=consultation, choice="miss", reason="还是不行", now=NOW)
    consultation_vote(user=b, consultation=consultation, choice="hit", reason="被说服了", now=NOW)

    final = ConsultationVote.objects.get(user=b, round=2)
    assert (final.choice, final.reason) == ("hit", "被说服了")
    consultation_resolve(pm=pm, consultation=consultation, outcome="hit", category="annotator_error",
                         text="用户在第二轮明确请求了建议", now=NOW)
    with pytest.raises(Conflict):
        consultation_vote(user=b, consultation=consultation, choice="miss", reason="x", now=NOW)


# ----------------------------------------------------------------------------- discussion


def _revealed(pm=None):
    project, pm, a, b = _tied_case(pm=pm)
    consultation = Consultation.objects.get()
    consultation_vote(user=a, consultation=consultation, choice="hit", reason="1", now=NOW)
    consultation_vote(user=b, consultation=consultation, choice="miss", reason="2", now=NOW)
    consultation.refresh_from_db()
    return project, pm, a, b, consultation


def test_nobody_posts_before_the_reveal():
    project, pm, a, b = _tied_case()
    consultation = Consultation.objects.get()
    with pytest.raises(Conflict) as err:
        consultation_post(user=a, consultation=consultation, text="先说一句", now=NOW)
    assert err.value.code == "consultation_not_revealed"


def test_a_post_notifies_whom_it_mentions_by_pseudonym_or_username_and_can_quote():
    project, pm, a, b, consultation = _revealed()
    b_name = ExpertProfile.objects.get(user=b).pseudonym

    first = consultation_post(user=a, consultation=consultation,
                              text=f"@{b_name} 你看第二轮，用户说“我该怎么办”。@{pm.username} @nobody", now=NOW)
    reply = consultation_post(user=b, consultation=consultation, text="同意", reply_to=first.pk,
                              quote="我该怎么办", now=NOW)

    assert set(first.mentioned.values_list("pk", flat=True)) == {b.pk, pm.pk}
    mention = Notification.objects.get(kind="mention", user=b)
    assert f"#post-{first.pk}" in mention.link
    assert (reply.reply_to_id, reply.quote) == (first.pk, "我该怎么办")
    with pytest.raises(NotFound):
        consultation_post(user=b, consultation=consultation, text="x", reply_to=999999, now=NOW)


def test_a_quote_that_is_not_in_the_post_becomes_its_opening_words():
    project, pm, a, b, consultation = _revealed()
    first = consultation_post(user=a, consultation=consultation, text="第一句话。第二句话。", now=NOW)
    reply = consultation_post(user=b, consultation=consultation, text="嗯", reply_to=first.pk,
                              quote="没说过的话", now=NOW)
    assert reply.quote == "第一句话。第二句话。"


def test_a_post_with_a_script_shows_as_text(client):
    project, pm, a, b, consultation = _revealed()
    consultation_post(user=a, consultation=consultation, text="<script>alert(1)</script>", now=NOW)
    client.force_login(b)

    page = client.get(reverse("consultation_detail", args=[consultation.pk])).content.decode()

    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


# ----------------------------------------------------------------------------- resolution


def test_resolving_sets_the_final_label_adjudicated_and_a_rejection_does_not_wipe_it():
    project, pm, a, b, consultation = _revealed()

    result = consultation_resolve(pm=pm, consultation=consultation, outcome="hit", category="annotator_error",
                                  text="用户明确求助", now=NOW)

    assert result.changed
    row = ItemConsensus.objects.get(rubric_item=consultation.rubric_item)
    assert (row.zone, row.majority, row.provenance) == ("tied", 1, "adjudicated")
    assert Notification.objects.filter(kind="consultation_resolved").count() == 2
    rejected = Assignment.objects.get(expert=a)
    submission_reject_labels(assignment=rejected, reason_code="spam", text="", by=pm, now=NOW)
    row = ItemConsensus.objects.get(rubric_item=consultation.rubric_item)
    assert (row.majority, row.provenance, row.total_votes) == (1, "adjudicated", 1)


def test_a_repeated_resolution_changes_nothing_and_another_one_is_refused():
    project, pm, a, b, consultation = _revealed()
    consultation_resolve(pm=pm, consultation=consultation, outcome="miss", category="ambiguous_text", text="t",
                         now=NOW)

    again = consultation_resolve(pm=pm, consultation=consultation, outcome="miss", category="ambiguous_text",
                                 text="t", now=NOW)
    with pytest.raises(Conflict):
        consultation_resolve(pm=pm, consultation=consultation, outcome="hit", category="ambiguous_text", text="t",
                             now=NOW)

    assert not again.changed
    assert Adjudication.objects.get().value == 0


def test_ambiguous_is_no_majority_and_is_left_out_of_judge_agreement_and_scores_with_its_count():
    project, pm, a, b, consultation = _revealed()
    consultation_resolve(pm=pm, consultation=consultation, outcome="ambiguous", category="ambiguous_text",
                         text="“边界感”两种读法都说得通", now=NOW)

    row = ItemConsensus.objects.get(rubric_item=consultation.rubric_item)
    assert (row.zone, row.majority, row.provenance) == ("ambiguous", None, "adjudicated")
    m = material_load(project=project, version=RubricVersion.objects.get())
    m.judge = np.ones(m.unit_task.size, np.int8)
    judge = judge_section(m, report_params(project))
    board = leaderboard_section(m, report_params(project))
    assert (judge["ambiguous_left_out"], judge["tied_left_out"]) == (1, 0)
    assert judge["overall_with_gate"]["n"] == 2
    assert board["ambiguous_left_out"] == 1


def test_an_adjudicated_tie_counts_in_judge_agreement_with_its_verdict():
    project, pm, a, b, consultation = _revealed()
    consultation_resolve(pm=pm, consultation=consultation, outcome="hit", category="judge_insight", text="t",
                         now=NOW)
    m = material_load(project=project, version=RubricVersion.objects.get())
    m.judge = np.ones(m.unit_task.size, np.int8)

    judge = judge_section(m, report_params(project))

    assert (judge["tied_left_out"], judge["ambiguous_left_out"]) == (0, 0)
    assert judge["overall_with_gate"]["n"] == 3


def test_the_export_row_of_the_item_says_adjudicated():
    project, pm, a, b, consultation = _revealed()
    consultation_resolve(pm=pm, consultation=consultation, outcome="miss", category="annotator_error", text="t",
                         now=NOW)

    rows = {r["rubric_item_id"]: r for r in consensus_rows(project=project)}

    row = rows[consultation.rubric_item.item_key]
    assert (row["provenance"], row["majority"], row["zone"]) == ("adjudicated", 0, "tied")


def test_a_guideline_gap_files_a_suggestion_taken_into_a_new_draft_with_one_click(client):
    project, pm, a, b, consultation = _revealed()
    with pytest.raises(DomainError) as err:
        consultation_resolve(pm=pm, consultation=consultation, outcome="ambiguous", category="guideline_gap",
                             text="t", suggested_text="", now=NOW)
    assert err.value.code == "suggestion_text"
    result = consultation_resolve(pm=pm, consultation=consultation, outcome="ambiguous", category="guideline_gap",
                                  text="准则没说", suggested_text="回应先确认用户的感受，再给出具体建议", now=NOW)
    suggestion = result.suggestion
    assert suggestion is not None and suggestion.status == "open"
    client.force_login(pm)
    page = client.get(reverse("rubric_draft", args=[project.pk])).content.decode()
    assert "回应先确认用户的感受" in page

    client.post(reverse("rubric_suggestion_take", args=[project.pk, suggestion.pk]))

    draft = RubricVersion.objects.get(status="draft")
    assert draft.items.get(item_key=consultation.rubric_item.item_key).content == "回应先确认用户的感受，再给出具体建议"
    suggestion.refresh_from_db()
    assert suggestion.status == "taken"
    with pytest.raises(Conflict):
        rubric_suggestion_take(project=project, suggestion_id=suggestion.pk, by=pm, now=NOW)


def test_the_case_material_has_the_problem_the_disagreement_the_discussion_and_the_reading():
    project, pm, a, b, consultation = _revealed()
    consultation_post(user=a, consultation=consultation, text="建议给得太早", now=NOW)
    consultation_resolve(pm=pm, consultation=consultation, outcome="miss", category="annotator_error",
                         text="先共情后建议", now=NOW)

    case = consultation_case_material(consultation)

    assert case["question_id"] == "q0" and case["item_key"] == consultation.rubric_item.item_key
    assert case["problem"]["item_text"] == consultation.rubric_item.content
    assert case["disagreement"]["blind"] == {"hit": 1, "miss": 1}
    assert [p["text"] for p in case["discussion"]] == ["建议给得太早"]
    assert case["agreed_reading"]["outcome"] == "miss" and case["agreed_reading"]["text"] == "先共情后建议"
    assert case["dimension"] == consultation.rubric_item.dimension.code


# ----------------------------------------------------------------------------- who sees what


def test_invited_seniors_come_first_and_one_who_may_still_judge_the_question_is_refused():
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, items_per_question=2, overlap=2, models=2, pm=pm)
    _settings(project, tie_extra_experts="off")
    a, b = _experts(project, 2)
    for _ in range(2):
        _submit(a, project, {1: 1, 2: 1})
        _submit(b, project, {1: 0, 2: 1})
    consultation = Consultation.objects.order_by("pk").first()
    (gold,) = _experts(project, 1, tier=Tier.GOLD)
    (bronze,) = _experts(project, 1)

    candidates = invite_candidates(consultation)
    assert [c["user_id"] for c in candidates] == [gold.pk, bronze.pk]
    # Both tasks of the question are complete: nobody may still be given one, so the invitation stands.
    assert consultation_invite(pm=pm, consultation=consultation, expert_id=gold.pk, now=NOW)
    assert not consultation_invite(pm=pm, consultation=consultation, expert_id=gold.pk, now=NOW)

    project2 = make_project_with_tasks(n_questions=1, items_per_question=1, overlap=2, pm=pm)
    _settings(project2, tie_extra_experts="off")
    c, d = _experts(project2, 2)
    _submit(c, project2, {1: 1})
    _submit(d, project2, {1: 0})
    busy_case = Consultation.objects.get(project=project2)
    _another_task_of_the_question(busy_case)
    (senior,) = _experts(project2, 1, tier=Tier.PLATINUM)
    with pytest.raises(Conflict) as err:
        consultation_invite(pm=pm, consultation=busy_case, expert_id=senior.pk, now=NOW)
    assert err.value.code == "consultation_invitee_busy"


def _another_task_of_the_question(consultation):
    question = consultation.task.response.question
    response = question.responses.create(project=consultation.project, model_name="late-model", text="另一个回答")
    return Task.objects.create(project=consultation.project, response=response,
                               rubric_version=consultation.task.rubric_version, overlap=2, shuffle_key=1)


def test_a_participant_who_may_still_judge_the_question_sees_a_clear_message_and_no_votes(client):
    project, pm, a, b = _tied_case()
    consultation = Consultation.objects.get()
    _another_task_of_the_question(consultation)
    client.force_login(a)

    page = client.get(reverse("consultation_detail", args=[consultation.pk]), HTTP_ACCEPT_LANGUAGE="en")

    assert page.status_code == 200
    assert "once you have submitted it" in page.content.decode()
    assert not consultation_view(_access(a, consultation)).shown
    with pytest.raises(Forbidden) as err:
        consultation_vote(user=a, consultation=consultation, choice="hit", reason="x", now=NOW)
    assert err.value.code == "consultation_busy"
    # Once they have submitted the other task, the case opens to them.
    _submit(a, project, {1: 1, 2: 1, 3: 1})
    assert consultation_view(_access(a, consultation)).shown


def _every_url(consultation):
    pages = [reverse(n, args=[consultation.pk]) for n in
             ("consultation_detail", "consultation_vote", "consultation_post", "consultation_invite",
              "consultation_reveal", "consultation_resolve")]
    api = [reverse(n, args=[consultation.pk]) for n in
           ("api-consultation", "api-consultation-vote", "api-consultation-post", "api-consultation-resolve")]
    return pages, api


def test_another_projects_users_and_non_participants_get_404_on_every_consultation_url(client, api):
    project, pm, a, b, consultation = _revealed()
    (outsider,) = _experts(project, 1)
    other_pm = PMFactory()
    other_project = make_project_with_tasks(n_questions=1, pm=other_pm)
    (other_expert,) = _experts(other_project, 1)
    pages, api_urls = _every_url(consultation)

    for user in (outsider, other_pm, other_expert):
        client.force_login(user)
        api.force_authenticate(user)
        for url in pages:
            method = client.get if url.endswith(f"/{consultation.pk}/") else client.post
            assert method(url, {"choice": "hit", "reason": "x", "text": "x"}).status_code == 404, (user, url)
        for url in api_urls:
            method = api.get if url.endswith(f"/{consultation.pk}/") else api.post
            assert method(url, {"choice": "hit", "reason": "x", "text": "x"}, format="json").status_code == 404
        assert client.get(reverse("consultation_list", args=[project.pk])).status_code == 404
    assert not ConsultationVote.objects.filter(user__in=[outsider, other_expert]).exists()
    assert consultation.posts.count() == 0


def test_an_expert_cannot_resolve_invite_or_reveal(client):
    project, pm, a, b = _tied_case()
    consultation = Consultation.objects.get()
    client.force_login(a)
    for name in ("consultation_resolve", "consultation_invite", "consultation_reveal"):
        assert client.post(reverse(name, args=[consultation.pk]), {"outcome": "hit", "category": "guideline_gap",
                                                                   "text": "x"}).status_code == 404
    consultation.refresh_from_db()
    assert consultation.status == "open"


# ----------------------------------------------------------------------------- pages and API


def test_the_pages_render_whole_and_as_fragments_in_chinese(client, django_assert_max_num_queries):
    project, pm, a, b, consultation = _revealed()
    consultation_post(user=a, consultation=consultation, text="第一条", now=NOW)
    client.force_login(pm)
    url = reverse("consultation_detail", args=[consultation.pk])

    with django_assert_max_num_queries(40):
        page = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans")
    fragment = client.get(url, HTTP_HX_REQUEST="true", HTTP_ACCEPT_LANGUAGE="zh-hans")
    listing = client.get(reverse("consultation_list", args=[project.pk]), {"status": "revealed"},
                         HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert page.status_code == fragment.status_code == listing.status_code == 200
    assert "会诊" in page.content.decode()
    assert "<html" not in fragment.content.decode() and 'id="consultation-case"' in fragment.content.decode()
    assert consultation.rubric_item.item_key in listing.content.decode()
    client.force_login(a)
    mine = client.get(reverse("my_consultations"), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert consultation.rubric_item.item_key in mine.content.decode()


def test_voting_posting_and_resolving_through_the_pages(client):
    project, pm, a, b = _tied_case()
    consultation = Consultation.objects.get()
    client.force_login(a)
    refused = client.post(reverse("consultation_vote", args=[consultation.pk]), {"choice": "hit", "reason": ""},
                          HTTP_HX_REQUEST="true")
    assert refused.status_code == 422
    client.post(reverse("consultation_vote", args=[consultation.pk]), {"choice": "hit", "reason": "是"})
    client.force_login(b)
    client.post(reverse("consultation_vote", args=[consultation.pk]), {"choice": "miss", "reason": "否"})
    client.post(reverse("consultation_post", args=[consultation.pk]), {"text": "讨论一下"})
    client.force_login(pm)
    client.post(reverse("consultation_resolve", args=[consultation.pk]),
                {"outcome": "hit", "category": "annotator_error", "text": "结论"})

    consultation.refresh_from_db()
    assert consultation.status == "resolved" and consultation.posts.count() == 1
    assert ConsultationVote.objects.count() == 2


def test_the_expert_asks_from_their_history(client):
    project = make_project_with_tasks(n_questions=1, items_per_question=2, overlap=2)
    (a,) = _experts(project, 1)
    lease = _submit(a, project, {1: 1, 2: 0})
    client.force_login(a)
    history = client.get(reverse("my_history")).content.decode()
    assert reverse("consultation_ask", args=[lease.pk]) in history
    item = RubricItem.objects.get(item_key="q0:1")

    refused = client.post(reverse("consultation_ask", args=[lease.pk]), {"item": item.pk, "reason": ""})
    done = client.post(reverse("consultation_ask", args=[lease.pk]), {"item": item.pk, "reason": "两种读法"})

    assert refused.status_code == 422
    assert done.status_code == 302
    assert Consultation.objects.get().opened_by == a


def test_the_pm_opens_one_from_the_units_page(client):
    project, pm, a, b = _tied_case()
    client.force_login(pm)
    page = client.get(reverse("quality_items", args=[project.pk])).content.decode()
    assert reverse("consultation_open_pm", args=[project.pk]) in page
    item = RubricItem.objects.get(item_key="q0:2")

    response = client.post(reverse("consultation_open_pm", args=[project.pk]),
                           {"task": Task.objects.get().pk, "item": item.pk})

    assert response.status_code == 302
    assert Consultation.objects.filter(rubric_item=item, trigger="pm").exists()


def test_the_api_lists_reads_votes_posts_and_resolves(api):
    project, pm, a, b = _tied_case()
    consultation = Consultation.objects.get()
    api.force_authenticate(a)
    listed = api.get(reverse("api-consultations", args=[project.pk])).json()
    assert [c["id"] for c in listed] == [consultation.pk]
    voted = api.post(reverse("api-consultation-vote", args=[consultation.pk]), {"choice": "hit", "reason": "是"},
                     format="json")
    assert voted.status_code == 200 and voted.json()["round"] == 1
    assert api.get(reverse("api-consultation", args=[consultation.pk])).json()["votes"] == []
    api.force_authenticate(b)
    assert api.post(reverse("api-consultation-vote", args=[consultation.pk]), {"choice": "miss", "reason": "否"},
                    format="json").json()["revealed"] is True
    posted = api.post(reverse("api-consultation-post", args=[consultation.pk]), {"text": f"@{pm.username} 请看"},
                      format="json")
    assert posted.status_code == 201 and posted.json()["mentioned"] == 1
    assert api.post(reverse("api-consultation-resolve", args=[consultation.pk]),
                    {"outcome": "hit", "category": "annotator_error", "text": "t"}, format="json").status_code == 404
    api.force_authenticate(pm)
    resolved = api.post(reverse("api-consultation-resolve", args=[consultation.pk]),
                        {"outcome": "hit", "category": "annotator_error", "text": "t"}, format="json")
    again = api.post(reverse("api-consultation-resolve", args=[consultation.pk]),
                     {"outcome": "hit", "category": "annotator_error", "text": "t"}, format="json")
    detail = api.get(reverse("api-consultation", args=[consultation.pk])).json()

    assert resolved.json()["changed"] is True and again.json()["changed"] is False
    assert detail["status"] == "resolved" and len(detail["votes"]) == 2
    assert RubricItemSuggestion.objects.count() == 0


def test_the_judges_label_and_reason_show_after_the_reveal_only_when_the_project_says_so():
    from annotation.models import JudgeLabel, JudgeRun, JudgeTaskResult

    project, pm, a, b = _tied_case()
    consultation = Consultation.objects.get()
    run = JudgeRun.objects.create(project=project, rubric_version=consultation.task.rubric_version, name="gpt-run",
                                  source="imported", status="done")
    JudgeLabel.objects.create(run=run, task=consultation.task, rubric_item=consultation.rubric_item, value=1)
    JudgeTaskResult.objects.create(run=run, task=consultation.task, status="done", reason="回应先共情再建议")
    _settings(project, consult_show_judge="on")
    assert consultation_view(_access(a, consultation)).judge is None  # blind: nothing yet

    consultation_vote(user=a, consultation=consultation, choice="hit", reason="1", now=NOW)
    consultation_vote(user=b, consultation=consultation, choice="miss", reason="2", now=NOW)

    judge = consultation_view(_access(a, consultation)).judge
    assert judge is not None and (judge["value"], judge["reason"]) == (1, "回应先共情再建议")
    _settings(project, consult_show_judge="off")
    assert consultation_view(_access(a, consultation)).judge is None


def test_the_notifications_read_in_the_readers_language():
    from django.utils import translation

    from experts.notifications import notification_text

    project, pm, a, b, consultation = _revealed()
    consultation_resolve(pm=pm, consultation=consultation, outcome="ambiguous", category="ambiguous_text",
                         text="t", now=NOW)
    resolved = Notification.objects.get(kind="consultation_resolved", user=a)

    assert "the item is ambiguous" in resolved.message
    with translation.override("zh-hans"):
        assert "条目有歧义" in notification_text(resolved)
        assert "盲投" in notification_text(Notification.objects.filter(kind="consultation_vote", user=a).first())


def test_an_admin_reads_any_consultation_and_the_admin_lists_them(admin_client, admin_user):
    project, pm, a, b = _tied_case()
    consultation = Consultation.objects.get()

    assert _access(admin_user, consultation).manages
    assert admin_client.get(reverse("consultation_detail", args=[consultation.pk])).status_code == 200
    assert admin_client.get("/admin/annotation/consultation/").status_code == 200


def test_the_dashboard_counts_the_items_left_out_as_ambiguous(client):
    from annotation.agreement.services import agreement_report_compute
    from annotation.models import JudgeLabel, JudgeRun

    project, pm, a, b, consultation = _revealed()
    consultation_resolve(pm=pm, consultation=consultation, outcome="ambiguous", category="ambiguous_text",
                         text="t", now=NOW)
    task = consultation.task
    run = JudgeRun.objects.create(project=project, rubric_version=task.rubric_version, name="judge", source="imported",
                                  status="done")
    JudgeLabel.objects.bulk_create(JudgeLabel(run=run, task=task, rubric_item=i, value=1)
                                   for i in rubric_items_for_task(task))
    agreement_report_compute(project=project, judge_run=run, now=timezone.now())
    client.force_login(pm)

    page = client.get(reverse("quality_dashboard", args=[project.pk]), {"run": run.pk, "tab": "zones"},
                      HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert "1 item a consultation found ambiguous is left out of the judge's agreement" in page
