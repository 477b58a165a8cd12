"""Celery tasks of the annotation app: thin, idempotent wrappers over services.

Each task is named after the service it wraps (`annotation.leases_expire` calls
`leases_expire`), takes keyword arguments only, and is sent after commit through
`core.after_commit.task_send_on_commit`.
"""
from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from annotation.assignment.services import leases_expire
from annotation.quality.standing import expert_evaluate
from experts.models import User


@shared_task(name="annotation.leases_expire", acks_late=True, soft_time_limit=60, time_limit=90)
def leases_expire_task() -> int:
    """Return overdue leases to the pool (beat runs it every minute; claims also sweep)."""
    total = 0
    while (n := leases_expire(now=timezone.now())) > 0:
        total += n
    return total
from annotation.agreement.tasks import *  # noqa: F401,F403
from annotation.benchmark_report.tasks import *  # noqa: F401,F403
from annotation.consultations.tasks import *  # noqa: F401,F403
from annotation.exchange.tasks import *  # noqa: F401,F403
from annotation.judging.tasks import *  # noqa: F401,F403
from annotation.reveal.tasks import *  # noqa: F401,F403
from annotation.review.tasks import *  # noqa: F401,F403
from annotation.webhooks.tasks import *  # noqa: F401,F403
from annotation.workload.tasks import *  # noqa: F401,F403


# coalesce: a drain runs one evaluation per expert for its rows, last; lock_order: it may lock the
# expert's profile, 6th in annotation.lock_objects' order.
@shared_task(name="annotation.expert_evaluate", acks_late=True, batchable=True, coalesce=True, lock_order=6,
             soft_time_limit=60, time_limit=90, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5)
def expert_evaluate_task(*, user_id: int) -> int:
    """Re-apply the tier rules to one expert after a submission; returns the number of tier changes."""
    user = User.objects.filter(pk=user_id).first()
    if user is None:
        return 0
    return len(expert_evaluate(expert=user, now=timezone.now()))
