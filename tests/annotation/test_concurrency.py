"""16 experts pull and submit at once against PostgreSQL; the assignment rules must hold."""
import random
import threading

import pytest
from django.db import connection, connections
from django.db.models import Count
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, Task
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from tests.factories import ExpertFactory, make_project_with_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def _work(project, expert, errors):
    try:
        for _ in range(200):
            lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
            if lease is None:
                return
            keys = [i.item_key for i in rubric_items_for_task(lease.task)]
            labels = {k: random.randint(0, 1) for k in keys}
            labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
    except Exception as exc:  # collected and asserted on in the main thread
        errors.append(exc)
    finally:
        connections.close_all()


def test_sixteen_concurrent_experts_fill_every_task_exactly():
    assert connection.vendor == "postgresql"
    project = make_project_with_tasks(n_questions=30, items_per_question=3)
    experts = [ExpertFactory() for _ in range(16)]
    for e in experts:
        project_add_member(project=project, user=e)
    errors: list[Exception] = []

    threads = [threading.Thread(target=_work, args=(project, e, errors)) for e in experts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    assert errors == []
    per_task = Assignment.objects.filter(status__in=["leased", "submitted"]).values("task").annotate(n=Count("id"))
    assert {row["n"] for row in per_task} == {3}
    assert not Assignment.objects.values("task", "expert").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert Task.objects.filter(status="complete").count() == 30
    assert Task.objects.exclude(status="complete").count() == 0
    assert set(Task.objects.values_list("submitted_count", flat=True)) == {3}
