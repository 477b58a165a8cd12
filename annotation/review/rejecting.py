"""Rejecting a flagged submission, as a hook that a higher app fills in.

A rejection reverses the expert's earning, which is `payments`' work (`payments.services.
submission_reject`); `annotation` may not import `payments` (payments > annotation). Payments
registers its function here in its `AppConfig.ready`. Without it, the review queue offers no
rejection (nothing would be paid back).
"""
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal

from experts.models import User

# (actor, assignment id, reason code, the PM's words, now) -> None; raises a DomainError when refused.
SubmissionRejecter = Callable[[User, int, str, str, datetime], None]

_rejecters: list[SubmissionRejecter] = []


def review_rejecter_register(rejecter: SubmissionRejecter) -> None:
    """Set the function that rejects a submission (the last one registered wins)."""
    _rejecters[:] = [rejecter]


def review_rejecter() -> SubmissionRejecter | None:
    return _rejecters[0] if _rejecters else None


# (assignment ids) -> {currency: total earned}: what rejecting those submissions would reverse.
EarningsReader = Callable[[list[int]], dict[str, Decimal]]

_earnings_readers: list[EarningsReader] = []


def rejection_earnings_register(reader: EarningsReader) -> None:
    """Set the function that totals the earnings of submissions (payments' ledger; the last one wins)."""
    _earnings_readers[:] = [reader]


def rejection_earnings(assignment_ids: list[int]) -> dict[str, Decimal]:
    """The earnings a rejection of `assignment_ids` would reverse, per currency ({} without payments)."""
    return _earnings_readers[0](assignment_ids) if _earnings_readers else {}
