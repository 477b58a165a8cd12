"""Django admin: admins add price rules and tier multipliers and set payment settings; money is read-only.

Price rules and multipliers are history: an admin adds a new row (taking effect now or
later) instead of editing one, so no change or delete permission is offered. Ledger
entries, statements, periods and payout batches are shown, never edited here: the
ledger is append-only and settlement has its own page.
"""
from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.admin import ReadOnlyAdmin
from core.errors import DomainError, error_message
from payments.models import (
    Appeal,
    LedgerEntry,
    PaymentSettings,
    PayoutBatch,
    Period,
    PriceRule,
    Statement,
    TierMultiplier,
)
from payments.pricing import (
    RuleChange,
    price_rule_clean,
    price_rule_create,
    tier_multiplier_clean,
    tier_multiplier_create,
)
from payments.services import currency_is_fixed, payment_settings_update


class _HistoryForm(forms.ModelForm):
    """Validates through the service; an empty `effective_from` means one minute from now."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # One instant for validation and for the write, so what was checked is what is saved.
        self.now = timezone.now()
        self.fields["effective_from"].required = False
        self.fields["effective_from"].help_text = _(
            "Leave empty for one minute from now. A change never takes effect in the past.")

    def change_clean(self, data: dict) -> RuleChange:
        """Validate `data` through the rule's service; each concrete form defines it."""
        raise TypeError(f"{type(self).__name__} must define change_clean")

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        try:
            change = self.change_clean(data)
        except DomainError as exc:
            raise ValidationError(error_message(exc)) from exc
        data["effective_from"] = change.effective_from
        return data


class _HistoryAdmin(admin.ModelAdmin):
    readonly_fields = ("created_by", "created_at")
    date_hierarchy = "effective_from"

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def create(self, request: HttpRequest, form: _HistoryForm):
        """Write the new history row through the service; each concrete admin defines it."""
        raise TypeError(f"{type(self).__name__} must define create")

    def save_model(self, request: HttpRequest, obj, form, change: bool) -> None:
        created = self.create(request, form)
        obj.pk = created.pk
        obj.created_by = created.created_by


class PriceRuleForm(_HistoryForm):
    class Meta:
        model = PriceRule
        fields = ("project", "difficulty", "amount", "effective_from")

    def change_clean(self, data: dict) -> RuleChange:
        return price_rule_clean(difficulty=data["difficulty"], amount=data["amount"],
                                effective_from=data.get("effective_from"), now=self.now)


@admin.register(PriceRule)
class PriceRuleAdmin(_HistoryAdmin):
    form = PriceRuleForm
    list_display = ("project", "difficulty", "amount", "currency", "effective_from", "created_by")
    list_filter = ("project", "difficulty")

    def create(self, request: HttpRequest, form: _HistoryForm) -> PriceRule:
        data = form.cleaned_data
        return price_rule_create(project=data["project"], difficulty=data["difficulty"], amount=data["amount"],
                                 effective_from=data["effective_from"], created_by=request.user, now=form.now)


class TierMultiplierForm(_HistoryForm):
    class Meta:
        model = TierMultiplier
        fields = ("project", "tier", "multiplier", "effective_from")

    def change_clean(self, data: dict) -> RuleChange:
        return tier_multiplier_clean(tier=data["tier"], multiplier=data["multiplier"],
                                     effective_from=data.get("effective_from"), now=self.now)


@admin.register(TierMultiplier)
class TierMultiplierAdmin(_HistoryAdmin):
    form = TierMultiplierForm
    list_display = ("project", "tier", "multiplier", "effective_from", "created_by")
    list_filter = ("project", "tier")

    def create(self, request: HttpRequest, form: _HistoryForm) -> TierMultiplier:
        data = form.cleaned_data
        return tier_multiplier_create(project=data["project"], tier=data["tier"], multiplier=data["multiplier"],
                                      effective_from=data["effective_from"], created_by=request.user, now=form.now)


@admin.register(PaymentSettings)
class PaymentSettingsAdmin(admin.ModelAdmin):
    list_display = ("project", "currency", "period_length", "period_anchor", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        if obj is not None and currency_is_fixed(obj.project_id):
            return ("project", "currency")
        return ("project",) if obj is not None else ()

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: PaymentSettings, form, change: bool) -> None:
        saved = payment_settings_update(actor=request.user, project_id=obj.project_id, currency=obj.currency,
                                        period_length=obj.period_length, period_anchor=obj.period_anchor)
        obj.pk = saved.pk


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyAdmin):
    list_display = ("id", "posted_at", "kind", "project", "expert", "assignment", "amount", "currency", "period")
    list_filter = ("kind", "project", "currency")
    search_fields = ("idempotency_key", "expert__username")
    date_hierarchy = "posted_at"
    list_select_related = ("project", "expert", "period")
    raw_id_fields = ("assignment", "reverses")


@admin.register(Period)
class PeriodAdmin(ReadOnlyAdmin):
    list_display = ("id", "project", "starts_at", "ends_at", "status", "closed_at")
    list_filter = ("status", "project")


@admin.register(Statement)
class StatementAdmin(ReadOnlyAdmin):
    list_display = ("id", "period", "expert", "total", "carried_in", "payable", "carried_out", "currency")
    list_filter = ("project",)
    search_fields = ("expert__username",)


@admin.register(PayoutBatch)
class PayoutBatchAdmin(ReadOnlyAdmin):
    list_display = ("id", "project", "period", "total", "currency", "statement_count", "status", "paid_at")
    list_filter = ("status", "project")


@admin.register(Appeal)
class AppealAdmin(ReadOnlyAdmin):
    """Shown only: an appeal is decided on its queue page, whose service posts the correction."""

    list_display = ("id", "kind", "status", "project", "expert", "assignment", "created_at", "decided_at",
                    "decided_by")
    list_filter = ("status", "kind")
    list_select_related = ("project", "expert", "decided_by")
    search_fields = ("expert__username",)
    raw_id_fields = ("assignment", "entry", "correction")
