"""Query counts on the hot path, for a veteran expert (about 4,000 labels, golden history included) on a
project of 100,000 tasks: "next task" and a submission each make a fixed number of queries, whatever
the expert's history and the project's size (their cost does not grow with either).

The budgets below are what the code makes today, query by query, through the API with token auth
inside the test's transaction (so each `transaction.atomic` shows as a SAVEPOINT and its RELEASE).
"""
import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, Label, Task
from annotation.selectors import rubric_items_for_task
from tests.support.scale import veteran_world

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

# next-task through the API: token + user (1); project with its rubric (1); the expert's object
# permissions, user and group (2); expert profile (1); a lease already held (1); a passed calibration (1);
# overdue leases to expire (1); current rubric version (1); matching strengths (1); SAVEPOINT (1); the
# draw (5 here: the ring of started tasks, two half-walks that find none free for this expert, then one
# query per candidate on the ring of all open tasks); the candidates' dimensions (1); expert profile lock
# (1); live leases and this week's work (1); INSERT assignment (1); UPDATE task (1); RELEASE (1); the
# response's rubric items (1); no draft query for a lease this request took. (The free slot of a started
# task is one more.)
CLAIM_API_QUERIES = 23
# The service alone: the above less token, project, rubric items and draft (the permissions are asked
# here, in the service, instead of by the view).
CLAIM_SERVICE_QUERIES = 20
# submit through the API: token + user (1); idempotency key lookup (1); the assignment with its task,
# response, question, version, project and the expert's profile, for their tier (1); rubric items (1);
# SAVEPOINT (1); task lock (1); assignment lock (1); INSERT labels (1); UPDATE assignment (1); DELETE
# draft (1); UPDATE task (1); the panel's peer tally, one INSERT ... SELECT (1); consensus already
# written? (1); RELEASE (1); SAVEPOINT, INSERT idempotency record, RELEASE (3).
SUBMIT_API_QUERIES = 17


def _client(api, expert):
    token = Token.objects.get_or_create(user=expert)[0]
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api


def test_next_task_and_submit_for_a_veteran_on_100000_tasks_make_a_fixed_number_of_queries(
        api, django_assert_max_num_queries):
    # One world for the three measures: it takes about 30 s to build.
    project, expert = veteran_world(tasks=100_000, labels=4000, control_rate_pct=0)
    assert Label.objects.filter(assignment__expert=expert).count() >= 3900
    client = _client(api, expert)

    with django_assert_max_num_queries(CLAIM_SERVICE_QUERIES):
        first = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    Assignment.objects.filter(pk=first.pk).update(status=Assignment.Status.RELEASED)
    Task.objects.filter(pk=first.task_id).update(live_count=0)
    with django_assert_max_num_queries(CLAIM_API_QUERIES):
        claimed = client.post(reverse("api-next-task", args=[project.pk]))
    lease = Assignment.objects.get(pk=claimed.json()["id"])
    labels = {item.item_key: 1 for item in rubric_items_for_task(lease.task)}
    with django_assert_max_num_queries(SUBMIT_API_QUERIES):
        submitted = client.post(reverse("api-submit", args=[lease.pk]), {"labels": labels}, format="json",
                                HTTP_IDEMPOTENCY_KEY="veteran-1")

    assert first is not None and first.task_id != lease.task_id
    assert claimed.status_code == 200
    assert submitted.status_code == 201
