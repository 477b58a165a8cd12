"""The database connection dropped in the middle of a submission: nothing of it stays, and the
retry with the same Idempotency-Key records it once."""
import re

import pytest
from django.db import close_old_connections, connection
from rest_framework.test import APIClient

from annotation.models import Assignment, IdempotencyRecord, Label
from payments.models import LedgerEntry
from tests.payments.factories import make_expert, make_paid_project
from tests.support.faults import books_and_consensus_clean, side_connection, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres,
              pytest.mark.usefixtures("post_migrate_rows")]


def _drop_after_the_labels_insert():
    """A query wrapper: once the labels are inserted, another session ends this one's backend.

    On PostgreSQL the labels go in with the statement that turns the lease into a submission
    (annotation.submission.services._MARK_SUBMITTED_SQL); elsewhere in a statement of their own."""
    fired = []
    writes_labels = re.compile(rf'INSERT INTO "?{Label._meta.db_table}"? \(')

    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not fired and writes_labels.search(sql):
            fired.append(True)
            pid = context["connection"].connection.info.backend_pid
            with side_connection() as side:
                side.autocommit = True
                side.execute("SELECT pg_terminate_backend(%s)", [pid])
                wait_for(lambda: not side.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone(),
                         what="the backend to end")
        return result

    return wrapper, fired


def test_a_submission_whose_connection_drops_leaves_nothing_and_its_retry_succeeds_once():
    expert = make_expert()
    project = make_paid_project(experts=[expert], n_questions=1, overlap=1)
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(expert)
    lease = client.post(f"/api/v1/projects/{project.pk}/next-task/").json()
    labels = {str(item["id"]): value for item, value in zip(lease["rubric_items"], (1, 0), strict=True)}
    submit = f"/api/v1/assignments/{lease['id']}/submit/"
    wrapper, fired = _drop_after_the_labels_insert()

    with connection.execute_wrapper(wrapper):
        failed = client.post(submit, {"labels": labels}, format="json", HTTP_IDEMPOTENCY_KEY="drop-1")
    # Outside tests Django closes an unusable connection when the request ends; the test client does not.
    close_old_connections()
    connection.close()

    assert fired and failed.status_code == 500
    assert not Label.objects.exists()
    assert Assignment.objects.get(pk=lease["id"]).status == Assignment.Status.LEASED
    assert not IdempotencyRecord.objects.exists()  # a failure is never replayed as the answer

    retried = client.post(submit, {"labels": labels}, format="json", HTTP_IDEMPOTENCY_KEY="drop-1")
    again = client.post(submit, {"labels": labels}, format="json", HTTP_IDEMPOTENCY_KEY="drop-1")

    assert (retried.status_code, again.status_code) == (201, 201)
    assert retried.json()["task_complete"] is True
    assert again.json() == retried.json()
    assert Label.objects.count() == 2
    assert LedgerEntry.objects.filter(assignment_id=lease["id"]).count() == 1
    books_and_consensus_clean()
