"""Reveal after submission: an expert who submitted sees the judge's label and reason where they differ,
revises once with a reason; first and revised labels are both kept; consensus, reports and exports say
which they use, and the report shows agreement before and after the reveal.

The hand-checked world (one task, three items, panel of three, judge [1, 1, 0]):

    E1 [1, 0, 1]   E2 [0, 0, 1]   E3 [0, 1, 0]    first majority [0, 0, 1]: judge agrees on 0 of 3
    E2 revises item 1 to the judge's 1            revised majority [1, 0, 1]: judge agrees on 1 of 3
"""
import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections
from django.utils import timezone

from annotation.agreement.services import agreement_report_compute
from annotation.exchange.export import COLUMNS, consensus_rows
from annotation.exchange.export_formats import consensus_export
from annotation.models import (
    Assignment,
    ItemConsensus,
    JudgeLabel,
    JudgeRun,
    JudgeTaskResult,
    Label,
    LabelRevision,
    Project,
    ProjectSettingChange,
    RevealRound,
    Task,
)
from annotation.models.reveal import REASON_MAX
from annotation.projects.services import project_settings_update
from annotation.reveal.services import consensus_recompute_project, reveal_revise
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, NotFound
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

T0 = datetime(2026, 3, 3, 1, 0, tzinfo=UTC)
PANEL = [[1, 0, 1], [0, 0, 1], [0, 1, 0]]
JUDGE = [1, 1, 0]
REASON = "The reply does name the tiredness in its first sentence; I missed it."


def _submit(task: Task, expert, values: list[int], at: datetime) -> Assignment:
    Task.objects.filter(pk=task.pk).update(live_count=task.live_count + 1)
    task.refresh_from_db()
    assignment = Assignment.objects.create(task=task, expert=expert, slot=task.live_count,
                                           leased_at=at - timedelta(seconds=90), expires_at=at + timedelta(hours=1))
    items = rubric_items_for_task(task)
    labels_submit(expert=expert, assignment_id=assignment.pk,
                  labels={item.item_key: v for item, v in zip(items, values)}, now=at)
    assignment.refresh_from_db()
    return assignment


def build(*, reveal: bool = True, judge: bool = True, panel=PANEL):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, items_per_question=3, models=1, pm=pm)
    Project.objects.filter(pk=project.pk).update(judge_reveal=reveal)
    project.refresh_from_db()
    experts = [ExpertFactory() for _ in panel]
    for expert in experts:
        project_add_member(project=project, user=expert)
    task = Task.objects.get(project=project)
    assignments = [_submit(task, expert, values, T0 + timedelta(minutes=i))
                   for i, (expert, values) in enumerate(zip(experts, panel))]
    run = None
    if judge:
        run = JudgeRun.objects.create(project=project, rubric_version=task.rubric_version, name="judge-a",
                                      source=JudgeRun.Source.IMPORTED, status=JudgeRun.Status.DONE)
        JudgeLabel.objects.bulk_create(JudgeLabel(run=run, task=task, rubric_item=item, value=v)
                                       for item, v in zip(rubric_items_for_task(task), JUDGE))
        JudgeTaskResult.objects.create(run=run, task=task, status=JudgeTaskResult.Status.DONE,
                                       reason="The reply names the fatigue (item 1) and asks an open question.")
    return project, pm, experts, assignments, task, run


@pytest.fixture
def world(db):
    return build()


@pytest.fixture(autouse=True)
def _english(client):
    client.cookies.load({"django_language": "en"})


def _item_keys(task: Task) -> list[str]:
    return [item.item_key for item in rubric_items_for_task(task)]


def _consensus(task: Task) -> list[tuple[int, int | None]]:
    return list(ItemConsensus.objects.filter(task=task).order_by("rubric_item__position")
                .values_list("hit_votes", "majority"))


# --- the page ---------------------------------------------------------------------------------------


def test_the_expert_sees_the_items_where_they_differ_with_the_judges_label_and_reason(
        client, world, django_assert_max_num_queries):
    project, _pm, experts, assignments, task, _run = world
    client.force_login(experts[1])

    with django_assert_max_num_queries(12):
        page = client.get(f"/assignments/{assignments[1].pk}/reveal/")

    text = page.content.decode()
    assert page.status_code == 200
    assert "agree on 0 items and differ on 3" in text
    assert "names the fatigue" in text
    assert text.count('name="change-') == 3
    assert "blindtest" not in text and "model-0" not in text


