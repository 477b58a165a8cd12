"""Django admin for projects, their material and the work: shown to admins, edited only where no invariant lives.

Projects come from `project_create` (a rubric of its own, the PM's permissions), and
questions and responses from the all-or-nothing imports, so none is added here; their
settings and texts can be corrected, never the fields that tie them together.

Tasks, assignments, labels and consensus are written by the assignment, submission and
consensus services under row locks, and the database guards them (at most `overlap`
live assignments, one per expert and task, slots within the overlap, one label per
item). The admin shows them and offers no form: an edit could only fail on a
constraint or, worse, pass one and leave the counters, the consensus and the ledger
telling different stories. Because these models cannot be deleted here, Django's
delete page also refuses a question or response that already has work.

Tables reach 100k rows: changelists select their related rows in one query, skip the
second, unfiltered count, and foreign keys are raw ids. Searches are on text columns;
to reach the rows of one task, follow the links from its page or filter the changelist
with `?task__id__exact=<id>`, which uses the foreign-key index where a search on a
number would cast every row.
"""
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin
from django.contrib.auth.models import Group
from django.http import HttpRequest
from django.utils import timezone
from guardian.models import GroupObjectPermission, UserObjectPermission

from annotation.audit.admin import AuditedAdminMixin, GroupObjectPermissionAdmin, ObjectPermissionAdmin
from annotation.judging.secrets import api_key_env_check
from annotation.models import (
    Adjudication,
    Assignment,
    Case,
    Consultation,
    ExportJob,
    FaqEntry,
    Invitation,
    ItemConsensus,
    JudgeKeyGrant,
    Label,
    MembershipEvent,
    Project,
    ProjectSettingChange,
    Question,
    Response,
    Task,
)
from annotation.projects.fields import BY_NAME
from annotation.projects.services import project_settings_update
from core.admin import ReadOnlyAdmin
from core.errors import DomainError
from experts.admin import RubricaUserAdmin
from experts.models import User


class _ReadOnlyAdmin(ReadOnlyAdmin):
    show_full_result_count = False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "overlap", "lease_timeout_s", "calibration_threshold_pct", "control_rate_pct",
                    "hard_min_tier", "created_by", "created_at")
    list_display_links = ("id", "name")
    list_select_related = ("created_by",)
    search_fields = ("name",)
    # A task copies the overlap when it is created, so a new overlap applies to new tasks only.
    # The lifecycle moves through its services (settings page, API), which end leases and
    # record the change; here it is only shown.
    readonly_fields = ("rubric", "state", "archived_at", "created_by", "created_at")

    def save_model(self, request: HttpRequest, obj: Project, form: Any, change: bool) -> None:
        # The settings service, not a plain save: the same validation, and the change lands in
        # the setting history with the admin's name.
        values = {name: form.cleaned_data[name] for name in form.changed_data if name in BY_NAME}
        user = request.user if request.user.is_authenticated else None
        project_settings_update(project=Project.objects.get(pk=obj.pk), values=values, changed_by=user,
                                now=timezone.now())

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        # A project holds all the work and, through the ledger, the money trail.
        return False


@admin.register(Question)
class QuestionAdmin(admin.ModelAdmin):
    list_display = ("external_id", "project", "difficulty", "primary_scene", "secondary_scene", "source_format",
                    "created_at")
    list_filter = ("difficulty", "source_format", "project")
    list_select_related = ("project",)
    search_fields = ("=external_id", "primary_scene", "secondary_scene")
    show_full_result_count = False
    # Rubric items name their question by external id: renaming one would orphan them.
    readonly_fields = ("project", "external_id", "source_format", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Response)
