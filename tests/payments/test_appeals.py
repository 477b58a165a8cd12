"""Appeals: an expert contests a rejection or a statement line; another person decides, once."""
import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection, connections
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, ItemConsensus, Label, Task
from annotation.selectors import rubric_items_for_task
from annotation.submission import rejection
from annotation.submission.consensus import majority_of
from annotation.submission.services import labels_submit
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, Forbidden, NotFound
from experts.models import Notification
from payments import appeals
from payments.appeals import appeal_create_for_line, appeal_create_for_rejection, appeal_decide
from payments.ledger import ledger_post_earning
from payments.models import Appeal, LedgerEntry, Period
from payments.reconciliation import ledger_reconcile
from payments.services import statement_settle_period, submission_reject
from tests.factories import PMFactory
from tests.payments.factories import make_expert, make_paid_project

T0 = timezone.now().replace(microsecond=0)


def _submit(expert, project, value, now=T0):
    lease = assignment_claim_next(project=project, expert=expert, now=now)
    assert lease is not None
    labels = {i.item_key: value for i in rubric_items_for_task(lease.task)}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=now)
    ledger_post_earning(assignment_id=lease.pk, now=now)
    lease.refresh_from_db()
    return lease


def _recomputed(task) -> set[tuple]:
    """The consensus of `task` computed again by hand from the labels that count."""
    votes: dict[int, list[int]] = {}
    for item_id, value in (Label.objects.counted().filter(task=task, assignment__status="submitted")
                           .values_list("rubric_item_id", "value")):
        votes.setdefault(item_id, []).append(value)
    return {(item, sum(v), len(v), *majority_of(sum(v), len(v))) for item, v in votes.items()}


def _stored(task) -> set[tuple]:
    return {(c.rubric_item_id, c.hit_votes, c.total_votes, c.majority, c.zone)
            for c in ItemConsensus.objects.filter(task=task)}


def _counts() -> tuple[int, int, int]:
    return Appeal.objects.count(), LedgerEntry.objects.count(), Notification.objects.count()


@pytest.fixture
def rejected(monkeypatch):
    """A task of three: two hits and one rejected miss, the slot still open; the PM who rejected it."""
    monkeypatch.setattr(rejection, "task_send_on_commit", lambda name, **kw: None)
    pm = PMFactory()
    experts = [make_expert() for _ in range(3)]
    project = make_paid_project(experts=[*experts, pm], n_questions=1)
    _submit(experts[0], project, 1)
    contested = _submit(experts[1], project, 0)
    _submit(experts[2], project, 1)
    submission_reject(actor=pm, assignment_id=contested.pk, reason="all misses", reason_code="spam", now=T0)
    contested.refresh_from_db()
    return project, pm, contested


def _second_pm(project):
    from annotation.services import project_add_member

    other = PMFactory()
    project_add_member(project=project, user=other)
    return other


# --- Contesting --------------------------------------------------------------------------------

@pytest.mark.django_db
def test_an_expert_contests_a_rejection_up_to_the_last_instant_of_the_window(rejected):
    project, _pm, contested = rejected
    deadline = contested.rejected_at + timedelta(days=project.appeal_window_days)

    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk,
                                         reason="The reply really missed every item.", now=deadline)

    assert (appeal.kind, appeal.status, appeal.rejected_reason, appeal.rejected_text) == (
        "rejection", "open", "spam", "all misses")


@pytest.mark.django_db
def test_after_the_window_the_expert_is_told_when_it_ended_and_nothing_is_written(rejected):
    project, _pm, contested = rejected
    project.appeal_window_days = 3
    project.save(update_fields=["appeal_window_days"])
    late = contested.rejected_at + timedelta(days=3, seconds=1)

    with pytest.raises(Conflict) as err:
        appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="late", now=late)

    assert err.value.code == ErrorCode.APPEAL_WINDOW_CLOSED
    assert err.value.params["days"] == 3
    assert Appeal.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize("reason", ["", "   ", "x" * (appeals.REASON_MAX + 1)])