def test_an_expert_who_agrees_on_an_item_is_not_offered_it(client, world):
    _project, _pm, experts, assignments, task, _run = world
    client.force_login(experts[2])

    text = client.get(f"/assignments/{assignments[2].pk}/reveal/").content.decode()

    keys = _item_keys(task)
    assert f'name="change-{keys[0]}"' in text
    assert f'name="change-{keys[1]}"' not in text and f'name="change-{keys[2]}"' not in text


def test_the_page_says_plainly_when_the_judge_has_not_judged_the_task(client, db):
    _project, _pm, experts, assignments, _task, _run = build(judge=False)
    client.force_login(experts[0])

    page = client.get(f"/assignments/{assignments[0].pk}/reveal/")

    assert page.status_code == 200
    assert "The judge has not judged this task yet" in page.content.decode()
    with pytest.raises(Conflict) as refused:
        reveal_revise(expert=experts[0], assignment_id=assignments[0].pk, changes={}, now=T0)
    assert refused.value.code == ErrorCode.REVEAL_NO_JUDGE


def test_after_submitting_the_expert_gets_a_link_to_compare_and_the_history_has_it_too(client, world):
    _project, _pm, experts, assignments, _task, _run = world
    client.force_login(experts[0])

    done = client.get(f"/assignments/{assignments[0].pk}/").content.decode()
    history = client.get("/me/history/").content.decode()

    assert f"/assignments/{assignments[0].pk}/reveal/" in done
    assert "Compare with the judge" in done
    assert f"/assignments/{assignments[0].pk}/reveal/" in history


def test_no_link_when_the_project_does_not_reveal_the_judge(client, db):
    _project, _pm, experts, assignments, _task, _run = build(reveal=False)
    client.force_login(experts[0])

    done = client.get(f"/assignments/{assignments[0].pk}/").content.decode()

    assert "/reveal/" not in done


# --- access -----------------------------------------------------------------------------------------


def test_another_experts_assignment_is_a_404_and_writes_nothing(client, world):
    _project, _pm, experts, assignments, task, _run = world
    client.force_login(experts[0])
    key = _item_keys(task)[0]

    seen = client.get(f"/assignments/{assignments[1].pk}/reveal/")
    posted = client.post(f"/assignments/{assignments[1].pk}/reveal/", {f"change-{key}": "on",
                                                                      f"reason-{key}": REASON})

    assert (seen.status_code, posted.status_code) == (404, 404)
    assert not RevealRound.objects.exists() and not LabelRevision.objects.exists()


def test_with_the_reveal_off_the_page_is_a_404_and_the_service_refuses(client, db):
    _project, _pm, experts, assignments, task, _run = build(reveal=False)
    client.force_login(experts[1])

    assert client.get(f"/assignments/{assignments[1].pk}/reveal/").status_code == 404
    with pytest.raises(NotFound):
        reveal_revise(expert=experts[1], assignment_id=assignments[1].pk,
                      changes={_item_keys(task)[0]: REASON}, now=T0)
    assert not LabelRevision.objects.exists()


def test_a_rejected_submission_is_refused_with_its_reason(client, world):
    _project, _pm, experts, assignments, task, _run = world
    Assignment.objects.filter(pk=assignments[1].pk).update(status=Assignment.Status.REJECTED, rejected_at=T0,
                                                           rejected_reason=Assignment.RejectReason.SPAM)
    client.force_login(experts[1])

    page = client.get(f"/assignments/{assignments[1].pk}/reveal/")

    assert page.status_code == 409
    assert "was rejected" in page.content.decode()
    with pytest.raises(Conflict) as refused:
        reveal_revise(expert=experts[1], assignment_id=assignments[1].pk,
                      changes={_item_keys(task)[0]: REASON}, now=T0)
    assert refused.value.code == ErrorCode.REVEAL_REJECTED
    assert not LabelRevision.objects.exists()


