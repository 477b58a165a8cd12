"""`{{ change|tier_reason }}`: a tier change's reason in the reader's language."""
from django import template

from experts.models import TierChange
from experts.tier_reasons import tier_reason_text

register = template.Library()


@register.filter
def tier_reason(change: TierChange) -> str:
    return tier_reason_text(code=change.reason_code, params=change.reason_params, fallback=change.reason)