def test_a_missing_or_overlong_reason_is_refused(rejected, reason):
    _project, _pm, contested = rejected

    with pytest.raises(DomainError) as err:
        appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason=reason, now=T0)

    assert err.value.code in (ErrorCode.APPEAL_REASON_REQUIRED, ErrorCode.APPEAL_REASON_TOO_LONG)
    assert err.value.errors[0]["field"] == "reason"
    assert Appeal.objects.count() == 0


@pytest.mark.django_db
def test_another_experts_rejection_is_not_found_and_writes_nothing(rejected):
    _project, _pm, contested = rejected
    stranger = make_expert()
    before = _counts()

    with pytest.raises(NotFound):
        appeal_create_for_rejection(expert=stranger, assignment_id=contested.pk, reason="mine?", now=T0)
    with pytest.raises(NotFound):
        appeal_create_for_rejection(expert=stranger, assignment_id="x", reason="mine?", now=T0)

    assert _counts() == before


@pytest.mark.django_db
def test_one_appeal_per_rejection_and_a_submission_that_was_not_rejected_is_not_contestable(rejected):
    project, _pm, contested = rejected
    appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="first", now=T0)
    fine = Assignment.objects.filter(task=contested.task, status="submitted").first()

    with pytest.raises(Conflict) as twice:
        appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="again", now=T0)
    with pytest.raises(Conflict) as not_rejected:
        appeal_create_for_rejection(expert=fine.expert, assignment_id=fine.pk, reason="why not", now=T0)

    assert twice.value.code == ErrorCode.APPEAL_EXISTS
    assert not_rejected.value.code == ErrorCode.APPEAL_NOT_CONTESTABLE
    assert Appeal.objects.count() == 1


# --- Deciding a rejection appeal -----------------------------------------------------------------

@pytest.mark.django_db
def test_the_pm_who_rejected_cannot_decide_and_another_projects_pm_gets_not_found(rejected):
    project, pm, contested = rejected
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)
    outsider = PMFactory()
    make_paid_project(experts=[outsider], n_questions=1)
    before = _counts()

    with pytest.raises(Forbidden) as own:
        appeal_decide(actor=pm, appeal_id=appeal.pk, outcome="accept", reason="fine", now=T0)
    with pytest.raises(NotFound):
        appeal_decide(actor=outsider, appeal_id=appeal.pk, outcome="accept", reason="fine", now=T0)
    with pytest.raises(NotFound):
        appeal_decide(actor=contested.expert, appeal_id=appeal.pk, outcome="accept", reason="mine", now=T0)

    assert own.value.code == ErrorCode.APPEAL_OWN_REJECTION
    assert _counts() == before
    appeal.refresh_from_db()
    contested.refresh_from_db()
    assert (appeal.status, contested.status) == ("open", "rejected")


@pytest.mark.django_db
def test_a_bronze_expert_of_the_project_cannot_decide_but_a_gold_one_can(rejected):
    project, _pm, contested = rejected
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)
    from annotation.services import project_add_member

    bronze, gold = make_expert("bronze"), make_expert("gold")
    for user in (bronze, gold):
        project_add_member(project=project, user=user)

    with pytest.raises(NotFound):
        appeal_decide(actor=bronze, appeal_id=appeal.pk, outcome="deny", reason="no", now=T0)
    decided = appeal_decide(actor=gold, appeal_id=appeal.pk, outcome="deny", reason="The misses are real.", now=T0)

    assert (decided.status, decided.decided_by) == ("denied", gold)


