"""Payments' answers to annotation's signals (annotation never imports payments)."""
from typing import Any

from django.dispatch import receiver

from annotation.models import Project
from annotation.projects.signals import project_cloned
from payments.models import PaymentSettings, PriceRule, TierMultiplier


@receiver(project_cloned, sender=Project, dispatch_uid="payments.prices_copy_to_clone")
def prices_copy_to_clone(*, source: Project, clone: Project, created_by: Any = None, **_kwargs: Any) -> None:
    """Give a cloned project the source's payment settings, base prices and tier multipliers.

    Every row is copied with its own `effective_from`, so the clone pays what the source pays
    now and picks up the changes the source had already scheduled. Runs inside the clone's
    transaction: a failure here rolls the clone back too.
    """
    settings = PaymentSettings.objects.filter(project=source).first()
    if settings is not None:
        PaymentSettings.objects.update_or_create(project=clone, defaults={
            "currency": settings.currency, "period_length": settings.period_length,
            "period_anchor": settings.period_anchor})
    PriceRule.objects.bulk_create(
        PriceRule(project=clone, difficulty=r.difficulty, amount=r.amount, currency=r.currency,
                  effective_from=r.effective_from, created_by=created_by)
        for r in PriceRule.objects.filter(project=source).order_by("pk"))
    TierMultiplier.objects.bulk_create(
        TierMultiplier(project=clone, tier=m.tier, multiplier=m.multiplier, effective_from=m.effective_from,
                       created_by=created_by)
        for m in TierMultiplier.objects.filter(project=source).order_by("pk"))
