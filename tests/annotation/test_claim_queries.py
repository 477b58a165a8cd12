"""Query counts on the hot path, for a veteran expert (about 4,000 labels, golden history included) on a
project of 100,000 tasks: "next task" and a submission each send a fixed number of statements to the
database, whatever the expert's history and the project's size (their cost does not grow with either).

Counted as production sends them: with a broker (the outbox on, messages recorded instead of sent) and
without the SAVEPOINT/RELEASE pairs that the test's own transaction turns each `transaction.atomic` into
(in production the outermost one is a BEGIN and a COMMIT, which Django does not log either).
"""
import random
from typing import Any

import pytest
from celery import current_app
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

import core.after_commit as after_commit
from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, Consultation, ConsultationParticipant, Label, Task
from annotation.selectors import rubric_items_for_task, rubric_items_forget
from annotation.services import project_add_member
from core.models import OutboxTask
from experts.models import User
from tests.factories import ExpertFactory, make_project_with_tasks
from tests.support.scale import veteran_world

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

# next-task through the API: the token with its user and expert profile (1); the claim's transaction:
# the expert's profile, locked (1); the project with its rubric, the annotate permission (the user's own
# or a group's), a lease already held, a passed calibration, the current rubric version, live leases and
# this week's work, and the matching strengths (1); the draw: up to three candidates, each past its own
# random point of the ring of started tasks, else of all open tasks, locked, with their dimensions (1);
# the lease: the assignment in the task's lowest free slot and the task's count, one statement (1); the
# response's rubric items (1).
CLAIM_API_QUERIES = 6
# The service alone: the above less token and rubric items.
CLAIM_SERVICE_QUERIES = 4
# submit through the API: token with user and profile (1); idempotency key lookup (1); the assignment
# with its task, response, question, version, project and the expert's profile, for their tier (1);
# rubric items (1); task lock (1); lease to submission, draft, labels, task count and "consensus already
# written?" in one statement (1); the panel's peer tally, one INSERT ... SELECT (1); one outbox row for
# the follow-up work (1); INSERT idempotency record (1).
SUBMIT_API_QUERIES = 9
COMPLETING_SUBMIT_API_QUERIES = 12
# A completing submission whose panel split also opens consultations (the items that ever had one come with
# the consensus's read of the labels): the consultations with their panels (1), the panels' notifications,
# deciding who is emailed (1).
CONSULTING_SUBMIT_API_QUERIES = COMPLETING_SUBMIT_API_QUERIES + 2


