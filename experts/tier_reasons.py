"""Why the rules changed a tier, in the reader's language.

An automatic tier change stores a reason code and its numbers (`TierChange.reason_code`,
`reason_params`); pages render them here in the active language, and `TierChange.reason`
keeps the English text for the admin, the API and rows written before codes existed.
A change made by hand has no code: its reason is what the admin typed.
"""
from typing import Any

from django.utils import translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

DEMOTE_CONTROL_ACCURACY = "demote_control_accuracy"
PROMOTE_RULES_MET = "promote_rules_met"

REASONS = {
    DEMOTE_CONTROL_ACCURACY: _("control-task accuracy %(accuracy)s over the last %(window)s control tasks "
                               "is below %(threshold)s%%"),
    PROMOTE_RULES_MET: _("%(completed)s tasks completed (needs %(min_completed)s), golden accuracy %(golden)s "
                         "on %(golden_items)s items (needs %(min_golden)s%%), peer agreement %(peer)s "
                         "(needs %(min_peer)s%%)"),
}
# Params that hold a percentage (or None when there were no items to measure).
PERCENT_PARAMS = ("accuracy", "golden", "peer")


def percent_param(value: float | None) -> float | None:
    """A measured percentage as stored in the params: one decimal, JSON-safe."""
    return None if value is None else round(value, 1)


def _values(params: dict[str, Any]) -> dict[str, Any]:
    values = dict(params)
    for key in PERCENT_PARAMS:
        if key in values:
            values[key] = gettext("n/a") if values[key] is None else f"{float(values[key]):.1f}%"
    return values


def tier_reason_text(*, code: str, params: dict[str, Any], fallback: str = "") -> str:
    """The reason in the active language; `fallback` (the stored text) for no or an unknown code."""
    if code not in REASONS:
        return fallback
    try:
        return str(REASONS[code]) % _values(params)
    except (KeyError, TypeError, ValueError):
        return fallback


def tier_reason_english(*, code: str, params: dict[str, Any]) -> str:
    with translation.override("en"):
        return tier_reason_text(code=code, params=params)
