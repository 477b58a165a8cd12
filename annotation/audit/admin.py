"""Audit entries for role and permission changes made in the Django admin.

Hooked on the ModelAdmin (`save_model` reads the row as it was, `save_related` compares once
the many-to-many fields are saved too, `delete_model`/`delete_queryset` record what goes)
rather than on the admin's `LogEntry`: a log entry names the fields that changed but not their
old and new values, and it is written after the change, outside what the admin saves. The
admin saves a change form and deletes in one transaction, so the entry commits with the
change or not at all; a change that touches no permission-bearing field writes none.

Used for accounts (role, active, staff, superuser, groups, permissions), groups (their
permissions) and django-guardian's object permissions, which are the project memberships.
"""
from typing import Any

from django.contrib import admin
from django.db import models, transaction
from django.http import HttpRequest

from annotation.audit.services import audit_record
from annotation.models import AuditAction, Project

_BEFORE = "_audit_before"


def _value(obj: models.Model, name: str) -> Any:
    field = obj._meta.get_field(name)
    if field.many_to_many:
        return sorted(str(related) for related in getattr(obj, name).all())
    if field.is_relation:
        return getattr(obj, f"{name}_id")
    return getattr(obj, name)


class AuditedAdminMixin:
    """Writes one `permission.change` audit entry per admin save or delete that changes `audit_fields`."""

    audit_fields: tuple[str, ...] = ()

    def audit_project_id(self, obj: models.Model) -> int | None:
        return None

    def _snapshot(self, obj: models.Model) -> dict[str, Any]:
        return {name: _value(obj, name) for name in self.audit_fields}

    def _stored(self, obj: models.Model) -> dict[str, Any]:
        if obj.pk is None:
            return {}
        row = type(obj)._default_manager.filter(pk=obj.pk).first()
        return self._snapshot(row) if row is not None else {}

    def _record(self, request: HttpRequest, obj: models.Model, details: dict[str, Any]) -> None:
        user = request.user if request.user.is_authenticated else None
        audit_record(actor=user, action=AuditAction.PERMISSION_CHANGE, project_id=self.audit_project_id(obj),
                     objects=[obj], details={"via": "admin", "object": str(obj), **details})

    def save_model(self, request: HttpRequest, obj: models.Model, form: Any, change: bool) -> None:
        setattr(form, _BEFORE, self._stored(obj) if change else {})
        super().save_model(request, obj, form, change)  # type: ignore[misc]

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)  # type: ignore[misc]
        before = getattr(form, _BEFORE, {})
        after = self._snapshot(form.instance)
        changes = {name: {"old": before.get(name), "new": value} for name, value in after.items()
                   if not change or before.get(name) != value}
        if change and not changes:
            return
        self._record(request, form.instance, {"created": not change, "changes": changes})

    def delete_model(self, request: HttpRequest, obj: models.Model) -> None:
        with transaction.atomic():
            self._record(request, obj, {"deleted": True, "was": self._stored(obj)})
            super().delete_model(request, obj)  # type: ignore[misc]

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        with transaction.atomic():
            for obj in queryset:
                self._record(request, obj, {"deleted": True, "was": self._stored(obj)})
            super().delete_queryset(request, queryset)  # type: ignore[misc]


class ObjectPermissionAdmin(AuditedAdminMixin, admin.ModelAdmin):
    """A django-guardian object permission: on a project, a membership (manage or annotate)."""

    audit_fields = ("permission", "content_type", "object_pk", "user")
    list_display = ("__str__", "content_type", "object_pk")
    list_filter = ("content_type",)
    raw_id_fields = ("user",)
    list_select_related = ("permission", "content_type")

    def audit_project_id(self, obj: models.Model) -> int | None:
        content_type = getattr(obj, "content_type", None)
        if content_type is not None and (content_type.app_label, content_type.model) == ("annotation", "project"):
            try:
                pk = int(getattr(obj, "object_pk", ""))
            except (TypeError, ValueError):
                return None
            return pk if Project.objects.filter(pk=pk).exists() else None
        return None


class GroupObjectPermissionAdmin(ObjectPermissionAdmin):
    audit_fields = ("permission", "content_type", "object_pk", "group")
    raw_id_fields = ("group",)