def _statements(context: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in context.captured_queries
            if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT"))]


def _client(api, expert):
    token = Token.objects.get_or_create(user=expert)[0]
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api


@pytest.fixture
def broker(monkeypatch):
    """Production's follow-up path: outbox rows in the transaction, messages recorded on commit."""
    sent: list[str] = []
    monkeypatch.setattr(current_app.conf, "task_always_eager", False)
    monkeypatch.setattr(after_commit, "task_send", lambda name, **kwargs: sent.append(name))
    after_commit.drain_queued_flag(set_it=False)  # an earlier test's drain, which nobody ran
    return sent


def test_next_task_and_submit_for_a_veteran_on_100000_tasks_make_a_fixed_number_of_queries(
        api, broker, django_capture_on_commit_callbacks):
    # One world for the three measures: it takes about 30 s to build.
    project, expert = veteran_world(tasks=100_000, labels=4000, control_rate_pct=0)
    assert Label.objects.filter(assignment__expert=expert).count() >= 3900
    client = _client(api, expert)

    with CaptureQueriesContext(connection) as service:
        first = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    Assignment.objects.filter(pk=first.pk).update(status=Assignment.Status.RELEASED)
    Task.objects.filter(pk=first.task_id).update(live_count=0)
    rubric_items_forget()  # the bounds hold for a process that has kept no rubric items yet
    with CaptureQueriesContext(connection) as claim:
        claimed = client.post(reverse("api-next-task", args=[project.pk]))
    lease = Assignment.objects.get(pk=claimed.json()["id"])
    labels = {item.item_key: 1 for item in rubric_items_for_task(lease.task)}
    rubric_items_forget()
    with django_capture_on_commit_callbacks(execute=True), CaptureQueriesContext(connection) as submit:
        submitted = client.post(reverse("api-submit", args=[lease.pk]), {"labels": labels}, format="json",
                                HTTP_IDEMPOTENCY_KEY="veteran-1")

    assert first is not None and first.task_id != lease.task_id
    assert claimed.status_code == 200
    assert submitted.status_code == 201
    assert len(_statements(service)) <= CLAIM_SERVICE_QUERIES, "\n".join(_statements(service))
    assert len(_statements(claim)) <= CLAIM_API_QUERIES, "\n".join(_statements(claim))
    assert len(_statements(submit)) <= SUBMIT_API_QUERIES, "\n".join(_statements(submit))
    # The follow-up work went out as one outbox row, and one message for a drain to run it.
    assert list(OutboxTask.objects.values_list("name", flat=True)) == ["core.follow_ups_run"]
    assert broker == ["core.follow_ups_drain"]


def _panel_submits(api, project, experts, value_of) -> tuple[Any, Task, list[str]]:
    """Each of `experts` in turn takes the next task and submits `value_of(n)` on every item (n: their turn);
    the last answer, its task and the statements its submission sent."""
    for n, member in enumerate(experts):
        client = _client(api, member)
        claimed = client.post(reverse("api-next-task", args=[project.pk]))
        assert claimed.status_code == 200, claimed.content
        lease = Assignment.objects.get(pk=claimed.json()["id"])
        labels = {item.item_key: value_of(n) for item in rubric_items_for_task(lease.task)}
        rubric_items_forget()
        with CaptureQueriesContext(connection) as submit:
            answer = client.post(reverse("api-submit", args=[lease.pk]), {"labels": labels}, format="json",
                                 HTTP_IDEMPOTENCY_KEY=f"panel-{n}")
        assert answer.status_code == 201
    return answer, lease.task, _statements(submit)


def _panel_project() -> tuple[Any, list[Any]]:
    project = make_project_with_tasks(n_questions=1, items_per_question=10, overlap=3)
    experts = [ExpertFactory() for _ in range(3)]
    for member in experts:
        project_add_member(project=project, user=member)
    return project, experts


def test_a_submission_that_completes_its_task_stays_within_a_fixed_number_of_queries(api, broker):
    """The last submission of a panel also writes the consensus: a few statements more, still fixed."""
    project, experts = _panel_project()
    answer, _task, statements = _panel_submits(api, project, experts, lambda n: 1)
    assert answer.json()["task_complete"] is True
    # The consensus: the panel's labels read with their items' adjudications, stale rows dropped (not on a
    # first completion), the items' rows written (3); the webhook endpoints are not read (the submission's
    # statement found none active); the agreement request joins the same outbox row.
    assert len(statements) <= COMPLETING_SUBMIT_API_QUERIES, "\n".join(statements)
    assert OutboxTask.objects.filter(name="core.follow_ups_run").count() == 3


def test_a_completing_submission_that_opens_consultations_on_several_items_stays_within_a_fixed_number(api, broker):
    """The panel split on every item: each gets a consultation, its panel and their notifications, in a
    fixed number of statements however many items."""
    from experts.models import Notification

    project, experts = _panel_project()
    project.consult_on_many_splits, project.consult_split_share_pct = True, 33
    project.save(update_fields=["consult_on_many_splits", "consult_split_share_pct"])
    answer, task, statements = _panel_submits(api, project, experts, lambda n: int(n < 2))
    assert answer.json()["task_complete"] is True
    assert Consultation.objects.filter(task=task).count() == 10
    panel = {(c, u) for c, u in ConsultationParticipant.objects.values_list("consultation__rubric_item_id", "user_id")}
    assert panel == {(item.pk, e.pk) for item in rubric_items_for_task(task) for e in experts}
    votes = Notification.objects.filter(kind="consultation_vote")
    assert sorted(votes.values_list("user_id", flat=True)) == sorted([e.pk for e in experts] * 10)
    assert {n.email_status for n in votes} == {""}  # nobody asked for these by email
    by_key = dict(Consultation.objects.filter(task=task).values_list("rubric_item__item_key", "pk"))
    assert all(n.link == reverse("consultation_detail", args=[by_key[n.params["item"]]]) for n in votes)
    assert len(statements) <= CONSULTING_SUBMIT_API_QUERIES, "\n".join(statements)


def test_the_claims_and_submissions_statements_are_planned_once_per_connection(broker):
    """Veterans on 10,000 tasks, with the statistics a working database has: after their first runs on a
    connection, the statements of "next task" and of a submission (and of the consensus it writes) run
    on the plan PostgreSQL kept for them, instead of being planned again each time (for some, planning
    cost more than running)."""
    from annotation.submission.services import labels_submit
    from tests.support.scale import agreeing_label

    project, _first = veteran_world(tasks=10_000, labels=4000, items=10, veterans=8, golden=400, control=100,
                                    control_rate_pct=0)
    experts = list(User.objects.filter(assignments__task__project=project).distinct().order_by("pk"))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    before = _plans()
    rng = random.Random(4)
    rounds = 12
    for _ in range(rounds):
        for expert in experts:
            lease = assignment_claim_next(project=project, expert=expert, now=timezone.now(), rng=rng)
            labels = {item.item_key: agreeing_label(item.item_key, rng) for item in rubric_items_for_task(lease.task)}
            labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())

    after = _plans()
    assert Task.objects.filter(project=project, status=Task.Status.COMPLETE).count() >= 3  # consensus written
    assert len(after) > 10
    # PostgreSQL plans a prepared statement for each of its first five runs, then keeps one plan if it is
    # not dearer than theirs.
    replanned = [f"{custom - before.get(statement, (0, 0))[0]} more custom plans, {generic} generic: {statement[:300]}"
                 for statement, (custom, generic) in after.items() if custom - before.get(statement, (0, 0))[0] > 5]
    assert replanned == [], "\n".join(replanned)


def _plans() -> dict[str, tuple[int, int]]:
    """{statement: (custom plans, generic plans)} of this connection's prepared statements."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, custom_plans, generic_plans FROM pg_prepared_statements")
        return {statement: (custom, generic) for statement, custom, generic in cursor.fetchall()}
