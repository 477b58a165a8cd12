"""The outbox: follow-up work written in the transaction that causes it (core.after_commit)."""
from django.db import models
from django.db.models import Q


class OutboxTask(models.Model):
    """One Celery task to run because a transaction committed, kept until a worker ran it.

    The row commits with the work that asks for it, so a broker that is down at commit
    time (or a message lost with a worker) loses nothing: the sweep (`core.outbox_sweep`)
    sends again every row whose task has not finished by `next_check_at`. Tasks are
    idempotent, so a second delivery is harmless.
    """

    name = models.CharField(max_length=200)
    kwargs = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    # Not before: the countdown the sender asked for.
    due_at = models.DateTimeField()
    # When the sweep looks again if the task has not finished by then.
    next_check_at = models.DateTimeField()
    # Messages sent so far (the send on commit and each sweep's).
    attempts = models.PositiveIntegerField(default=0)
    # A batch (`core.follow_ups_run`): how many of its tasks have run, each counted in its own
    # transaction, so a redelivery starts where the last run stopped.
    steps_done = models.PositiveIntegerField(default=0)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["next_check_at"], condition=Q(done_at__isnull=True),
                                name="outbox_pending_idx"),
                   models.Index(fields=["done_at"], condition=Q(done_at__isnull=False), name="outbox_done_idx"),
                   # The drain's look at the pending batches, oldest first (core.outbox.follow_ups_drain):
                   # the done rows kept for a day are not in it.
                   models.Index(fields=["id"], condition=Q(done_at__isnull=True, name="core.follow_ups_run"),
                                name="outbox_batch_pending_idx")]

    def __str__(self) -> str:
        return f"{self.name} #{self.pk}"

    @property
    def message_id(self) -> str:
        return f"{OUTBOX_ID_PREFIX}{self.pk}"


# Celery task ids of outbox messages: "outbox-<row id>", the same for every send of a row, so
# a task can tell a redelivery of its own message from another request (annotation.agreement).
OUTBOX_ID_PREFIX = "outbox-"