@pytest.mark.django_db
def test_accepting_restores_the_labels_into_the_still_open_slot_and_posts_one_new_earning(rejected):
    project, _pm, contested = rejected
    task = contested.task
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)
    earning = LedgerEntry.objects.get(assignment=contested, kind="earning")
    entries_before = set(LedgerEntry.objects.values_list("pk", "amount"))

    decided = appeal_decide(actor=_second_pm(project), appeal_id=appeal.pk, outcome="accept",
                            reason="Misses were justified by the guideline.", now=T0 + timedelta(hours=1))

    contested.refresh_from_db()
    task.refresh_from_db()
    assert (decided.status, contested.status, contested.rejected_at) == ("accepted", "submitted", None)
    # The rejection stays on record on the appeal.
    assert (decided.rejected_reason, decided.rejected_text) == ("spam", "all misses")
    # The re-opened slot was still free: the task closes again at its own size.
    assert (task.status, task.overlap, task.submitted_count, task.live_count) == ("complete", 3, 3, 3)
    assert _stored(task) == _recomputed(task)
    assert {(t, v) for _i, t, v, *_rest in _stored(task)} == {(2, 3)}
    # Old entries untouched, one correction of the earning's amount beside them.
    assert entries_before <= set(LedgerEntry.objects.values_list("pk", "amount"))
    correction = LedgerEntry.objects.get(kind="adjustment")
    assert (decided.correction, correction.amount, correction.assignment) == (correction, earning.amount, contested)
    assert sum(LedgerEntry.objects.filter(assignment=contested).values_list("amount", flat=True)) == earning.amount
    assert ledger_reconcile() == []
    note = Notification.objects.get(user=contested.expert, kind="appeal_decided")
    assert "accepted" in note.message and "guideline" in note.message


@pytest.mark.django_db
def test_when_another_expert_took_the_reopened_slot_the_task_gains_one_counted_member(rejected):
    project, _pm, contested = rejected
    replacement = make_expert()
    from annotation.services import project_add_member

    project_add_member(project=project, user=replacement)
    _submit(replacement, project, 1)
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)

    appeal_decide(actor=_second_pm(project), appeal_id=appeal.pk, outcome="accept", reason="ok", now=T0)

    task = Task.objects.get(pk=contested.task_id)
    contested.refresh_from_db()
    assert (task.status, task.overlap, task.submitted_count, task.live_count) == ("complete", 4, 4, 4)
    assert contested.slot == 4
    assert _stored(task) == _recomputed(task)
    assert {(t, v) for _i, t, v, *_rest in _stored(task)} == {(3, 4)}
    assert ledger_reconcile() == []


@pytest.mark.django_db
def test_denying_changes_nothing_but_the_appeal_and_tells_the_expert(rejected):
    project, _pm, contested = rejected
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)
    consensus = _stored(contested.task)
    entries = list(LedgerEntry.objects.order_by("pk").values_list("pk", "amount"))

    decided = appeal_decide(actor=_second_pm(project), appeal_id=appeal.pk, outcome="deny",
                            reason="Every item marked miss in 3 seconds.", now=T0)

    contested.refresh_from_db()
    assert (decided.status, decided.correction, contested.status) == ("denied", None, "rejected")
    assert _stored(contested.task) == consensus
    assert list(LedgerEntry.objects.order_by("pk").values_list("pk", "amount")) == entries
    assert Notification.objects.filter(user=contested.expert, kind="appeal_decided").count() == 1
    with pytest.raises(Conflict) as again:
        appeal_decide(actor=_second_pm(project), appeal_id=appeal.pk, outcome="accept", reason="x", now=T0)
    assert again.value.code == ErrorCode.APPEAL_ALREADY_DECIDED
    assert ledger_reconcile() == []


@pytest.mark.django_db
def test_a_decision_needs_an_outcome_and_a_reason(rejected):
    project, _pm, contested = rejected
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)
    other = _second_pm(project)

    with pytest.raises(DomainError) as outcome:
        appeal_decide(actor=other, appeal_id=appeal.pk, outcome="maybe", reason="x", now=T0)
    with pytest.raises(DomainError) as reason:
        appeal_decide(actor=other, appeal_id=appeal.pk, outcome="accept", reason=" ", now=T0)

    assert (outcome.value.code, reason.value.code) == (ErrorCode.APPEAL_OUTCOME_UNKNOWN,
                                                       ErrorCode.APPEAL_DECISION_REASON_REQUIRED)
    appeal.refresh_from_db()
    assert appeal.status == "open"