class ResponseAdmin(admin.ModelAdmin):
    list_display = ("id", "question", "model_name", "project", "created_at")
    list_filter = ("project",)
    list_select_related = ("question", "project")
    search_fields = ("=question__external_id", "model_name")
    show_full_result_count = False
    readonly_fields = ("project", "question", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class AssignmentInline(admin.TabularInline):
    model = Assignment
    fields = ("expert", "kind", "slot", "status", "leased_at", "expires_at", "submitted_at")
    readonly_fields = fields
    show_change_link = True
    can_delete = False

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).select_related("expert")

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(Task)
class TaskAdmin(_ReadOnlyAdmin):
    list_display = ("id", "project", "response", "rubric_version", "status", "live_count", "submitted_count",
                    "overlap", "is_golden", "created_at", "completed_at")
    list_filter = ("status", "is_golden", "project")
    list_select_related = ("project", "response", "rubric_version__rubric")
    search_fields = ("=response__question__external_id", "response__model_name")
    raw_id_fields = ("project", "response", "rubric_version")
    # At most `overlap` (1..9) rows.
    inlines = [AssignmentInline]


@admin.register(Assignment)
class AssignmentAdmin(_ReadOnlyAdmin):
    list_display = ("id", "task", "expert", "kind", "slot", "status", "leased_at", "expires_at", "submitted_at",
                    "tier_at_submission")
    list_filter = ("status", "kind")
    list_select_related = ("task", "expert")
    search_fields = ("expert__username",)
    raw_id_fields = ("task", "expert")


@admin.register(Label)
class LabelAdmin(_ReadOnlyAdmin):
    list_display = ("id", "task", "assignment", "rubric_item", "value", "created_at")
    list_filter = ("value",)
    list_select_related = ("task", "assignment", "rubric_item__dimension")
    search_fields = ("rubric_item__item_key", "assignment__expert__username")
    raw_id_fields = ("assignment", "task", "rubric_item")


@admin.register(ItemConsensus)
class ItemConsensusAdmin(_ReadOnlyAdmin):
    list_display = ("task", "rubric_item", "hit_votes", "total_votes", "majority", "zone", "computed_at")
    list_filter = ("zone", "majority")
    list_select_related = ("task", "rubric_item__dimension")
    search_fields = ("rubric_item__item_key",)
    raw_id_fields = ("task", "rubric_item")


# Consultations change only through their services (votes stay blind, a resolution rewrites the
# consensus under the task's lock); the admin shows them and their adjudications.
@admin.register(Consultation)
class ConsultationAdmin(_ReadOnlyAdmin):
    list_display = ("id", "project", "task", "rubric_item", "trigger", "status", "opened_at", "outcome",
                    "reason_category")
    list_filter = ("status", "trigger", "outcome")
    list_select_related = ("project", "task", "rubric_item__dimension")
    search_fields = ("rubric_item__item_key",)
    raw_id_fields = ("project", "task", "rubric_item", "opened_by", "resolved_by")


@admin.register(Adjudication)
class AdjudicationAdmin(_ReadOnlyAdmin):
    list_display = ("task", "rubric_item", "value", "ambiguous", "consultation", "decided_at")
    list_select_related = ("task", "rubric_item__dimension", "consultation")
    raw_id_fields = ("task", "rubric_item", "consultation", "decided_by")


# The roster's records: membership changes are history (append-only) and invitations are made and
# withdrawn on the project's Members page, which records who did it; the admin only shows them.
@admin.register(MembershipEvent)
class MembershipEventAdmin(_ReadOnlyAdmin):
    list_display = ("at", "project", "user", "role", "action", "by", "via")
    list_filter = ("action", "via", "role")
    list_select_related = ("project", "user", "by")
    search_fields = ("user__username", "project__name")
    raw_id_fields = ("project", "user", "by")


@admin.register(Invitation)
class InvitationAdmin(_ReadOnlyAdmin):
    list_display = ("id", "project", "role", "use_count", "max_uses", "expires_at", "revoked_at", "created_by")
    list_filter = ("role",)
    list_select_related = ("project", "created_by")
    search_fields = ("project__name",)
    exclude = ("token",)  # the link is a credential: shown to the project's PMs, not in the admin
    raw_id_fields = ("project", "created_by", "revoked_by")


