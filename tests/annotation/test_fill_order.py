"""Fill order: by default experts finish the tasks others started before beginning new ones, so a
PM sees consensus early; "spread evenly" keeps the plain random draw over every open task."""
import random

import pytest
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, FillOrder, Project, Task
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from experts.models import ExpertProfile
from tests.factories import ExpertFactory
from tests.support.scale import project_at_scale

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

TASKS = 10_000
SUBMISSIONS = 600
EXPERTS = 12


def _work(project: Project, *, seed: int) -> int:
    """SUBMISSIONS claims and submissions by a pool of experts in random order; returns complete tasks."""
    rng = random.Random(seed)
    experts = [ExpertFactory() for _ in range(EXPERTS)]
    for expert in experts:
        project_add_member(project=project, user=expert)
    ExpertProfile.objects.filter(user__in=experts).update(weekly_capacity=SUBMISSIONS)
    for _ in range(SUBMISSIONS):
        expert = rng.choice(experts)
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now(), rng=rng)
        assert lease is not None
        labels = {i.item_key: rng.randint(0, 1) for i in rubric_items_for_task(lease.task)}
        labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
    assert Assignment.objects.filter(task__project=project, status="submitted").count() == SUBMISSIONS
    return Task.objects.filter(project=project, status=Task.Status.COMPLETE).count()


def test_by_default_600_submissions_over_10000_tasks_complete_at_least_190():
    project = project_at_scale(tasks=TASKS, questions=10, items=2)
    assert project.fill_order == FillOrder.FINISH_STARTED

    complete = _work(project, seed=1)

    assert complete >= 190
    # Distinctness and overlap still hold: three distinct experts on each complete task.
    for task in Task.objects.filter(project=project, status=Task.Status.COMPLETE)[:50]:
        experts = list(Assignment.objects.filter(task=task, status="submitted").values_list("expert_id", flat=True))
        assert len(experts) == len(set(experts)) == 3


def test_spread_evenly_keeps_the_plain_draw_and_completes_almost_nothing():
    project = project_at_scale(tasks=TASKS, questions=10, items=2, fill_order=FillOrder.SPREAD_EVENLY)

    complete = _work(project, seed=2)

    touched = Task.objects.filter(project=project, live_count__gt=0).count()
    assert complete <= 10
    assert touched >= 500  # 600 labels over ~10,000 tasks: nearly every one on a task of its own
