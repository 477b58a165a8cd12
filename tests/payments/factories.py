"""Payments test data: projects with experts who claim and submit through the real services."""
from datetime import datetime, timedelta
from itertools import count
from zoneinfo import ZoneInfo

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, Project, Question
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from experts.models import ExpertProfile, Role, User
from payments.ledger import ledger_post_earning
from tests.factories import make_project_with_tasks

SHANGHAI = ZoneInfo("Asia/Shanghai")
# Monday 10:00 in the week [2025-03-03, 2025-03-10) of the default weekly grid (anchor 2024-01-01).
T0 = datetime(2025, 3, 3, 10, 0, tzinfo=SHANGHAI)
WEEK_START = datetime(2025, 3, 3, tzinfo=SHANGHAI)
WEEK_END = datetime(2025, 3, 10, tzinfo=SHANGHAI)

_numbers = count(1)


def make_expert(tier: str = "bronze") -> User:
    """An expert account with a profile; no password hashing, so property tests stay fast."""
    user = User.objects.create(username=f"payee{next(_numbers)}", role=Role.EXPERT)
    ExpertProfile.objects.create(user=user, tier=tier)
    return user


def make_paid_project(*, experts: list[User], n_questions: int = 4, overlap: int = 3) -> Project:
    project = make_project_with_tasks(n_questions=n_questions, items_per_question=2, overlap=overlap)
    for expert in experts:
        project_add_member(project=project, user=expert)
    return project


def set_difficulty(project: Project, difficulty: str) -> None:
    Question.objects.filter(project=project).update(difficulty=difficulty)


def set_tier(expert: User, tier: str) -> None:
    ExpertProfile.objects.filter(user=expert).update(tier=tier)


def submit(project: Project, expert: User, now: datetime, *, kind: str = Assignment.Kind.WORK) -> Assignment | None:
    """Claim the expert's next task and submit all items as hit; None when no task is left.

    `kind="calibration"` turns the lease into a calibration assignment before it is submitted.
    """
    lease = assignment_claim_next(project=project, expert=expert, now=now - timedelta(minutes=5))
    if lease is None:
        return None
    if kind != Assignment.Kind.WORK:
        Assignment.objects.filter(pk=lease.pk).update(kind=kind)
    labels = {item.item_key: 1 for item in rubric_items_for_task(lease.task)}
    return labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=now).assignment


def submit_and_post(project: Project, expert: User, now: datetime):
    """Submit, then post the earning as the `payments.ledger_post_earning` task would right after commit."""
    assignment = submit(project, expert, now)
    assert assignment is not None
    return ledger_post_earning(assignment_id=assignment.pk, now=now)