@admin.register(ProjectSettingChange)
class ProjectSettingChangeAdmin(_ReadOnlyAdmin):
    list_display = ("project", "setting", "old_value", "new_value", "changed_by", "changed_at")
    list_select_related = ("project", "changed_by")
    raw_id_fields = ("project", "changed_by")


@admin.register(ExportJob)
class ExportJobAdmin(admin.ModelAdmin):
    """Who exported what, with which filters: an audit trail, read-only."""

    list_display = ("id", "snapshot_id", "project", "owner", "fmt", "delivery", "status", "row_count", "created_at",
                    "expires_at")
    list_filter = ("fmt", "delivery", "status")
    list_select_related = ("project", "owner")
    search_fields = ("=snapshot_id",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


# The case library and the FAQ are written on their pages (annotation.library), where the
# services validate links and notify askers; the admin shows them.
@admin.register(Case)
class CaseAdmin(_ReadOnlyAdmin):
    list_display = ("id", "title", "project", "status", "outcome", "read_count", "published_at")
    list_filter = ("status", "outcome")
    list_select_related = ("project",)
    search_fields = ("title",)
    raw_id_fields = ("project", "question", "created_by", "published_by")


@admin.register(FaqEntry)
class FaqEntryAdmin(_ReadOnlyAdmin):
    list_display = ("id", "project", "asked_by", "asked_at", "answered_by", "answered_at")
    list_select_related = ("project", "asked_by", "answered_by")
    search_fields = ("question",)
    raw_id_fields = ("project", "asked_by", "answered_by", "source_question")


# Roles and permissions changed here go to the audit log (annotation.audit.admin): the account
# admin of `experts` and Django's group admin are registered again with the audit hooks, and
# guardian's object permissions (the project memberships) get an audited admin of their own.
class AuditedUserAdmin(AuditedAdminMixin, RubricaUserAdmin):
    audit_fields = ("role", "is_active", "is_staff", "is_superuser", "groups", "user_permissions")


class AuditedGroupAdmin(AuditedAdminMixin, GroupAdmin):
    audit_fields = ("name", "permissions")


for _model, _admin in ((User, AuditedUserAdmin), (Group, AuditedGroupAdmin)):
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)
    admin.site.register(_model, _admin)
admin.site.register(UserObjectPermission, ObjectPermissionAdmin)
admin.site.register(GroupObjectPermission, GroupObjectPermissionAdmin)
class JudgeKeyGrantForm(forms.ModelForm):
    class Meta:
        model = JudgeKeyGrant
        fields = ("project", "env_name")

    def clean_env_name(self) -> str:
        try:
            return api_key_env_check(self.cleaned_data["env_name"])
        except DomainError as exc:
            raise forms.ValidationError(exc.message) from None


@admin.register(JudgeKeyGrant)
class JudgeKeyGrantAdmin(AuditedAdminMixin, admin.ModelAdmin):
    """Which projects' runs an admin may start with a key from the workers' environment.

    Admins only, whatever a staff account's model permissions say: a grant lets a run send
    the operator's key to the URL of the run. Granting and revoking go to the audit log.
    """

    audit_fields = ("project", "env_name")

    def audit_project_id(self, obj: Any) -> int | None:
        return obj.project_id

    form = JudgeKeyGrantForm
    list_display = ("project", "env_name", "granted_by", "granted_at")
    list_select_related = ("project", "granted_by")
    raw_id_fields = ("project",)
    search_fields = ("env_name", "project__name")
    readonly_fields = ("granted_by", "granted_at")

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not change:
            obj.granted_by = request.user if request.user.is_authenticated else None
        super().save_model(request, obj, form, change)

    def _admin_only(self, request: HttpRequest) -> bool:
        return bool(getattr(request.user, "is_platform_admin", False))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._admin_only(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._admin_only(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._admin_only(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._admin_only(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._admin_only(request)
