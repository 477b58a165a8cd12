"""The stored golden tally: after any mix of control tasks, calibrations, retries and new references it
equals the golden counts recomputed from the whole history, and matching reads it in one query."""
import importlib
import random
from collections import defaultdict
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.db.models import Sum
from django.utils import timezone

from annotation.assignment import matching
from annotation.assignment.services import assignment_claim_next
from annotation.calibration.services import calibration_start
from annotation.exchange.golden import golden_import
from annotation.models import Assignment, GoldenReference, GoldenTally, Project, ReviewFlag, Task
from annotation.quality.portrait import golden_counts_by_dimension
from annotation.review.services import submission_return, submission_returns_lapse
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from experts.models import ExpertProfile, User
from rubrics.models import Dimension
from tests.support.quality import answer_attempt, calibrated, make_golden_project, member
from tests.support.scale import strengths_from_history

pytestmark = pytest.mark.django_db


def _stored(expert: User, project: Project | None = None) -> dict[int, tuple[int, int]]:
    rows = GoldenTally.objects.filter(expert=expert)
    if project is not None:
        rows = rows.filter(project=project)
    return {row["dimension_id"]: (row["t"], row["c"]) for row in
            rows.values("dimension_id").annotate(t=Sum("total"), c=Sum("correct")).order_by()}


def _control_leases(project: Project, expert: User, n: int, rng: random.Random) -> list[Assignment]:
    """Claim and answer `n` control tasks (the project's rate is 100%), each with some items wrong."""
    done = []
    for _ in range(n):
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now(), rng=rng)
        assert lease is not None and lease.task.is_golden
        refs = dict(GoldenReference.objects.filter(task=lease.task).values_list("rubric_item__item_key", "value"))
        labels = {key: value if rng.random() < 0.7 else 1 - value for key, value in refs.items()}
        result = labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
        assert result.created
        done.append((lease, labels))
    return done


@pytest.fixture
def world():
    rng = random.Random(14)
    first = make_golden_project(golden=16, regular=10, control_rate_pct=100, calibration_retry_delay_s=0)
    second = make_golden_project(golden=14, regular=4, control_rate_pct=100)
    good = calibrated(first)
    project_add_member(project=second, user=good)
    calibrated(second, expert=good)
    # A weaker expert: a failed calibration counts as golden evidence too, then a passed one.
    weak = member(first)
    attempt = calibration_start(project=first, expert=weak, now=timezone.now(), rng=random.Random(3))
    answer_attempt(attempt, wrong_items=9)
    attempt = calibration_start(project=first, expert=weak, now=timezone.now(), rng=random.Random(4))
    answer_attempt(attempt, wrong_items=2)
    return {"first": first, "second": second, "good": good, "weak": weak, "rng": rng}


def test_the_tally_equals_the_recomputed_counts_after_calibrations_and_control_tasks(world):
    first, second, good, weak, rng = (world[k] for k in ("first", "second", "good", "weak", "rng"))
    _control_leases(first, good, 3, rng)
    _control_leases(second, good, 2, rng)
    _control_leases(first, weak, 3, rng)

    for expert in (good, weak):
        assert _stored(expert) == golden_counts_by_dimension(expert)
        assert _stored(expert, first) == golden_counts_by_dimension(expert, projects=[first])
        assert sum(total for total, _ in _stored(expert).values()) > 0
    assert _stored(good, second) == golden_counts_by_dimension(good, projects=[second])


def test_a_repeated_submission_of_a_control_task_counts_once(world):
    first, good, rng = world["first"], world["good"], world["rng"]
    ((lease, labels),) = _control_leases(first, good, 1, rng)
    before = _stored(good)

    again = labels_submit(expert=good, assignment_id=lease.pk, labels=labels, now=timezone.now())

    assert not again.created
    assert _stored(good) == before == golden_counts_by_dimension(good)


def test_new_references_recount_the_past_answers(world):
    first, good, weak, rng = world["first"], world["good"], world["weak"], world["rng"]
    done = _control_leases(first, good, 2, rng)
    task = done[0][0].task
    refs = list(GoldenReference.objects.filter(task=task).order_by("rubric_item__position"))
    flipped = [1 - r.value for r in refs]
    row = (f'{{"question_id": "{task.response.question.external_id}", "model": "{task.response.model_name}", '
           f'"labels": {flipped}}}\n')

    golden_import(project=first, data=row.encode(), now=timezone.now())

    for expert in (good, weak):
        assert _stored(expert) == golden_counts_by_dimension(expert)


def test_the_migration_backfills_the_tally_from_the_history(world):
    first, good, weak, rng = world["first"], world["good"], world["weak"], world["rng"]
    _control_leases(first, good, 2, rng)
    _control_leases(first, weak, 1, rng)
    expected = {e.pk: _stored(e) for e in (good, weak)}
    GoldenTally.objects.all().delete()
    migration = importlib.import_module("annotation.migrations.0034_golden_tally")

    migration.tally_backfill(django_apps, None)

    assert {e.pk: _stored(e) for e in (good, weak)} == expected
    assert expected[good.pk] == golden_counts_by_dimension(good)


def test_matching_strengths_are_the_same_as_from_the_whole_history_in_one_query(
        world, django_assert_num_queries):
    first, good, weak, rng = world["first"], world["good"], world["weak"], world["rng"]
    _control_leases(first, good, 3, rng)
    _control_leases(first, weak, 2, rng)
    warmth = Dimension.objects.get(code="warmth")
    ExpertProfile.objects.get(user=weak).specialties.add(warmth)

    for expert in (good, weak):
        profile = ExpertProfile.objects.get(user=expert)
        with django_assert_num_queries(1):
            strengths = matching.expert_strengths(profile, expert)
        assert strengths == pytest.approx(strengths_from_history(profile, expert))
    assert matching.expert_strengths(ExpertProfile.objects.get(user=good), good)


def test_tally_rows_never_mix_experts_or_projects(world):
    first, second, good, rng = world["first"], world["second"], world["good"], world["rng"]
    _control_leases(second, good, 2, rng)

    per_project: dict[int, dict[int, tuple[int, int]]] = defaultdict(dict)
    for row in GoldenTally.objects.filter(expert=good):
        per_project[row.project_id][row.dimension_id] = (row.total, row.correct)

    assert set(per_project) == {first.pk, second.pk}
    assert per_project[second.pk] == golden_counts_by_dimension(good, projects=[second])
    assert Task.objects.filter(project=second, is_golden=True).exists()


def test_a_returned_control_task_leaves_the_tally_and_comes_back_when_its_lease_lapses(world):
    first, good, rng = world["first"], world["good"], world["rng"]
    ((lease, _labels),) = _control_leases(first, good, 1, rng)
    now = timezone.now()
    ReviewFlag.objects.create(project=first, assignment=lease, rule=ReviewFlag.Rule.TOO_FAST, created_at=now)
    with_it = _stored(good)

    submission_return(actor=first.created_by, project=first, assignment_id=lease.pk, comment="look again",
                      now=now)
    without_it, recomputed_without = _stored(good), golden_counts_by_dimension(good)
    submission_returns_lapse(now=now + timedelta(seconds=first.lease_timeout_s + 1))

    assert without_it == recomputed_without
    assert sum(t for t, _ in without_it.values()) < sum(t for t, _ in with_it.values())
    assert _stored(good) == with_it == golden_counts_by_dimension(good)