@pytest.mark.django_db
def test_a_submission_restored_on_appeal_cannot_be_rejected_again(rejected):
    project, pm, contested = rejected
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)
    appeal_decide(actor=_second_pm(project), appeal_id=appeal.pk, outcome="accept", reason="ok", now=T0)

    with pytest.raises(Conflict) as err:
        submission_reject(actor=pm, assignment_id=contested.pk, reason="again", now=T0)

    assert err.value.code == ErrorCode.RESTORED_ON_APPEAL


# --- Statement lines ---------------------------------------------------------------------------

@pytest.fixture
def line():
    """An expert's earning on a statement issued at the end of its period."""
    pm = PMFactory()
    expert = make_expert()
    project = make_paid_project(experts=[expert, pm], n_questions=1)
    assignment = _submit(expert, project, 1)
    entry = LedgerEntry.objects.get(assignment=assignment, kind="earning")
    closed_at = entry.period.ends_at + timedelta(minutes=5)
    statement_settle_period(period_id=entry.period_id, now=closed_at)
    entry.refresh_from_db()
    return project, pm, expert, entry, closed_at


@pytest.mark.django_db
def test_a_statement_line_is_contestable_until_the_window_after_the_statement_was_issued(line):
    project, _pm, expert, entry, closed_at = line
    deadline = closed_at + timedelta(days=project.appeal_window_days)

    with pytest.raises(Conflict) as late:
        appeal_create_for_line(expert=expert, entry_id=entry.pk, reason="tier", now=deadline + timedelta(seconds=1))
    appeal = appeal_create_for_line(expert=expert, entry_id=entry.pk, reason="Priced at bronze; I was silver.",
                                    now=deadline)

    assert late.value.code == ErrorCode.APPEAL_WINDOW_CLOSED
    assert (appeal.kind, appeal.entry, appeal.assignment_id) == ("statement_line", entry, entry.assignment_id)


@pytest.mark.django_db
def test_accepting_a_line_appeal_posts_one_correcting_entry_bounded_by_the_line(line):
    project, pm, expert, entry, closed_at = line
    appeal = appeal_create_for_line(expert=expert, entry_id=entry.pk, reason="tier", now=closed_at)
    now = closed_at + timedelta(hours=1)

    with pytest.raises(DomainError) as too_much:
        appeal_decide(actor=pm, appeal_id=appeal.pk, outcome="accept", reason="ok", now=now,
                      amount=entry.amount + Decimal("0.01"))
    with pytest.raises(DomainError) as nothing:
        appeal_decide(actor=pm, appeal_id=appeal.pk, outcome="accept", reason="ok", now=now, amount="0")
    assert LedgerEntry.objects.filter(kind="adjustment").count() == 0
    decided = appeal_decide(actor=pm, appeal_id=appeal.pk, outcome="accept", reason="Silver since Monday.",
                            now=now, amount="0.50")

    correction = LedgerEntry.objects.get(kind="adjustment")
    assert (too_much.value.code, nothing.value.code) == (ErrorCode.APPEAL_AMOUNT_INVALID,) * 2
    assert (decided.correction, correction.amount, correction.reason) == (correction, Decimal("0.50"),
                                                                          "Silver since Monday.")
    # The closed period never changes: the correction lands in the period open now.
    assert correction.period_id != entry.period_id
    assert Period.objects.get(pk=correction.period_id).status == "open"
    assert ledger_reconcile() == []


@pytest.mark.django_db
def test_a_reversal_line_is_contested_as_its_rejection_and_another_experts_line_is_not_found(rejected):
    _project, _pm, contested = rejected
    reversal = LedgerEntry.objects.get(assignment=contested, kind="reversal")

    with pytest.raises(Conflict) as err:
        appeal_create_for_line(expert=contested.expert, entry_id=reversal.pk, reason="no", now=T0)
    with pytest.raises(NotFound):
        appeal_create_for_line(expert=make_expert(), entry_id=reversal.pk, reason="no", now=T0)

    assert err.value.code == ErrorCode.APPEAL_USE_REJECTION
    assert Appeal.objects.count() == 0


