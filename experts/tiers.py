"""Tiers: applying the admin-editable rules to an expert's numbers, and the tier history.

The numbers (`ExpertStats`) come from the work, which lives in `annotation`; this module
sits below it, so it takes them as an argument and never queries labels itself.

Order of evaluation: demotion first (sustained low control accuracy at the current
tier), then promotion one tier at a time while the next tier's promote rule is met.
Every change is written to `TierChange` with the numbers that caused it.
"""
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.db import transaction
from django.utils.translation import gettext_lazy as _

from core.error_codes import ErrorCode
from core.errors import DomainError
from core.prepared import Prepared
from experts.models import TIER_ORDER, ExpertProfile, TierChange, TierRule, User, tier_rank
from experts.notifications import notification_send
from experts.tier_reasons import (
    DEMOTE_CONTROL_ACCURACY,
    PROMOTE_RULES_MET,
    percent_param,
    tier_reason_english,
)


@dataclass(frozen=True)
class ExpertStats:
    """An expert's numbers across all projects.

    `recent_controls` holds (correct, total) items of their latest control tasks,
    newest first, as many as the widest demote window needs.
    """

    completed: int
    golden_items: int
    golden_correct: int
    peer_items: int
    peer_agree: int
    recent_controls: tuple[tuple[int, int], ...] = field(default_factory=tuple)

    @property
    def golden_accuracy_pct(self) -> float | None:
        return 100 * self.golden_correct / self.golden_items if self.golden_items else None

    @property
    def peer_agreement_pct(self) -> float | None:
        return 100 * self.peer_agree / self.peer_items if self.peer_items else None

    def control_accuracy_pct(self, window: int) -> float | None:
        """Item accuracy over the last `window` control tasks; None until that many exist."""
        recent = self.recent_controls[:window]
        if len(recent) < window:
            return None
        total = sum(t for _c, t in recent)
        return 100 * sum(c for c, _t in recent) / total if total else None


@dataclass(frozen=True)
class Requirement:
    """One threshold of the next tier, with where the expert stands."""

    label: str
    needed: float
    current: float | None
    unit: str  # "" for counts, "%" for percentages

    @property
    def met(self) -> bool:
        return self.current is not None and self.current >= self.needed

    @property
    def progress_pct(self) -> int:
        if self.needed <= 0:
            return 100
        return int(min(100, max(0, 100 * (self.current or 0) / self.needed)))


@dataclass(frozen=True)
class TierProgress:
    tier: str
    next_tier: str | None
    requirements: tuple[Requirement, ...]

    @property
    def progress_pct(self) -> int:
        """How far to the next tier: the mean of the requirement bars (100 when all are met)."""
        if not self.requirements:
            return 100
        return round(sum(r.progress_pct for r in self.requirements) / len(self.requirements))


_ACTIVE_RULES = Prepared(lambda: TierRule.objects.filter(is_active=True).order_by("pk"))
_PROFILE_LOCK = Prepared(lambda *, user_id: ExpertProfile.objects.select_for_update(no_key=True)
                         .filter(user_id=user_id))
_PROFILE_TIER: Prepared[Any] = Prepared(lambda *, user_id: ExpertProfile.objects.filter(user_id=user_id)
                                        .values_list("tier"))


def _active_rules() -> dict[tuple[str, str], TierRule]:
    return {(r.tier, r.kind): r for r in _ACTIVE_RULES.all()}


def _promote_met(rule: TierRule, stats: ExpertStats) -> bool:
    golden = stats.golden_accuracy_pct if stats.golden_items >= rule.min_golden_items else None
    peer = stats.peer_agreement_pct
    return (stats.completed >= rule.min_completed
            and (rule.min_golden_accuracy_pct == 0 or (golden is not None and golden >= rule.min_golden_accuracy_pct))
            and (rule.min_peer_agreement_pct == 0 or (peer is not None and peer >= rule.min_peer_agreement_pct)))


class TierDecision(NamedTuple):
    """A change the rules call for: the English reason, and its code and numbers for translation."""

    to_tier: str
    rule: TierRule
    reason: str
    reason_code: str
    reason_params: dict[str, Any]


def _decision(to_tier: str, rule: TierRule, code: str, params: dict[str, Any]) -> TierDecision:
    return TierDecision(to_tier, rule, tier_reason_english(code=code, params=params), code, params)


def tier_decide(*, tier: str, stats: ExpertStats,
                rules: dict[tuple[str, str], TierRule]) -> TierDecision | None:
    """The one-step change the rules call for at `tier`, or None."""
    rank = tier_rank(tier)
    demote = rules.get((tier, TierRule.Kind.DEMOTE))
    if demote is not None and rank > 0:
        accuracy = stats.control_accuracy_pct(demote.window)
        if accuracy is not None and accuracy < demote.demote_below_pct:
            return _decision(TIER_ORDER[rank - 1], demote, DEMOTE_CONTROL_ACCURACY, {
                "accuracy": percent_param(accuracy), "window": demote.window,
                "threshold": demote.demote_below_pct})
    if rank + 1 < len(TIER_ORDER):
        target = TIER_ORDER[rank + 1]
        promote = rules.get((target, TierRule.Kind.PROMOTE))
        if promote is not None and _promote_met(promote, stats):
            return _decision(target, promote, PROMOTE_RULES_MET, {
                "completed": stats.completed, "min_completed": promote.min_completed,
                "golden": percent_param(stats.golden_accuracy_pct), "golden_items": stats.golden_items,
                "min_golden": promote.min_golden_accuracy_pct, "peer": percent_param(stats.peer_agreement_pct),
                "min_peer": promote.min_peer_agreement_pct})
    return None


