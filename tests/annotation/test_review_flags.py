"""Review flags: fast, straight-lined or copied submissions wait in the PM's queue for a decision."""
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.assignment.controls import assignment_release
from annotation.assignment.services import assignment_claim_next, leases_expire
from annotation.models import Assignment, Draft, ItemConsensus, Label, ReviewFlag, SubmissionReturn, Task
from annotation.review.rules import review_flags_check
from annotation.review.services import review_accept, submission_return, submission_returns_lapse
from annotation.selectors import rubric_items_for_task
from annotation.submission.services import labels_submit
from core.errors import Conflict, NotFound
from experts.models import Notification
from payments.ledger import ledger_post_earning
from payments.models import LedgerEntry
from tests.factories import PMFactory
from tests.payments.factories import make_expert, make_paid_project
from tests.support.quality import calibrated, make_golden_project

T0 = timezone.now().replace(microsecond=0) - timedelta(hours=2)
NOTE = "The reply ignores the user's question entirely."


def _submit(project, expert, *, seconds, value=1, notes=None, at=T0):
    """Claim at `at`, submit `seconds` later with every item `value`; run the review check as after commit."""
    lease = assignment_claim_next(project=project, expert=expert, now=at)
    assert lease is not None
    keys = [i.item_key for i in rubric_items_for_task(lease.task)]
    labels = {k: value for k in keys}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels,
                  notes={keys[0]: notes} if notes else None, now=at + timedelta(seconds=seconds))
    review_flags_check(assignment_id=lease.pk, now=at + timedelta(seconds=seconds))
    lease.refresh_from_db()
    return lease


@pytest.fixture
def pm():
    return PMFactory()


@pytest.fixture
def experts():
    return [make_expert() for _ in range(3)]


@pytest.fixture
def project(pm, experts):
    return make_paid_project(experts=[*experts, pm], n_questions=6)


def _flags(assignment):
    return set(ReviewFlag.objects.filter(assignment=assignment).values_list("rule", flat=True))


@pytest.mark.django_db
def test_a_submission_faster_than_the_minimum_per_item_is_flagged_once_and_a_careful_one_is_not(project, experts):
    fast = _submit(project, experts[0], seconds=4)  # 2 items, 3 s each: 6 s needed
    slow = _submit(project, experts[1], seconds=60, at=T0 + timedelta(minutes=5))

    assert _flags(fast) == {"too_fast"}
    flag = ReviewFlag.objects.get(assignment=fast)
    assert flag.detail == {"seconds": 4.0, "items": 2, "min_seconds_per_item": 3}
    assert _flags(slow) == set()
    # The check runs again (a retried task): nothing more is written.
    assert review_flags_check(assignment_id=fast.pk, now=timezone.now()) == 0
    assert ReviewFlag.objects.filter(assignment=fast).count() == 1


@pytest.mark.django_db
def test_the_check_is_sent_after_the_submission_commits(project, experts, django_capture_on_commit_callbacks):
    lease = assignment_claim_next(project=project, expert=experts[0], now=T0)
    labels = {i.item_key: 1 for i in rubric_items_for_task(lease.task)}
    with django_capture_on_commit_callbacks(execute=True):
        labels_submit(expert=experts[0], assignment_id=lease.pk, labels=labels, now=T0 + timedelta(seconds=1))

    assert _flags(lease) == {"too_fast"}


@pytest.mark.django_db
def test_a_minimum_of_zero_switches_the_speed_rule_off(project, experts):
    project.min_seconds_per_item = 0
    project.save(update_fields=["min_seconds_per_item"])

    assert _flags(_submit(project, experts[0], seconds=1)) == set()


@pytest.mark.django_db
def test_every_item_the_same_on_the_last_n_submissions_flags_the_one_that_completes_the_run(project, experts):
    project.review_run_length = 3
    project.save(update_fields=["review_run_length"])
    expert = experts[0]
    runs = [_submit(project, expert, seconds=120, value=0, at=T0 + timedelta(minutes=5 * n)) for n in range(3)]

    assert [_flags(a) for a in runs] == [set(), set(), {"identical_run"}]
    assert ReviewFlag.objects.get(assignment=runs[2]).detail == {"value": 0, "run": 3}
    # A different value breaks the run.
    other = _submit(project, expert, seconds=120, value=1, at=T0 + timedelta(minutes=20))
    assert _flags(other) == set()