@pytest.mark.django_db
def test_reconciliation_reports_a_correction_without_an_accepted_appeal(line):
    _project, _pm, expert, entry, closed_at = line
    appeal = appeal_create_for_line(expert=expert, entry_id=entry.pk, reason="tier", now=closed_at)
    from payments.ledger import ledger_post_correction

    ledger_post_correction(appeal_id=appeal.pk, earning=entry, amount=Decimal("0.10"), reason="by hand",
                           actor=None, now=closed_at)

    assert [p.code for p in ledger_reconcile()] == ["correction_unbacked"]


# --- Concurrency ---------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
@pytest.mark.usefixtures("post_migrate_rows")
def test_two_deciders_at_once_post_exactly_one_correction(monkeypatch):
    assert connection.vendor == "postgresql"
    monkeypatch.setattr(rejection, "task_send_on_commit", lambda name, **kw: None)
    monkeypatch.setattr("annotation.submission.services.task_send_on_commit", lambda name, **kw: None)
    pm = PMFactory()
    experts = [make_expert() for _ in range(3)]
    project = make_paid_project(experts=[*experts, pm], n_questions=1)
    _submit(experts[0], project, 1)
    contested = _submit(experts[1], project, 0)
    submission_reject(actor=pm, assignment_id=contested.pk, reason="spam", reason_code="spam", now=T0)
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)
    deciders = [_second_pm(project), _second_pm(project)]
    barrier = threading.Barrier(len(deciders) * 2)
    outcomes: list[str] = []

    def decide(actor):
        try:
            barrier.wait(timeout=30)
            appeal_decide(actor=actor, appeal_id=appeal.pk, outcome="accept", reason="ok", now=T0)
            outcomes.append("decided")
        except Conflict as exc:
            outcomes.append(str(exc.code))
        finally:
            connections.close_all()

    # Each decider clicks twice.
    threads = [threading.Thread(target=decide, args=(actor,)) for actor in deciders for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert not any(t.is_alive() for t in threads)
    assert sorted(outcomes) == ["appeal_already_decided"] * 3 + ["decided"]
    assert LedgerEntry.objects.filter(kind="adjustment").count() == 1
    task = Task.objects.get(pk=contested.task_id)
    assert (task.submitted_count, task.live_count) == (2, 2)
    assert ledger_reconcile() == []


# --- Pages -----------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_history_offers_contest_and_the_form_sends_an_appeal(rejected, client):
    _project, _pm, contested = rejected
    client.force_login(contested.expert)
    url = f"/payments/appeals/rejections/{contested.pk}/"

    history = client.get("/me/history/").content.decode()
    form = client.get(url)
    empty = client.post(url, {"reason": "  "})
    sent = client.post(url, {"reason": "The guideline allows a miss here."})

    assert url in history
    assert form.status_code == 200 and "all misses" in form.content.decode()
    assert empty.status_code == 422
    assert sent.status_code == 302 and sent["Location"] == "/payments/appeals/"
    assert Appeal.objects.get().reason == "The guideline allows a miss here."
    assert url not in client.get("/me/history/").content.decode()
    assert "The guideline allows a miss here." in client.get("/payments/appeals/").content.decode()


@pytest.mark.django_db
def test_another_experts_contest_form_is_404_and_a_late_one_says_why(rejected, client):
    project, _pm, contested = rejected
    url = f"/payments/appeals/rejections/{contested.pk}/"
    client.force_login(make_expert())
    assert client.get(url).status_code == 404
    assert client.post(url, {"reason": "mine"}).status_code == 404
    client.force_login(contested.expert)
    project.appeal_window_days = 1
    project.save(update_fields=["appeal_window_days"])
    type(contested).objects.filter(pk=contested.pk).update(rejected_at=T0 - timedelta(days=2))

    late = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans")
    late_post = client.post(url, {"reason": "late"})

    assert late.status_code == 200 and "申诉期限已于" in late.content.decode()
    assert 'name="reason"' not in late.content.decode()
    assert late_post.status_code == 422
    assert Appeal.objects.count() == 0


@pytest.mark.django_db
def test_the_queue_lets_another_pm_accept_after_a_confirmation_and_not_the_rejecting_pm(rejected, client):
    project, pm, contested = rejected
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)
    queue = f"/payments/projects/{project.pk}/appeals/"
    decide = f"/payments/appeals/{appeal.pk}/decide/"
    client.force_login(pm)
    own_page = client.get(queue).content.decode()
    own_post = client.post(decide, {"outcome": "deny", "decision_reason": "mine"})
    client.force_login(_second_pm(project))
    fragment = client.get(queue, HTTP_HX_REQUEST="true")

    asked = client.post(decide, {"outcome": "accept", "decision_reason": "Justified misses."})
    assert LedgerEntry.objects.filter(kind="adjustment").count() == 0
    done = client.post(decide, {"outcome": "accept", "decision_reason": "Justified misses.", "confirmed": "yes"})

    assert decide not in own_page
    assert "这次驳回是你做出的" in own_page  # the pages speak zh-Hans by default
    assert own_post.status_code == 403
    assert fragment.status_code == 200 and b"<html" not in fragment.content and decide.encode() in fragment.content
    assert asked.status_code == 200 and b'name="confirmed"' in asked.content
    assert done.status_code == 302
    appeal.refresh_from_db()
    assert appeal.status == "accepted" and LedgerEntry.objects.filter(kind="adjustment").count() == 1
    assert "Justified misses." in client.get(queue).content.decode()


