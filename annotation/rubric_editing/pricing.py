"""The price of re-annotating work, as a hook that a higher app fills in.

`annotation` may not import `payments` (payments > annotation), yet the rubric impact shows
what re-annotation would cost at current prices. `payments` registers one function here in
its `AppConfig.ready`; without it (payments not installed) the cost is unknown and pages show "—".
"""
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal


@dataclass(frozen=True)
class Cost:
    amount: Decimal
    currency: str


# (project id, {difficulty: pieces of work}, at) -> the cost of that work at the prices in force at `at`.
ReannotationPricer = Callable[[int, dict[str, int], datetime], Cost]

_pricers: list[ReannotationPricer] = []


def reannotation_pricer_register(pricer: ReannotationPricer) -> None:
    """Set the function that prices re-annotation (the last one registered wins; registering twice is harmless)."""
    _pricers[:] = [pricer]


def reannotation_cost(*, project_id: int, work: dict[str, int], at: datetime) -> Cost | None:
    """What `work` ({difficulty: pieces}) would cost, or None when no pricer is registered."""
    if not _pricers:
        return None
    return _pricers[0](project_id, work, at)


@dataclass(frozen=True)
class PeriodSpend:
    """What a project's current pay period has cost so far, and per consensus label."""

    amount: Decimal
    currency: str
    consensus_labels: int
    per_label: Decimal | None
    starts_at: datetime | None
    ends_at: datetime | None


# (project id, at) -> the spend of the pay period that holds `at` (or the latest one), None when there is none.
SpendReader = Callable[[int, datetime], PeriodSpend | None]

_spend_readers: list[SpendReader] = []


def period_spend_register(reader: SpendReader) -> None:
    """Set the function that reads a project's current spend (the quality dashboard's cost card)."""
    _spend_readers[:] = [reader]


def period_spend(*, project_id: int, at: datetime) -> PeriodSpend | None:
    """The current period's spend, or None when no reader is registered or no period exists."""
    if not _spend_readers:
        return None
    return _spend_readers[0](project_id, at)
