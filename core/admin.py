"""Admin pieces every app shares."""
from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from core.models import OutboxTask


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """View-only: rows whose invariants the database guards (append-only money, submitted work).

    The admin would otherwise offer edits that the triggers refuse with a server error.
    """

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(OutboxTask)
class OutboxTaskAdmin(ReadOnlyAdmin):
    """Follow-up work still pending (or given up after its attempts) is visible to an operator."""

    list_display = ("pk", "name", "created_at", "attempts", "next_check_at", "done_at")
    list_filter = ("name",)
    search_fields = ("name",)