@pytest.mark.django_db
def test_another_projects_pm_and_a_bronze_expert_get_404_on_the_queue_and_the_decision(rejected, client):
    project, _pm, contested = rejected
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)
    outsider = PMFactory()
    make_paid_project(experts=[outsider], n_questions=1)
    bronze = Assignment.objects.filter(task=contested.task, status="submitted").first().expert

    for user in (outsider, bronze):
        client.force_login(user)
        assert client.get(f"/payments/projects/{project.pk}/appeals/").status_code == 404
        assert client.post(f"/payments/appeals/{appeal.pk}/decide/",
                           {"outcome": "deny", "decision_reason": "x"}).status_code == 404
    appeal.refresh_from_db()
    assert appeal.status == "open"


@pytest.mark.django_db
def test_a_statement_line_has_a_contest_button_and_then_shows_the_outcome(line, client):
    project, pm, expert, entry, closed_at = line
    statement = entry.period.statements.get(expert=expert)
    client.force_login(expert)
    page = client.get(f"/payments/statements/{statement.pk}/").content.decode()
    appeal = appeal_create_for_line(expert=expert, entry_id=entry.pk, reason="tier", now=timezone.now())
    appeal_decide(actor=pm, appeal_id=appeal.pk, outcome="deny", reason="Bronze that week.", now=timezone.now())

    after = client.get(f"/payments/statements/{statement.pk}/").content.decode()

    assert f"/payments/appeals/lines/{entry.pk}/" in page
    assert f"/payments/appeals/lines/{entry.pk}/" not in after and "Bronze that week." in after


