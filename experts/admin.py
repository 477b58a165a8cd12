"""Django admin for accounts, expert profiles, tier rules and history, notifications.

Tiers change only through `experts.tiers` so that every change lands in the tier
history with a reason: the profile form asks for one when the tier is edited.
"""
from django import forms
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from experts.models import ExpertProfile, Notification, NotificationPreference, TierChange, TierRule, User
from experts.notification_email import notification_email_resend
from experts.tiers import tier_set


@admin.register(User)
class RubricaUserAdmin(UserAdmin):
    list_display = ("username", "role", "email", "is_active", "is_staff")
    list_filter = ("role", "is_active", "is_staff")
    fieldsets = (*UserAdmin.fieldsets, (_("Platform"), {"fields": ("role",)}))
    add_fieldsets = (*UserAdmin.add_fieldsets, (_("Platform"), {"fields": ("role",)}))


class ExpertProfileForm(forms.ModelForm):
    tier_reason = forms.CharField(label=_("Reason for a tier change"), required=False, max_length=500,
                                  help_text=_("Required when you change the tier; kept in the tier history."))

    class Meta:
        model = ExpertProfile
        fields = ("credentials", "languages", "weekly_capacity", "status", "status_reason", "tier",
                  "max_concurrent_leases", "specialties")

    def clean(self):
        data = super().clean()
        if self.instance.pk and "tier" in self.changed_data and not (data.get("tier_reason") or "").strip():
            self.add_error("tier_reason", _("Say why the tier changes."))
        return data


class TierChangeInline(admin.TabularInline):
    model = TierChange
    fk_name = "profile"
    extra = 0
    can_delete = False
    fields = ("changed_at", "from_tier", "to_tier", "reason", "changed_by")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ExpertProfile)
class ExpertProfileAdmin(admin.ModelAdmin):
    form = ExpertProfileForm
    list_display = ("pseudonym", "user", "tier", "status", "weekly_capacity", "credentials")
    list_filter = ("tier", "status", "specialties")
    search_fields = ("pseudonym", "user__username", "credentials")
    filter_horizontal = ("specialties",)
    readonly_fields = ("pseudonym", "status_changed_at", "created_at")
    inlines = [TierChangeInline]

    def save_model(self, request, obj, form, change):
        new_tier = obj.tier
        if change and "tier" in form.changed_data:
            # The tier goes through the service (history, notification); the rest saves as usual.
            obj.tier = form.initial["tier"]
            super().save_model(request, obj, form, change)
            tier_set(profile=obj, to_tier=new_tier, reason=form.cleaned_data["tier_reason"], by=request.user,
                     now=timezone.now())
            obj.refresh_from_db()
            return
        if change and "status" in form.changed_data:
            obj.status_changed_at = timezone.now()
        super().save_model(request, obj, form, change)


@admin.register(TierRule)
class TierRuleAdmin(admin.ModelAdmin):
    list_display = ("tier", "kind", "min_completed", "min_golden_accuracy_pct", "min_golden_items",
                    "min_peer_agreement_pct", "demote_below_pct", "window", "is_active")
    list_editable = ("min_completed", "min_golden_accuracy_pct", "min_golden_items", "min_peer_agreement_pct",
                     "demote_below_pct", "window", "is_active")
    list_filter = ("kind", "is_active")


@admin.register(TierChange)
class TierChangeAdmin(admin.ModelAdmin):
    """The tier history is read-only: it records what happened."""

    list_display = ("profile", "from_tier", "to_tier", "changed_at", "changed_by", "reason")
    list_filter = ("to_tier",)
    search_fields = ("profile__pseudonym", "profile__user__username", "reason")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("user", "kind", "created_at", "read_at", "email_status", "email_attempts")
    list_filter = ("kind", "email_status")
    search_fields = ("user__username", "message")
    readonly_fields = ("user", "kind", "message", "params", "link", "created_at", "email_status", "email_attempts",
                       "email_attempted_at", "email_sent_at", "email_error")
    actions = ["email_resend"]

    @admin.action(description=_("Send the failed emails again"))
    def email_resend(self, request, queryset) -> None:
        count = notification_email_resend(notification_ids=queryset.values_list("pk", flat=True))
        self.message_user(request, _("%(count)s emails are queued again.") % {"count": count})


@admin.register(NotificationPreference)
class NotificationPreferenceAdmin(admin.ModelAdmin):
    list_display = ("user", "kind", "email", "language", "updated_at")
    list_filter = ("kind", "email", "language")
    search_fields = ("user__username",)
