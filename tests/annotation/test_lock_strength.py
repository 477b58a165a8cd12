"""Row locks exclude each other but not the foreign-key checks of rows that name the locked row.

The annotation locks are FOR NO KEY UPDATE (`annotation.lock_objects`): a commit that wrote a
row naming a locked task or expert profile goes through at once, while a second locker waits.
Real threads, real PostgreSQL; a wait that should not happen fails on `lock_timeout`.
"""
import threading

import pytest
from django.db import OperationalError, connection, connections, transaction
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.lock_objects import expert_profile_lock, task_lock
from annotation.models import TaskSkip
from annotation.services import project_add_member
from experts.models import ExpertProfile, TierChange
from tests.factories import ExpertFactory, make_project_with_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


class Holder:
    """Holds one lock in its own thread and connection until released."""

    def __init__(self, take) -> None:
        self.take, self.held, self.done = take, threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            with transaction.atomic():
                self.take()
                self.held.set()
                self.done.wait(10)
        finally:
            connections.close_all()

    def __enter__(self) -> "Holder":
        self.thread.start()
        assert self.held.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join(10)


def _lock_timeout(ms: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{ms}ms'")


def _lease():
    project = make_project_with_tasks(n_questions=1)
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    return assignment_claim_next(project=project, expert=expert, now=timezone.now())


def test_a_skip_naming_a_locked_task_commits_while_the_task_stays_locked_to_other_lockers():
    assert connection.vendor == "postgresql"
    lease = _lease()
    with Holder(lambda: task_lock(lease.task_id)):
        with transaction.atomic():
            _lock_timeout(2000)
            TaskSkip.objects.create(assignment=lease, project_id=lease.task.project_id, task_id=lease.task_id,
                                    expert=lease.expert, reason=TaskSkip.Reason.NOT_MY_FIELD, text="",
                                    created_at=timezone.now())
        with pytest.raises(OperationalError, match="lock timeout"), transaction.atomic():
            _lock_timeout(300)
            task_lock(lease.task_id)
    assert TaskSkip.objects.filter(assignment=lease).exists()


def test_a_tier_change_naming_a_locked_profile_commits_while_the_profile_stays_locked():
    expert = ExpertFactory()
    profile = ExpertProfile.objects.get(user=expert)
    with Holder(lambda: expert_profile_lock(expert.pk)):
        with transaction.atomic():
            _lock_timeout(2000)
            TierChange.objects.create(profile=profile, from_tier=profile.tier, to_tier="silver",
                                      reason="test", changed_at=timezone.now())
        with pytest.raises(OperationalError, match="lock timeout"), transaction.atomic():
            _lock_timeout(300)
            expert_profile_lock(expert.pk)
    assert TierChange.objects.filter(profile=profile).count() == 1