def test_a_lease_not_yet_submitted_is_refused(db):
    project = make_project_with_tasks(n_questions=1, items_per_question=3, models=1)
    Project.objects.filter(pk=project.pk).update(judge_reveal=True)
    expert = ExpertFactory()
    task = Task.objects.get(project=project)
    lease = Assignment.objects.create(task=task, expert=expert, slot=1, leased_at=T0,
                                      expires_at=T0 + timedelta(hours=1))

    with pytest.raises(Conflict) as refused:
        reveal_revise(expert=expert, assignment_id=lease.pk, changes={}, now=T0)

    assert refused.value.code == ErrorCode.REVEAL_NOT_SUBMITTED


# --- revising once ----------------------------------------------------------------------------------


def test_a_revision_keeps_the_first_label_and_records_the_judge_label_shown_and_the_reason(client, world):
    _project, _pm, experts, assignments, task, run = world
    key = _item_keys(task)[0]
    client.force_login(experts[1])

    done = client.post(f"/assignments/{assignments[1].pk}/reveal/", {f"change-{key}": "on",
                                                                    f"reason-{key}": f"  {REASON}  "})

    label = Label.objects.get(assignment=assignments[1], rubric_item__item_key=key)
    revision = label.revision
    assert done.status_code == 302
    assert label.value == 0  # the first label, for ever
    assert (revision.value, revision.judge_value, revision.judge_run_id, revision.reason) == (1, 1, run.pk, REASON)
    assert RevealRound.objects.get(assignment=assignments[1]).items_differing == 3
    page = client.get(done.url).content.decode()
    assert "You revised 1 label" in page and 'name="change-' not in page  # read-only now


def test_an_empty_reason_is_refused_with_a_clear_message_and_nothing_is_written(client, world):
    _project, _pm, experts, assignments, task, _run = world
    keys = _item_keys(task)
    client.force_login(experts[1])

    page = client.post(f"/assignments/{assignments[1].pk}/reveal/", {
        f"change-{keys[0]}": "on", f"reason-{keys[0]}": "   ", f"change-{keys[1]}": "on",
        f"reason-{keys[1]}": REASON})

    text = page.content.decode()
    assert page.status_code == 422
    assert "1 change needs attention; nothing was saved." in text
    assert "Say why you change this label." in text
    assert REASON in text  # what was typed stays
    assert not RevealRound.objects.exists() and not LabelRevision.objects.exists()


def test_a_too_long_reason_and_an_item_the_expert_agreed_on_are_refused(world):
    _project, _pm, experts, assignments, task, _run = world
    keys = _item_keys(task)

    with pytest.raises(DomainError) as refused:
        reveal_revise(expert=experts[2], assignment_id=assignments[2].pk,
                      changes={keys[0]: "x" * (REASON_MAX + 1), keys[1]: REASON}, now=T0)

    assert refused.value.code == ErrorCode.REVEAL_INVALID
    assert sorted(e["code"] for e in refused.value.errors) == ["revision_item_unknown", "revision_reason_too_long"]
    assert not RevealRound.objects.exists()


def test_a_repeat_of_the_same_round_changes_nothing_and_a_different_second_round_is_refused(world):
    _project, _pm, experts, assignments, task, _run = world
    keys = _item_keys(task)
    first = reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes={keys[0]: REASON}, now=T0)

    again = reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes={keys[0]: REASON},
                          now=T0 + timedelta(minutes=1))
    with pytest.raises(Conflict) as refused:
        reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes={keys[1]: REASON},
                      now=T0 + timedelta(minutes=2))

    assert (first.created, again.created, again.round.pk) == (True, False, first.round.pk)
    assert refused.value.code == ErrorCode.REVEAL_ALREADY_REVISED
    assert LabelRevision.objects.count() == 1


def test_keeping_every_label_closes_the_round_too(world):
    _project, _pm, experts, assignments, task, _run = world

    kept = reveal_revise(expert=experts[2], assignment_id=assignments[2].pk, changes={}, now=T0)

    with pytest.raises(Conflict):
        reveal_revise(expert=experts[2], assignment_id=assignments[2].pk, changes={_item_keys(task)[0]: REASON},
                      now=T0)
    assert (kept.created, kept.revised, LabelRevision.objects.count()) == (True, 0, 0)