@pytest.mark.django_db
def test_the_run_is_the_last_n_submissions_only_and_one_mixed_submission_in_them_breaks_it(
        project, experts, django_assert_max_num_queries):
    project.review_run_length = 3
    project.save(update_fields=["review_run_length"])
    expert = experts[0]
    at = [T0 + timedelta(minutes=5 * n) for n in range(5)]
    first = _submit(project, expert, seconds=120, value=0, at=at[0])
    lease = assignment_claim_next(project=project, expert=expert, now=at[1])
    keys = [i.item_key for i in rubric_items_for_task(lease.task)]
    labels_submit(expert=expert, assignment_id=lease.pk, labels={k: n % 2 for n, k in enumerate(keys)},
                  now=at[1] + timedelta(seconds=120))
    third = _submit(project, expert, seconds=120, value=0, at=at[2])
    fourth = _submit(project, expert, seconds=120, value=0, at=at[3])
    assert [_flags(a) for a in (first, third, fourth)] == [set(), set(), set()]  # the mixed one is in the last 3

    fifth = assignment_claim_next(project=project, expert=expert, now=at[4])
    labels_submit(expert=expert, assignment_id=fifth.pk, now=at[4] + timedelta(seconds=120),
                  labels={i.item_key: 0 for i in rubric_items_for_task(fifth.task)})
    # The assignment, its labels, the last three submissions' labels, existing flags, the insert.
    with django_assert_max_num_queries(5):
        assert review_flags_check(assignment_id=fifth.pk, now=at[4] + timedelta(seconds=120)) == 1
    assert _flags(fifth) == {"identical_run"}


@pytest.mark.django_db
def test_a_note_repeated_word_for_word_on_another_task_is_flagged(project, experts):
    first = _submit(project, experts[0], seconds=120, notes=NOTE)
    second = _submit(project, experts[0], seconds=120, notes=NOTE, at=T0 + timedelta(minutes=5))
    short = _submit(project, experts[0], seconds=120, notes="ok", at=T0 + timedelta(minutes=10))
    _submit(project, experts[0], seconds=120, notes="ok", at=T0 + timedelta(minutes=15))

    assert _flags(first) == set()
    assert _flags(second) == {"repeated_note"}
    assert ReviewFlag.objects.get(assignment=second).detail == {"note": NOTE, "other_task": first.task_id}
    assert _flags(short) == set()


@pytest.mark.django_db
def test_control_tasks_are_never_flagged_so_nothing_the_expert_sees_singles_them_out(client):
    project = make_golden_project(golden=16, regular=4)
    project.control_rate_pct = 100
    project.save(update_fields=["control_rate_pct"])
    expert = calibrated(project)
    lease = _submit(project, expert, seconds=1, value=0, notes=NOTE, at=timezone.now())

    assert lease.task.is_golden
    assert ReviewFlag.objects.count() == 0
    assert not Notification.objects.filter(user=expert, kind="submission_returned").exists()
    client.force_login(expert)
    history = client.get(reverse("my_history")).content.decode().lower()
    assert "returned" not in history and "control" not in history


@pytest.fixture
def flagged(project, experts):
    return _submit(project, experts[0], seconds=2)


@pytest.fixture
def pm_client(client, pm):
    client.force_login(pm)
    return client