def _record(*, profile: ExpertProfile, to_tier: str, reason: str, now: datetime, by: User | None,
            rule: TierRule | None, reason_code: str = "", reason_params: dict[str, Any] | None = None) -> TierChange:
    reason_params = reason_params or {}
    change = TierChange.objects.create(profile=profile, from_tier=profile.tier, to_tier=to_tier, reason=reason,
                                       reason_code=reason_code, reason_params=reason_params,
                                       rule=rule, changed_at=now, changed_by=by)
    params: dict[str, Any] = {"from_tier": profile.tier, "to_tier": to_tier, "reason": reason}
    if reason_code:
        params |= {"reason_code": reason_code, "reason_params": reason_params}
    notification_send(users=[profile.user], kind="tier_changed", now=now, params=params)
    profile.tier = to_tier
    profile.save(update_fields=["tier"])
    return change


@transaction.atomic
def tier_evaluate(*, user: User, stats: ExpertStats, now: datetime) -> list[TierChange]:
    """Apply the active rules to the expert's numbers; returns the changes made (often none).

    A demotion ends the evaluation; promotions climb one tier at a time while the next
    rule is met, so a newly imported veteran reaches their tier in one call.
    """
    rules = _active_rules()
    # After every submission, and nearly always with nothing to change: the tier is read without a
    # lock first, so the expert's next claim (which locks their profile) does not wait for it. Only a
    # change locks the profile, and is decided again on the tier as locked.
    current = _PROFILE_TIER.tuples(user_id=user.pk)
    if not current or tier_decide(tier=current[0][0], stats=stats, rules=rules) is None:
        return []
    profile = _PROFILE_LOCK.first(user_id=user.pk)  # compiled once per process (core.prepared)
    if profile is None:
        return []
    changes: list[TierChange] = []
    for _step in TIER_ORDER:
        decision = tier_decide(tier=profile.tier, stats=stats, rules=rules)
        if decision is None:
            break
        demoted = tier_rank(decision.to_tier) < tier_rank(profile.tier)
        changes.append(_record(profile=profile, to_tier=decision.to_tier, reason=decision.reason, now=now, by=None,
                               rule=decision.rule, reason_code=decision.reason_code,
                               reason_params=decision.reason_params))
        if demoted:
            break
    return changes


@transaction.atomic
def tier_set(*, profile: ExpertProfile, to_tier: str, reason: str, by: User | None,
             now: datetime) -> TierChange | None:
    """Change a tier by hand (an admin), with a reason kept in the history; None when unchanged."""
    reason = (reason or "").strip()
    if not reason:
        raise DomainError("A tier change needs a reason.", code=ErrorCode.REASON_REQUIRED,
                          errors=[{"field": "reason", "message": "required"}])
    profile = ExpertProfile.objects.select_for_update(no_key=True).get(pk=profile.pk)
    if profile.tier == to_tier:
        return None
    return _record(profile=profile, to_tier=to_tier, reason=reason, now=now, by=by, rule=None)


def tier_progress(*, tier: str, stats: ExpertStats) -> TierProgress:
    """What the next tier needs and where the expert stands on each threshold."""
    rank = tier_rank(tier)
    if rank + 1 >= len(TIER_ORDER):
        return TierProgress(tier=tier, next_tier=None, requirements=())
    target = TIER_ORDER[rank + 1]
    rule = _active_rules().get((target, TierRule.Kind.PROMOTE))
    if rule is None:
        return TierProgress(tier=tier, next_tier=None, requirements=())
    golden = stats.golden_accuracy_pct if stats.golden_items >= rule.min_golden_items else None
    requirements = [Requirement(label=str(_("Tasks completed")), needed=rule.min_completed,
                                current=stats.completed, unit="")]
    if rule.min_golden_items:
        requirements.append(Requirement(label=str(_("Golden items judged")), needed=rule.min_golden_items,
                                        current=stats.golden_items, unit=""))
    if rule.min_golden_accuracy_pct:
        requirements.append(Requirement(label=str(_("Golden accuracy")), needed=rule.min_golden_accuracy_pct,
                                        current=golden, unit="%"))
    if rule.min_peer_agreement_pct:
        requirements.append(Requirement(label=str(_("Agreement with peers")), needed=rule.min_peer_agreement_pct,
                                        current=stats.peer_agreement_pct, unit="%"))
    return TierProgress(tier=tier, next_tier=target, requirements=tuple(requirements))