@pytest.mark.django_db(transaction=True)
def test_two_rounds_sent_at_once_write_one():
    _project, _pm, experts, assignments, task, _run = build()
    keys = _item_keys(task)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def revise(changes):
        try:
            barrier.wait()
            result = reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes=changes,
                                   now=timezone.now())
            outcomes.append("created" if result.created else "replayed")
        except Conflict as exc:
            outcomes.append(exc.code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=revise, args=({keys[0]: REASON},)),
               threading.Thread(target=revise, args=({keys[1]: REASON},))]
    [t.start() for t in threads]
    [t.join() for t in threads]

    assert sorted(outcomes) == ["created", "reveal_already_revised"]
    assert RevealRound.objects.count() == 1 and LabelRevision.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_same_round_sent_twice_at_once_is_recorded_once():
    _project, _pm, experts, assignments, task, _run = build()
    key = _item_keys(task)[0]
    barrier = threading.Barrier(2)
    outcomes: list[bool] = []

    def revise():
        try:
            barrier.wait()
            outcomes.append(reveal_revise(expert=experts[1], assignment_id=assignments[1].pk,
                                          changes={key: REASON}, now=timezone.now()).created)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=revise) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]

    assert sorted(outcomes) == [False, True]
    assert LabelRevision.objects.count() == 1


# --- consensus --------------------------------------------------------------------------------------


def test_consensus_counts_first_labels_by_default(world):
    _project, _pm, experts, assignments, task, _run = world

    reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes={_item_keys(task)[0]: REASON}, now=T0)

    assert _consensus(task) == [(1, 0), (1, 0), (2, 1)]


def test_a_revision_in_a_project_counting_revised_labels_rewrites_the_consensus_at_once(world):
    project, _pm, experts, assignments, task, _run = world
    Project.objects.filter(pk=project.pk).update(consensus_labels="revised")

    reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes={_item_keys(task)[0]: REASON}, now=T0)

    assert _consensus(task) == [(2, 1), (1, 0), (2, 1)]


def test_changing_the_setting_rewrites_every_tasks_consensus_and_is_recorded(
        world, django_capture_on_commit_callbacks):
    project, pm, experts, assignments, task, _run = world
    reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes={_item_keys(task)[0]: REASON}, now=T0)

    with django_capture_on_commit_callbacks(execute=True):
        project_settings_update(project=project, values={"consensus_labels": "revised"}, changed_by=pm, now=T0)
    revised = _consensus(task)
    with django_capture_on_commit_callbacks(execute=True):
        project_settings_update(project=project, values={"consensus_labels": "first"}, changed_by=pm, now=T0)

    assert revised == [(2, 1), (1, 0), (2, 1)]
    assert _consensus(task) == [(1, 0), (1, 0), (2, 1)]
    assert list(ProjectSettingChange.objects.filter(project=project, setting="consensus_labels")
                .order_by("id").values_list("old_value", "new_value")) == [("first", "revised"), ("revised", "first")]
    # Idempotent: a second run writes the same rows.
    assert consensus_recompute_project(project_id=project.pk, now=T0) == 1
    assert _consensus(task) == [(1, 0), (1, 0), (2, 1)]


def test_a_bad_choice_of_labels_is_refused_and_changes_nothing(world):
    project, pm, *_ = world

    with pytest.raises(DomainError) as refused:
        project_settings_update(project=project, values={"consensus_labels": "latest"}, changed_by=pm, now=T0)

    project.refresh_from_db()
    assert refused.value.errors[0]["field"] == "consensus_labels"
    assert project.consensus_labels == "first"


# --- reports ----------------------------------------------------------------------------------------


def test_the_report_states_its_labels_and_shows_agreement_before_and_after_the_reveal(world):
    project, _pm, experts, assignments, task, _run = world
    reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes={_item_keys(task)[0]: REASON}, now=T0)
    reveal_revise(expert=experts[2], assignment_id=assignments[2].pk, changes={}, now=T0)

    payload = agreement_report_compute(project=project, now=T0 + timedelta(hours=1)).payload

    reveal = payload["reveal"]
    assert payload["labels_used"] == "first"
    assert (reveal["labels_revised"], reveal["toward_judge_shown"], reveal["toward_reported_judge"],
            reveal["units_revised"], reveal["majority_changed"]) == (1, 1, 1, 1, 1)
    assert (reveal["before"]["overall"]["n"], reveal["before"]["overall"]["agreement"]) == (3, 0.0)
    assert (reveal["after"]["overall"]["n"], reveal["after"]["overall"]["agreement"]) == (3, 0.3333)
    # The report's own headline is the side of the labels it used, to the digit.
    assert payload["judge"]["overall"] == reveal["before"]["overall"]


