"""Reads of a project's webhooks for its PM: endpoints and the delivery log."""
from django.db.models import Prefetch, QuerySet

from annotation.models import Project, WebhookAttempt, WebhookEndpoint, WebhookMessage
from core.errors import NotFound

LOG_LIMIT = 100


def webhook_endpoints_for_project(project: Project) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(project=project).order_by("-is_active", "-created_at", "-pk")


def webhook_log_for_project(project: Project, *, limit: int = LOG_LIMIT) -> list[WebhookMessage]:
    """The newest messages of the project's endpoints with their attempts, in two queries."""
    return list(WebhookMessage.objects.filter(endpoint__project=project).select_related("endpoint")
                .prefetch_related(Prefetch("attempts", queryset=WebhookAttempt.objects.order_by("number")))
                .order_by("-created_at", "-pk")[:limit])


def webhook_endpoint_get(project: Project, endpoint_id: object) -> WebhookEndpoint:
    """The project's endpoint, or NotFound (also for another project's id)."""
    try:
        return WebhookEndpoint.objects.get(pk=int(str(endpoint_id)), project=project)
    except (WebhookEndpoint.DoesNotExist, ValueError):
        raise NotFound("No such webhook endpoint.") from None
