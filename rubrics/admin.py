"""Django admin for the taxonomy and rubric versions.

A published version and its items are shown read-only. The database trigger
(rubrics/migrations/0002) is the real guard; this keeps the admin from offering a form
that could only fail.
"""
from django.contrib import admin

from rubrics.models import Dimension, Rubric, RubricItem, RubricVersion


@admin.register(Dimension)
class DimensionAdmin(admin.ModelAdmin):
    list_display = ("code", "name_zh", "name_en", "category", "is_gate", "sort_order")
    list_filter = ("category",)


@admin.register(Rubric)
class RubricAdmin(admin.ModelAdmin):
    list_display = ("name", "created_at")


class RubricItemInline(admin.TabularInline):
    model = RubricItem
    extra = 0
    fields = ("item_key", "question_ref", "position", "dimension", "score", "content")
    show_change_link = True

    def _published(self, obj) -> bool:
        return obj is not None and obj.is_published

    def has_add_permission(self, request, obj=None) -> bool:
        return not self._published(obj) and super().has_add_permission(request, obj)

    def has_change_permission(self, request, obj=None) -> bool:
        return not self._published(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return not self._published(obj) and super().has_delete_permission(request, obj)


@admin.register(RubricVersion)
class RubricVersionAdmin(admin.ModelAdmin):
    """Versions are published through the PM's rubric page or the API (changelog, calibration)."""

    list_display = ("rubric", "number", "status", "published_at")
    list_filter = ("status",)
    readonly_fields = ("rubric", "number", "status", "published_at", "created_at")
    inlines = [RubricItemInline]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return (obj is None or not obj.is_published) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return (obj is None or not obj.is_published) and super().has_delete_permission(request, obj)


@admin.register(RubricItem)
class RubricItemAdmin(admin.ModelAdmin):
    list_display = ("item_key", "version", "dimension", "score")
    list_filter = ("version__status", "dimension")
    search_fields = ("item_key", "content")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return (obj is None or not obj.version.is_published) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return (obj is None or not obj.version.is_published) and super().has_delete_permission(request, obj)
