"""An expert's standing: tier evaluation from their work, and the expert home card.

`expert_evaluate` runs after every submission (Celery task "annotation.expert_evaluate",
sent by name on commit) and on demand (PM page, API). It is idempotent: evaluating
twice with the same numbers changes nothing the second time.
"""
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.urls import reverse
from django.utils import timezone

from annotation.calibration.services import CalibrationState, calibration_state
from annotation.models import Project
from annotation.quality.portrait import expert_stats, own_view_cutoff
from experts.models import ExpertProfile, TierChange, User
from experts.tiers import TierProgress, tier_evaluate, tier_progress


def expert_evaluate(*, expert: User, now: datetime) -> list[TierChange]:
    """Apply the tier rules to the expert's current numbers; returns the tier changes made
    (none for an account without an expert profile: `tier_evaluate` finds none to lock)."""
    return tier_evaluate(user=expert, stats=expert_stats(expert), now=now)


@dataclass(frozen=True)
class HomeCard:
    profile: ExpertProfile
    progress: TierProgress
    calibration: CalibrationState
    calibration_url: str
    portrait_url: str


def expert_home_cards(user: User, projects: Iterable[Project], *,
                      now: datetime | None = None) -> dict[int, HomeCard]:
    """The expert home card of each of `projects`, by project id; empty for a user without a profile.

    Tier and tier progress belong to the expert, not to a project, so they are read once;
    only the calibration standing is read per project (a fixed handful of queries each).
    The card's unread count is the top bar's (`notifications_unread`, read once per render).
    """
    now = now or timezone.now()
    profile = ExpertProfile.objects.filter(user=user).first()
    if profile is None:
        return {}
    progress = tier_progress(tier=profile.tier, stats=expert_stats(user, control_before=own_view_cutoff(now)))
    portrait_url = reverse("my_portrait")
    return {
        project.pk: HomeCard(
            profile=profile, progress=progress,
            calibration=calibration_state(project=project, expert=user, now=now),
            calibration_url=reverse("calibration", args=[project.pk]),
            portrait_url=portrait_url,
        )
        for project in projects
    }