# --- API ---------------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_api_contests_lists_and_decides(rejected):
    from rest_framework.test import APIClient

    project, pm, contested = rejected
    expert_api, decider_api, stranger_api = APIClient(), APIClient(), APIClient()
    expert_api.force_authenticate(contested.expert)
    decider_api.force_authenticate(_second_pm(project))
    stranger_api.force_authenticate(make_expert())

    refused = stranger_api.post("/api/v1/appeals/", {"kind": "rejection", "target_id": contested.pk,
                                                     "reason": "mine"}, format="json")
    created = expert_api.post("/api/v1/appeals/", {"kind": "rejection", "target_id": contested.pk,
                                                   "reason": "Not spam."}, format="json")
    twice = expert_api.post("/api/v1/appeals/", {"kind": "rejection", "target_id": contested.pk,
                                                 "reason": "Not spam."}, format="json")
    appeal_id = created.json()["id"]
    queue = decider_api.get(f"/api/v1/appeals/to-decide/?project={project.pk}&status=open")
    decided = decider_api.post(f"/api/v1/appeals/{appeal_id}/decide/", {"outcome": "accept", "reason": "ok"},
                               format="json")
    again = decider_api.post(f"/api/v1/appeals/{appeal_id}/decide/", {"outcome": "accept", "reason": "ok"},
                             format="json")
    mine = expert_api.get("/api/v1/appeals/mine/")

    assert refused.status_code == 404
    assert created.status_code == 201 and created.json()["rejected_reason"] == "spam"
    assert (twice.status_code, twice.json()["code"]) == (409, "appeal_exists")
    assert [a["id"] for a in queue.json()] == [appeal_id]
    assert decided.status_code == 200 and decided.json()["status"] == "accepted"
    assert (again.status_code, again.json()["code"]) == (409, "appeal_already_decided")
    assert mine.json()[0]["decision_reason"] == "ok" and mine.json()[0]["credited"] is not None
    assert stranger_api.get(f"/api/v1/appeals/to-decide/?project={project.pk}").status_code == 404
    assert LedgerEntry.objects.filter(kind="adjustment").count() == 1


@pytest.mark.django_db
def test_a_gold_expert_finds_the_queue_from_their_appeals_page_and_denies(rejected, client):
    from annotation.services import project_add_member

    project, _pm, contested = rejected
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)
    gold = make_expert("gold")
    project_add_member(project=project, user=gold)
    client.force_login(gold)

    mine = client.get("/payments/appeals/").content.decode()
    queue = client.get(f"/payments/projects/{project.pk}/appeals/")
    denied = client.post(f"/payments/appeals/{appeal.pk}/decide/", {"outcome": "deny",
                                                                    "decision_reason": "Spam indeed."})

    assert f"/payments/projects/{project.pk}/appeals/" in mine
    assert queue.status_code == 200 and b'class="subnav"' not in queue.content  # no PM tabs for an expert
    assert denied.status_code == 302
    appeal.refresh_from_db()
    assert (appeal.status, appeal.decided_by) == ("denied", gold)
    assert LedgerEntry.objects.filter(kind="adjustment").count() == 0


@pytest.mark.django_db
def test_the_queue_reads_a_bounded_number_of_queries_whatever_the_number_of_appeals(
        client, monkeypatch, django_assert_max_num_queries):
    monkeypatch.setattr(rejection, "task_send_on_commit", lambda name, **kw: None)
    pm, decider = PMFactory(), PMFactory()
    experts = [make_expert() for _ in range(6)]
    project = make_paid_project(experts=[*experts, pm, decider], n_questions=2)
    for expert in experts:
        contested = _submit(expert, project, 0)
        submission_reject(actor=pm, assignment_id=contested.pk, reason="spam", reason_code="spam", now=T0)
        appeal_create_for_rejection(expert=expert, assignment_id=contested.pk, reason="no", now=T0)
    client.force_login(decider)

    with django_assert_max_num_queries(11):
        page = client.get(f"/payments/projects/{project.pk}/appeals/")

    assert page.content.decode().count('class="stack appeal-decide"') == 6


@pytest.mark.django_db
def test_accepting_asks_for_a_report_recompute_like_the_rejection_did(rejected, monkeypatch):
    project, _pm, contested = rejected
    sent: list[tuple] = []
    monkeypatch.setattr(rejection, "task_send_on_commit", lambda name, **kw: sent.append((name, kw)))
    appeal = appeal_create_for_rejection(expert=contested.expert, assignment_id=contested.pk, reason="no", now=T0)

    appeal_decide(actor=_second_pm(project), appeal_id=appeal.pk, outcome="accept", reason="ok", now=T0)

    assert sent == [("annotation.agreement_report_request", {"project_id": project.pk})]