def test_a_report_on_revised_labels_says_so_and_its_headline_is_the_after_figure(world):
    project, _pm, experts, assignments, task, _run = world
    Project.objects.filter(pk=project.pk).update(consensus_labels="revised")
    reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes={_item_keys(task)[0]: REASON}, now=T0)

    payload = agreement_report_compute(project=Project.objects.get(pk=project.pk), now=T0 + timedelta(hours=1)).payload

    assert payload["labels_used"] == "revised"
    assert payload["judge"]["overall"] == payload["reveal"]["after"]["overall"]
    assert payload["judge"]["overall"]["agreement"] == 0.3333


def test_without_revisions_the_report_has_no_before_and_after(world):
    project, *_ = world

    payload = agreement_report_compute(project=project, now=T0 + timedelta(hours=1)).payload

    assert (payload["labels_used"], payload["reveal"]) == ("first", None)


def test_the_dashboard_states_the_labels_used_and_shows_before_and_after(client, world):
    project, pm, experts, assignments, task, _run = world
    reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes={_item_keys(task)[0]: REASON}, now=T0)
    agreement_report_compute(project=project, now=T0 + timedelta(hours=1))
    client.force_login(pm)

    judge_tab = client.get(f"/projects/{project.pk}/dashboard/?tab=judge").content.decode()
    overview = client.get(f"/projects/{project.pk}/dashboard/").content.decode()

    assert "This report uses the experts&#x27; first labels" in overview
    assert "Agreement before and after the reveal" in judge_tab
    assert "experts revised 1 label" in judge_tab
    assert "0.0%" in judge_tab and "33.3%" in judge_tab


# --- exports ----------------------------------------------------------------------------------------


def test_the_export_states_its_labels_and_carries_first_and_revised_values_with_the_reason(world):
    project, _pm, experts, assignments, task, _run = world
    reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes={_item_keys(task)[0]: REASON}, now=T0)

    first = list(consensus_rows(project=project))
    Project.objects.filter(pk=project.pk).update(consensus_labels="revised")
    revised = list(consensus_rows(project=Project.objects.get(pk=project.pk)))

    seat = first[0]["labels"][1]
    assert "labels_used" in COLUMNS
    assert (first[0]["labels_used"], revised[0]["labels_used"]) == ("first", "revised")
    assert (seat["label"], seat["first_label"], seat["revised_label"], seat["revision_reason"]) == (0, 0, 1, REASON)
    assert revised[0]["labels"][1]["label"] == 1
    assert first[0]["labels"][0]["revised_label"] is None
    assert (revised[0]["hit_votes"], revised[0]["majority"]) == (1, 0)  # the stored consensus until recomputed


def test_the_csv_and_parquet_exports_hold_the_label_source(world):
    import io

    import pyarrow.parquet as pq

    project, _pm, experts, assignments, task, _run = world
    reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes={_item_keys(task)[0]: REASON}, now=T0)

    csv_text = b"".join(consensus_export(rows=consensus_rows(project=project), fmt="csv")).decode("utf-8-sig")
    table = pq.read_table(io.BytesIO(b"".join(consensus_export(rows=consensus_rows(project=project), fmt="parquet"))))

    header = csv_text.splitlines()[0].split(",")
    assert header[-1] == "labels_used"
    labels = table.column("labels").to_pylist()[0]
    assert labels[1]["revision_reason"] == REASON and labels[1]["first_label"] == 0
    assert table.column("labels_used").to_pylist()[0] == "first"
    assert json.loads(csv_text.splitlines()[1].split(",", 1)[0]) == task.pk


# --- settings ---------------------------------------------------------------------------------------


def test_the_settings_page_shows_both_settings(client, world):
    project, pm, *_ = world
    client.force_login(pm)

    page = client.get(f"/projects/{project.pk}/settings/").content.decode()

    assert "labels to experts after they submit" in page
    assert 'name="consensus_labels"' in page
    assert 'value="revised"' in page


