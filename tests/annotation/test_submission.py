"""Submission is all labels or nothing, idempotent, and writes consensus with the last label."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, Draft, ItemConsensus, Label, Task
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.consensus import consensus_compute, majority_of
from annotation.submission.services import draft_save, labels_submit
from core.errors import Conflict, DomainError, NotFound
from tests.factories import ExpertFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup():
    project = make_project_with_tasks(n_questions=1, items_per_question=3)
    experts = [ExpertFactory() for _ in range(3)]
    for e in experts:
        project_add_member(project=project, user=e)
    leases = [assignment_claim_next(project=project, expert=e, now=timezone.now()) for e in experts]
    keys = [i.item_key for i in rubric_items_for_task(leases[0].task)]
    return experts, leases, keys


def test_a_partial_submission_writes_nothing_and_names_the_missing_items(setup):
    experts, leases, keys = setup

    with pytest.raises(DomainError) as err:
        labels_submit(expert=experts[0], assignment_id=leases[0].pk, labels={keys[0]: 1}, now=timezone.now())

    assert {e["field"] for e in err.value.errors} == {f"labels.{k}" for k in keys[1:]}
    assert Label.objects.count() == 0
    leases[0].refresh_from_db()
    assert leases[0].status == "leased"


@pytest.mark.parametrize("bad", [2, "1", True, None, 0.5])
def test_values_other_than_0_or_1_are_refused(setup, bad):
    experts, leases, keys = setup
    labels = {k: 1 for k in keys} | {keys[1]: bad}

    with pytest.raises(DomainError, match="need attention"):
        labels_submit(expert=experts[0], assignment_id=leases[0].pk, labels=labels, now=timezone.now())
    assert Label.objects.count() == 0


def test_unknown_items_are_refused(setup):
    experts, leases, keys = setup

    with pytest.raises(DomainError):
        labels_submit(expert=experts[0], assignment_id=leases[0].pk,
                      labels={k: 1 for k in keys} | {"other:1": 0}, now=timezone.now())
    assert Label.objects.count() == 0


def test_each_label_error_carries_a_code(setup):
    experts, leases, keys = setup
    labels = {keys[0]: 2, "other:1": 0}

    with pytest.raises(DomainError) as err:
        labels_submit(expert=experts[0], assignment_id=leases[0].pk, labels=labels, now=timezone.now())

    codes = {e["field"]: e["code"] for e in err.value.errors}
    assert codes == {f"labels.{keys[0]}": "not_binary", "labels.other:1": "unknown_item",
                     f"labels.{keys[1]}": "missing", f"labels.{keys[2]}": "missing"}


def test_the_same_submission_twice_changes_nothing(setup):
    experts, leases, keys = setup
    labels = {k: 1 for k in keys}

    first = labels_submit(expert=experts[0], assignment_id=leases[0].pk, labels=labels, now=timezone.now())
    second = labels_submit(expert=experts[0], assignment_id=leases[0].pk, labels=labels, now=timezone.now())

    assert (first.created, second.created) == (True, False)
    assert Label.objects.count() == 3
    assert Task.objects.get().submitted_count == 1


def test_the_labels_are_written_with_the_submission_each_with_its_value_and_note_and_a_given_back_lease_writes_none(
        setup):
    """The labels travel in the statement that turns the lease into a submission (one statement on PostgreSQL):
    each item's value and note land on the expert's assignment, and a lease that was given back writes none."""
    experts, leases, keys = setup
    now = timezone.now()
    labels_submit(expert=experts[0], assignment_id=leases[0].pk, labels={keys[0]: 1, keys[1]: 0, keys[2]: 1},
                  notes={keys[1]: "用户在求助，不是在倾诉。"}, now=now)
    Assignment.objects.filter(pk=leases[1].pk).update(status=Assignment.Status.RELEASED)

    with pytest.raises(Conflict):
        labels_submit(expert=experts[1], assignment_id=leases[1].pk, labels={k: 1 for k in keys}, now=timezone.now())

    written = list(Label.objects.order_by("rubric_item__position").values_list(
        "assignment_id", "task_id", "rubric_item__item_key", "value", "note", "created_at"))
    task_id = leases[0].task_id
    assert written == [(leases[0].pk, task_id, keys[0], 1, "", written[0][5]),
                       (leases[0].pk, task_id, keys[1], 0, "用户在求助，不是在倾诉。", written[0][5]),
                       (leases[0].pk, task_id, keys[2], 1, "", written[0][5])]
    assert abs((written[0][5] - now).total_seconds()) < 5
    assert Task.objects.get().submitted_count == 1


def test_different_labels_after_submission_are_a_conflict(setup):
    experts, leases, keys = setup
    labels_submit(expert=experts[0], assignment_id=leases[0].pk, labels={k: 1 for k in keys}, now=timezone.now())

    with pytest.raises(Conflict):
        labels_submit(expert=experts[0], assignment_id=leases[0].pk, labels={k: 0 for k in keys},
                      now=timezone.now())
    assert sorted(Label.objects.values_list("value", flat=True)) == [1, 1, 1]


def test_another_experts_assignment_is_not_found(setup):
    experts, leases, keys = setup

    with pytest.raises(NotFound):
        labels_submit(expert=experts[1], assignment_id=leases[0].pk, labels={k: 1 for k in keys},
                      now=timezone.now())
    assert Label.objects.count() == 0


def test_consensus_appears_with_the_last_label(setup):
    experts, leases, keys = setup
    votes = [{keys[0]: 1, keys[1]: 1, keys[2]: 0},
             {keys[0]: 1, keys[1]: 0, keys[2]: 0},
             {keys[0]: 1, keys[1]: 1, keys[2]: 0}]

    for expert, lease, labels in zip(experts[:2], leases[:2], votes[:2]):
        labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
    assert ItemConsensus.objects.count() == 0
    labels_submit(expert=experts[2], assignment_id=leases[2].pk, labels=votes[2], now=timezone.now())

    rows = {c.rubric_item.item_key: (c.hit_votes, c.total_votes, c.majority, c.zone)
            for c in ItemConsensus.objects.select_related("rubric_item")}
    assert rows == {keys[0]: (3, 3, 1, "unanimous"), keys[1]: (2, 3, 1, "split"), keys[2]: (0, 3, 0, "unanimous")}
    assert Task.objects.get().status == "complete"


def test_the_first_consensus_of_a_task_deletes_nothing_but_a_rewrite_drops_rows_left_without_votes(setup):
    experts, leases, keys = setup
    for expert, lease in zip(experts[:2], leases[:2], strict=True):
        labels_submit(expert=expert, assignment_id=lease.pk, labels={k: 1 for k in keys}, now=timezone.now())

    with CaptureQueriesContext(connection) as completing:
        labels_submit(expert=experts[2], assignment_id=leases[2].pk, labels={k: 0 for k in keys}, now=timezone.now())

    # The task had no consensus rows under its lock: none can be stale.
    assert not [q["sql"] for q in completing.captured_queries
                if q["sql"].startswith("DELETE") and ItemConsensus._meta.db_table in q["sql"]]
    assert ItemConsensus.objects.count() == len(keys)
    # A row whose item has no counted label any more (a stray one, as a rejection or a new version
    # leaves) goes when the consensus is written again.
    task = Task.objects.get()
    stray = ItemConsensus.objects.first()
    Label.objects.filter(task=task, rubric_item_id=stray.rubric_item_id).delete()
    consensus_compute(task=task, now=timezone.now())
    assert not ItemConsensus.objects.filter(pk=stray.pk).exists()
    assert ItemConsensus.objects.count() == len(keys) - 1


def test_a_draft_keeps_partial_labels_and_is_cleared_by_submission(setup):
    experts, leases, keys = setup

    draft_save(expert=experts[0], assignment_id=leases[0].pk, labels={keys[0]: 0}, notes={keys[0]: "why"},
               now=timezone.now())
    assert Draft.objects.get().labels == {keys[0]: 0}
    labels_submit(expert=experts[0], assignment_id=leases[0].pk, labels={k: 0 for k in keys}, now=timezone.now())

    assert Draft.objects.count() == 0


@pytest.mark.parametrize(("hits", "total", "expected"), [
    (2, 3, (1, "split")), (1, 3, (0, "split")), (3, 3, (1, "unanimous")), (0, 3, (0, "unanimous")),
    (1, 2, (None, "tied")), (2, 4, (None, "tied")), (3, 4, (1, "split")), (1, 1, (1, "single")),
    (0, 1, (0, "single")),
])
def test_majority_rule(hits, total, expected):
    assert majority_of(hits, total) == expected
