"""Domain errors of the payments services in the user's language.

Services raise `DomainError` with an English message and a stable code; pages and the
admin show the translation for a known code and the service's text otherwise.
"""
from django.utils.translation import gettext as _

from core.errors import DomainError


def domain_message(exc: DomainError) -> str:
    known = {
        "not_found": _("Not found, or not yours."),
        "period_not_due": _("This period has not ended yet."),
        "period_not_started": _("This period has not started yet."),
        "earlier_period_open": _("An earlier period of this project is still open; close it first."),
        "no_open_period": _("No period of this project is open: nothing has been earned since the last close."),
        "currency_mismatch": _("Entries of this period are in another currency than the project's."),
        "currency_fixed": _("The currency cannot change once prices or ledger entries exist."),
        "batch_not_draft": _("This payout batch is already approved."),
        "batch_paid": _("This payout batch is already marked paid."),
        "batch_not_approved": _("Approve the payout batch before marking it paid."),
        "not_payable": _("Only submitted, paid work can be rejected."),
        "reason_required": _("Give the reason for the rejection; the expert sees it on their statement."),
        "already_rejected": _("This submission is already rejected."),
        "invalid_amount": _("Enter a decimal number in range, with at most four decimal places."),
        "effective_too_soon": _("A change takes effect one minute from now at the earliest; leave the field "
                                "empty for that. Work already submitted keeps its price."),
        "duplicate_rule": _("A change for this already starts at that instant."),
        "invalid_difficulty": _("Unknown difficulty."),
        "invalid_tier": _("Unknown tier."),
    }
    return known.get(exc.code, exc.message)
