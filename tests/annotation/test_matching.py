"""Matching: the draw leans toward strong experts, yet every eligible expert keeps a chance and
ineligible ones get none (over many draws)."""
import random
from collections import Counter

import pytest
from django.db import transaction
from django.utils import timezone

from annotation.assignment import matching
from annotation.assignment.services import RING_SIZE, assignment_claim_next
from annotation.models import Project, Question, Task
from annotation.rubric_editing.publishing import rubric_version_publish
from annotation.rubric_editing.services import rubric_draft_item_update, rubric_draft_start
from core.errors import Forbidden
from experts.models import ExpertProfile
from rubrics.models import Dimension, RubricItem
from tests.support.quality import calibrated, make_golden_project, member

pytestmark = pytest.mark.django_db

TRIALS = 100


class Rollback(Exception):
    pass


def test_weights_are_bounded_between_1_and_1_plus_bonus():
    strengths = {1: 1.0, 2: 0.5}

    assert matching.weight({}, {1, 2}) == 1.0
    assert matching.weight(strengths, set()) == 1.0
    assert matching.weight(strengths, {1}) == 1.0 + matching.BONUS
    assert matching.weight(strengths, {1, 2}) == pytest.approx(1.0 + matching.BONUS * 0.75)
    assert matching.weight(strengths, {3}) == 1.0
    worst_share = 1 / (1 + (matching.CANDIDATES - 1) * (1 + matching.BONUS))
    assert worst_share == pytest.approx(1 / 9)


def test_strengths_come_from_specialties_and_golden_accuracy():
    project = make_golden_project(golden=12, regular=1)
    expert = calibrated(project)  # every golden item right: accuracy term 1 where >= 10 items
    warmth = Dimension.objects.get(code="warmth")
    ExpertProfile.objects.get(user=expert).specialties.add(warmth)
    profile = ExpertProfile.objects.get(user=expert)

    strengths = matching.expert_strengths(profile, expert)

    assert strengths[warmth.pk] == pytest.approx(1.0)
    assert all(0 < s <= 1 for s in strengths.values())


@pytest.fixture
def arena():
    """Overlap 1; q10 is a hard task judged on morality only; q11..q13 are normal, other abilities."""
    project = make_golden_project(golden=10, regular=4, overlap=1, control_rate_pct=0)
    Task.objects.filter(project=project, is_golden=False).update(overlap=1)
    draft = rubric_draft_start(project=project)
    for item in RubricItem.objects.filter(version=draft, question_ref="q10"):
        rubric_draft_item_update(project=project, item_id=item.pk, content=f"moral point {item.position}",
                                 score=3, dimension="morality")
    rubric_version_publish(project=project, version=draft, reason="q10 is about ethics", now=timezone.now())
    Question.objects.filter(project=project, external_id="q10").update(difficulty="hard")
    Project.objects.filter(pk=project.pk).update(overlap=1)
    project.refresh_from_db()
    morality = Dimension.objects.get(code="morality")
    strong = calibrated(project, tier="silver", credentials="licensed counsellor")
    ExpertProfile.objects.get(user=strong).specialties.add(morality)
    experts = {
        "strong": strong,
        "plain": calibrated(project, tier="silver"),
        "bronze": calibrated(project),
        "uncalibrated": member(project, tier="silver"),
        "paused": calibrated(project, tier="silver"),
    }
    ExpertProfile.objects.filter(user=experts["paused"]).update(status="paused")
    target = Task.objects.get(project=project, response__question__external_id="q10", is_golden=False,
                              rubric_version__status="published", rubric_version__number=2)
    # Evenly spaced on the ring, so that the plain draw is uniform and the test measures the weighting.
    open_tasks = Task.objects.filter(project=project, is_golden=False, rubric_version__number=2).order_by("pk")
    for n, task in enumerate(open_tasks):
        Task.objects.filter(pk=task.pk).update(shuffle_key=n * (RING_SIZE // open_tasks.count()))
    return project, experts, target


def test_every_eligible_expert_keeps_a_chance_and_ineligible_ones_get_none(arena):
    project, experts, target = arena
    rng = random.Random(11)
    winners: Counter[str] = Counter()
    refusals: Counter[str] = Counter()

    for _trial in range(TRIALS):
        order = list(experts)
        rng.shuffle(order)
        try:
            with transaction.atomic():
                for name in order:
                    try:
                        lease = assignment_claim_next(project=project, expert=experts[name], now=timezone.now(),
                                                      rng=rng)
                    except Forbidden:
                        refusals[name] += 1
                        continue
                    if lease is not None and lease.task_id == target.pk:
                        winners[name] += 1
                raise Rollback
        except Rollback:
            pass

    assert winners["strong"] > 0 and winners["plain"] > 0
    assert winners["strong"] > winners["plain"]
    assert winners["bronze"] == winners["uncalibrated"] == winners["paused"] == 0
    assert refusals["uncalibrated"] == refusals["paused"] == TRIALS


def test_a_strong_expert_still_draws_every_task(arena):
    project, experts, _target = arena
    rng = random.Random(5)
    drawn: Counter[int] = Counter()

    for _trial in range(60):
        try:
            with transaction.atomic():
                lease = assignment_claim_next(project=project, expert=experts["strong"], now=timezone.now(), rng=rng)
                drawn[lease.task_id] += 1
                raise Rollback
        except Rollback:
            pass

    open_tasks = Task.objects.filter(project=project, is_golden=False, status="open",
                                     rubric_version__number=2)
    assert set(drawn) == set(open_tasks.values_list("pk", flat=True))
