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
