"""Webhooks: endpoints a project registers, the messages sent to them and each delivery attempt."""
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class WebhookEvent(models.TextChoices):
    TASK_COMPLETED = "task.completed", _("A task is complete")
    CONSENSUS_READY = "consensus.ready", _("A task's consensus is written")
    JUDGE_RUN_FINISHED = "judge_run.finished", _("A judge run finished")
    EXPORT_READY = "export.ready", _("An export file is ready")
    STATEMENT_ISSUED = "statement.issued", _("Statements of a period are issued")


class WebhookEndpoint(models.Model):
    """An HTTPS URL of a project that receives the events it subscribed to, signed with its secret.

    The secret is stored encrypted (annotation.webhooks.secrets): the server needs its
    plaintext to sign, and shows it only once, when the endpoint is created.
    """

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.URLField(max_length=500)
    events = models.JSONField(default=list)
    secret_encrypted = models.TextField()
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["project", "id"]

    def __str__(self) -> str:
        return f"webhook {self.pk} of project {self.project_id}: {self.url}"


class WebhookMessage(models.Model):
    """One event for one endpoint: the payload (signed anew at each attempt) and where it stands."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting")
        DELIVERED = "delivered", _("Delivered")
        FAILED = "failed", _("Failed")

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="messages")
    event = models.CharField(max_length=32, choices=WebhookEvent.choices)
    event_id = models.UUIDField(default=uuid.uuid4, editable=False)
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempt_count = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["endpoint", "-created_at"], name="webhook_message_endpoint_idx")]
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "event_id"], name="webhook_message_once_per_endpoint"),
            models.CheckConstraint(condition=Q(status="delivered", delivered_at__isnull=False)
                                   | (~Q(status="delivered") & Q(delivered_at__isnull=True)),
                                   name="webhook_message_delivered_at"),
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.event_id} to endpoint {self.endpoint_id} ({self.status})"


class WebhookAttempt(models.Model):
    """One HTTP attempt: the status code or the error class and how long it took; never the target's body."""

    message = models.ForeignKey(WebhookMessage, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveSmallIntegerField()
    at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error_class = models.CharField(max_length=32, blank=True)
    duration_ms = models.PositiveIntegerField()

    class Meta:
        ordering = ["message", "number"]
        constraints = [models.UniqueConstraint(fields=["message", "number"], name="webhook_attempt_number_once")]

    def __str__(self) -> str:
        return f"attempt {self.number} of message {self.message_id}: {self.status_code or self.error_class}"