@pytest.mark.django_db
def test_the_pm_sees_the_flag_in_the_review_queue_in_chinese(pm_client, project, flagged):
    page = pm_client.get(reverse("review_queue", args=[project.pk]), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    fragment = pm_client.get(reverse("review_queue", args=[project.pk]), HTTP_HX_REQUEST="true").content.decode()

    assert "复核" in page and "快于每项最短用时" in page
    assert flagged.task.response.question.external_id in page
    assert "<html" not in fragment and "review-queue" in fragment


@pytest.mark.django_db
def test_another_projects_pm_gets_404_on_the_queue_and_every_action_and_nothing_changes(client, project, flagged):
    other_pm = PMFactory()
    make_paid_project(experts=[other_pm], n_questions=1)
    client.force_login(other_pm)
    urls = [reverse(name, args=[project.pk, flagged.pk]) for name in ("review_accept", "review_return",
                                                                      "review_reject")]

    assert client.get(reverse("review_queue", args=[project.pk])).status_code == 404
    for url in urls:
        response = client.post(url, {"comment": "fix", "reason": "spam", "reason_code": "spam", "confirmed": "yes"})
        assert response.status_code == 404
    flagged.refresh_from_db()
    assert flagged.status == "submitted"
    assert set(ReviewFlag.objects.values_list("status", flat=True)) == {"open"}
    assert not SubmissionReturn.objects.exists()


@pytest.mark.django_db
def test_a_submission_of_another_project_is_not_found_through_this_projects_queue(pm, project, experts):
    other = make_paid_project(experts=[pm, experts[0]], n_questions=1)
    foreign = _submit(other, experts[0], seconds=1)

    with pytest.raises(NotFound):
        review_accept(actor=pm, project=project, assignment_id=foreign.pk, now=timezone.now())
    assert ReviewFlag.objects.get(assignment=foreign).status == "open"


@pytest.mark.django_db
def test_accepting_clears_the_flags_and_accepting_again_changes_nothing(pm_client, project, flagged):
    url = reverse("review_accept", args=[project.pk, flagged.pk])
    pm_client.post(url)
    flag = ReviewFlag.objects.get()
    assert flag.status == "accepted"
    resolved_at = flag.resolved_at

    again = pm_client.post(url, follow=True)

    flag.refresh_from_db()
    assert (flag.status, flag.resolved_at) == ("accepted", resolved_at)
    assert "已复核过" in again.content.decode()
    open_page = pm_client.get(reverse("review_queue", args=[project.pk])).content.decode()
    assert "没有待复核的提交" in open_page


@pytest.mark.django_db
def test_a_returned_submission_is_the_experts_to_fix_once_and_still_earns_once(client, pm, experts):
    project = make_paid_project(experts=[*experts, pm], n_questions=1)
    flagged = _submit(project, experts[0], seconds=2)
    partners = [_submit(project, e, seconds=120, value=0, at=T0 + timedelta(minutes=1)) for e in experts[1:]]
    task = Task.objects.get(pk=flagged.task_id)
    assert {p.task_id for p in partners} == {task.pk} and task.status == "complete"
    ledger_post_earning(assignment_id=flagged.pk, now=T0)
    client.force_login(pm)

    client.post(reverse("review_return", args=[project.pk, flagged.pk]), {"comment": "Read the reply again."})

    flagged.refresh_from_db()
    task.refresh_from_db()
    assert (flagged.status, flagged.submitted_at) == ("leased", None)
    assert flagged.expires_at > timezone.now()
    assert (task.status, task.submitted_count, task.live_count) == ("full", 2, 3)
    assert not Label.objects.filter(assignment=flagged).exists()
    assert set(Draft.objects.get(assignment=flagged).labels.values()) == {1}
    assert {c.total_votes for c in ItemConsensus.objects.filter(task=task)} == {2}
    assert ReviewFlag.objects.get(assignment=flagged).status == "returned"
    note = Notification.objects.get(user=experts[0], kind="submission_returned")
    assert "Read the reply again." in note.message and note.link == reverse("annotate", args=[flagged.pk])
    # The expert sees it on their history and on the task.
    client.force_login(experts[0])
    history = client.get(reverse("my_history"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Returned to fix" in history and "Read the reply again." in history
    assert "Read the reply again." in client.get(reverse("annotate", args=[flagged.pk])).content.decode()
    # Giving it back would drop a paid submission: refused.
    with pytest.raises(Conflict):
        assignment_release(expert=experts[0], assignment_id=flagged.pk)

    labels = {i.item_key: 0 for i in rubric_items_for_task(task)}
    labels_submit(expert=experts[0], assignment_id=flagged.pk, labels=labels, now=timezone.now())
    review_flags_check(assignment_id=flagged.pk, now=timezone.now())
    ledger_post_earning(assignment_id=flagged.pk, now=timezone.now())

    task.refresh_from_db()
    assert (task.status, task.submitted_count) == ("complete", 3)
    assert {(c.hit_votes, c.total_votes) for c in ItemConsensus.objects.filter(task=task)} == {(0, 3)}
    assert LedgerEntry.objects.filter(assignment=flagged, kind="earning").count() == 1
    assert SubmissionReturn.objects.get(assignment=flagged).resubmitted_at is not None
    assert ReviewFlag.objects.filter(assignment=flagged).count() == 1  # not flagged again


@pytest.mark.django_db
def test_returning_twice_changes_nothing(pm, project, flagged):
    submission_return(actor=pm, project=project, assignment_id=flagged.pk, comment="fix it", now=timezone.now())

    with pytest.raises(Conflict):
        submission_return(actor=pm, project=project, assignment_id=flagged.pk, comment="again", now=timezone.now())
    assert SubmissionReturn.objects.get().comment == "fix it"
    assert Notification.objects.filter(kind="submission_returned").count() == 1


@pytest.mark.django_db
def test_a_return_needs_a_comment_and_without_one_changes_nothing(pm_client, project, flagged):
    response = pm_client.post(reverse("review_return", args=[project.pk, flagged.pk]), {"comment": "  "},
                              follow=True)

    assert "意见为必填" in response.content.decode()
    flagged.refresh_from_db()
    assert flagged.status == "submitted"
    assert ReviewFlag.objects.get().status == "open"


@pytest.mark.django_db
def test_a_returned_lease_that_runs_out_puts_the_first_submission_back(pm, project, experts, flagged):
    before = dict(Label.objects.filter(assignment=flagged).values_list("rubric_item__item_key", "value"))
    submitted_at = flagged.submitted_at
    now = timezone.now()
    submission_return(actor=pm, project=project, assignment_id=flagged.pk, comment="fix it", now=now)
    later = now + timedelta(seconds=project.lease_timeout_s + 1)

    assert leases_expire(now=later) == 0  # the ordinary sweep leaves it to the review
    assert submission_returns_lapse(now=later) == 1
    assert submission_returns_lapse(now=later) == 0

    flagged.refresh_from_db()
    assert (flagged.status, flagged.submitted_at) == ("submitted", submitted_at)
    assert dict(Label.objects.filter(assignment=flagged).values_list("rubric_item__item_key", "value")) == before
    assert Task.objects.get(pk=flagged.task_id).submitted_count == 1
    assert SubmissionReturn.objects.get().lapsed_at == later
    assert not Draft.objects.filter(assignment=flagged).exists()


@pytest.mark.django_db
def test_rejecting_from_the_queue_asks_first_then_reverses_the_earning_once(pm_client, project, experts, flagged):
    ledger_post_earning(assignment_id=flagged.pk, now=T0)
    url = reverse("review_reject", args=[project.pk, flagged.pk])
    form = {"reason_code": "spam", "reason": "two seconds for the whole task"}

    ask = pm_client.post(url, form)
    assert ask.status_code == 200 and "two seconds for the whole task" in ask.content.decode()
    assert Assignment.objects.get(pk=flagged.pk).status == "submitted"

    pm_client.post(url, {**form, "confirmed": "yes"})
    again = pm_client.post(url, {**form, "confirmed": "yes"}, follow=True)

    flagged.refresh_from_db()
    assert (flagged.status, flagged.rejected_reason) == ("rejected", "spam")
    assert ReviewFlag.objects.get().status == "rejected"
    assert LedgerEntry.objects.filter(assignment=flagged, kind="reversal").count() == 1
    assert Notification.objects.filter(user=experts[0], kind="submission_rejected").count() == 1
    assert "已复核过" in again.content.decode()


@pytest.mark.django_db
def test_the_queue_answers_in_a_few_queries(pm_client, project, experts, django_assert_max_num_queries):
    for n in range(4):
        _submit(project, experts[n % 3], seconds=1, at=T0 + timedelta(minutes=n))

    with django_assert_max_num_queries(12):
        page = pm_client.get(reverse("review_queue", args=[project.pk]))
    assert page.content.decode().count('class="card review-card"') == 4


@pytest.mark.django_db
def test_the_settings_page_shows_and_saves_the_review_and_reminder_settings(pm_client, project):
    page = pm_client.get(reverse("project_settings", args=[project.pk]), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "复核标记与提醒" in page.content.decode() and 'name="min_seconds_per_item"' in page.content.decode()
    posted = {"name": project.name, "description": "", "overlap": 3, "lease_timeout_min": 45,
              "min_seconds_per_item": 5, "review_run_length": 8, "review_repeated_notes": "off",
              "remind_lease_minutes": 15, "remind_idle_days": 0, "alert_deadline_risk": ["off", "on"]}

    pm_client.post(reverse("project_settings", args=[project.pk]), posted)

    project.refresh_from_db()
    assert (project.min_seconds_per_item, project.review_run_length, project.review_repeated_notes,
            project.remind_lease_minutes, project.remind_idle_days, project.alert_deadline_risk) == (
        5, 8, False, 15, 0, True)
    refused = pm_client.post(reverse("project_settings", args=[project.pk]),
                             {**posted, "min_seconds_per_item": 9999, "remind_lease_minutes": 5})
    project.refresh_from_db()
    assert refused.status_code == 422 and 'aria-invalid="true"' in refused.content.decode()
    assert (project.min_seconds_per_item, project.remind_lease_minutes) == (5, 15)