def test_a_closed_round_keeps_showing_the_run_it_was_revised_against(client, world):
    project, _pm, experts, assignments, task, run = world
    reveal_revise(expert=experts[1], assignment_id=assignments[1].pk, changes={_item_keys(task)[0]: REASON}, now=T0)
    newer = JudgeRun.objects.create(project=project, rubric_version=task.rubric_version, name="judge-b",
                                    source=JudgeRun.Source.IMPORTED, status=JudgeRun.Status.DONE)
    JudgeLabel.objects.bulk_create(JudgeLabel(run=newer, task=task, rubric_item=item, value=0)
                                   for item in rubric_items_for_task(task))
    JudgeTaskResult.objects.create(run=newer, task=task, status=JudgeTaskResult.Status.DONE, reason="Nothing fits.")
    client.force_login(experts[1])

    text = client.get(f"/assignments/{assignments[1].pk}/reveal/").content.decode()

    assert "names the fatigue" in text and "Nothing fits." not in text
    assert "You revised 1 label" in text


def test_the_newest_finished_run_is_the_one_shown_before_revising(client, world):
    project, _pm, experts, assignments, task, _run = world
    newer = JudgeRun.objects.create(project=project, rubric_version=task.rubric_version, name="judge-b",
                                    source=JudgeRun.Source.IMPORTED, status=JudgeRun.Status.DONE)
    JudgeLabel.objects.bulk_create(JudgeLabel(run=newer, task=task, rubric_item=item, value=v)
                                   for item, v in zip(rubric_items_for_task(task), [0, 0, 1]))
    JudgeTaskResult.objects.create(run=newer, task=task, status=JudgeTaskResult.Status.DONE, reason="Second view.")
    running = JudgeRun.objects.create(project=project, rubric_version=task.rubric_version, name="judge-c",
                                      source=JudgeRun.Source.LIVE, status=JudgeRun.Status.RUNNING)
    JudgeLabel.objects.bulk_create(JudgeLabel(run=running, task=task, rubric_item=item, value=1)
                                   for item in rubric_items_for_task(task))
    client.force_login(experts[1])

    text = client.get(f"/assignments/{assignments[1].pk}/reveal/").content.decode()

    # E2 [0, 0, 1] agrees with judge-b everywhere; the running judge-c is not shown.
    assert "Second view." in text
    assert "Your labels match the judge" in text


def test_no_compare_link_after_submitting_while_the_judge_has_not_judged_the_task(client, db):
    _project, _pm, experts, assignments, _task, _run = build(judge=False)
    client.force_login(experts[0])

    done = client.get(f"/assignments/{assignments[0].pk}/").content.decode()

    assert "/reveal/" not in done


# --- the token API ----------------------------------------------------------------------------------


def _token(api, user):
    from rest_framework.authtoken.models import Token

    token, _ = Token.objects.get_or_create(user=user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}", HTTP_ACCEPT_LANGUAGE="en")
    return api


def test_the_api_shows_the_differences_and_takes_the_one_round(api, world):
    _project, _pm, experts, assignments, task, _run = world
    keys = _item_keys(task)
    client = _token(api, experts[2])
    url = f"/api/v1/assignments/{assignments[2].pk}/reveal/"

    seen = client.get(url).json()
    refused = client.post(url, {"changes": {keys[0]: " "}}, format="json")
    done = client.post(url, {"changes": {keys[0]: REASON}}, format="json")
    again = client.post(url, {"changes": {keys[0]: REASON}}, format="json")
    other = client.post(url, {"changes": {}}, format="json")

    assert (seen["judge_run"], seen["agreeing"], seen["closed"]) == ("judge-a", 2, False)
    assert seen["items"] == [{"rubric_item_id": keys[0], "first": 0, "judge": 1, "revised": None, "reason": None}]
    assert (refused.status_code, refused.json()["code"]) == (400, "reveal_invalid")
    assert done.status_code == 201 and done.json()["items"][0]["revised"] == 1 and done.json()["closed"]
    assert (again.status_code, other.status_code, other.json()["code"]) == (200, 409, "reveal_already_revised")
    assert LabelRevision.objects.count() == 1


def test_the_api_gives_another_experts_assignment_a_404(api, world):
    _project, _pm, experts, assignments, _task, _run = world

    response = _token(api, experts[0]).get(f"/api/v1/assignments/{assignments[2].pk}/reveal/")

    assert response.status_code == 404
