"""The stored peer tally: after any mix of submissions, rejections, restores and returns it equals the peer
agreement the portrait recomputes from every label, and the tier evaluation reads it in a fixed few queries."""
import importlib
import random
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, PeerTally, Project, ReviewFlag
from annotation.quality.portrait import expert_stats, portrait_for
from annotation.quality.standing import expert_evaluate
from annotation.review.services import submission_return, submission_returns_lapse
from annotation.selectors import rubric_items_for_task
from annotation.submission.rejection import submission_reject_labels, submission_restore_labels
from annotation.submission.services import labels_submit
from experts.models import User
from tests.support.quality import calibrated, make_golden_project

pytestmark = pytest.mark.django_db


def _stored(expert: User) -> tuple[int, int]:
    sums = PeerTally.objects.filter(expert=expert).aggregate(t=Sum("total"), a=Sum("agree"))
    return sums["t"] or 0, sums["a"] or 0


def _recomputed(expert: User) -> tuple[int, int]:
    overall = portrait_for(expert).overall
    return overall.peer_total, overall.peer_agree


def _work(project: Project, experts: list[User], rounds: int, rng: random.Random) -> list[Assignment]:
    """Each round, every expert claims and submits one task, with labels that mostly follow a hidden truth."""
    done = []
    for _ in range(rounds):
        for expert in experts:
            lease = assignment_claim_next(project=project, expert=expert, now=timezone.now(), rng=rng)
            if lease is None:
                continue
            keys = [i.item_key for i in rubric_items_for_task(lease.task)]
            labels = {k: (hash((lease.task_id, k)) % 2) if rng.random() < 0.75 else rng.randrange(2) for k in keys}
            assert labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now()).created
            done.append(lease)
    return done


@pytest.fixture
def team():
    project = make_golden_project(golden=12, regular=12, items=4, overlap=3, control_rate_pct=0)
    experts = [calibrated(project) for _ in range(5)]
    return project, experts, random.Random(21)


def test_the_tally_equals_the_recomputed_peer_agreement_after_every_kind_of_change(team):
    project, experts, rng = team
    done = _work(project, experts, 5, rng)
    pm = project.created_by
    # A rejection takes one submission's labels out of everyone else's peers; a restore puts them back.
    rejected, restored, returned = done[2], done[7], done[11]
    for assignment in (rejected, restored):
        submission_reject_labels(assignment=assignment, reason_code="spam", text="", by=pm, now=timezone.now())
    submission_restore_labels(assignment_id=restored.pk, now=timezone.now())
    # A return takes the labels away while the expert redoes the task; left to lapse, they come back.
    ReviewFlag.objects.create(project=project, assignment=returned, rule=ReviewFlag.Rule.TOO_FAST,
                              created_at=timezone.now())
    submission_return(actor=pm, project=project, assignment_id=returned.pk, comment="Please look again.",
                      now=timezone.now())
    assert not PeerTally.objects.filter(assignment=returned).exists()
    for expert in experts:
        assert _stored(expert) == _recomputed(expert)
    submission_returns_lapse(now=timezone.now() + timedelta(days=30))

    for expert in experts:
        assert _stored(expert) == _recomputed(expert)
    assert sum(_stored(e)[0] for e in experts) > 20  # the comparison is not over empty tallies
    assert any(agree < total for total, agree in map(_stored, experts))


def test_a_repeated_submission_changes_nothing(team):
    project, experts, rng = team
    done = _work(project, experts, 2, rng)
    before = {e.pk: _stored(e) for e in experts}
    lease = done[-1]
    labels = dict(lease.labels.values_list("rubric_item__item_key", "value"))

    again = labels_submit(expert=lease.expert, assignment_id=lease.pk, labels=labels, now=timezone.now())

    assert not again.created
    assert {e.pk: _stored(e) for e in experts} == before


def test_the_migration_backfills_the_tally_from_the_history(team):
    project, experts, rng = team
    _work(project, experts, 4, rng)
    expected = {e.pk: _stored(e) for e in experts}
    PeerTally.objects.all().delete()
    migration = importlib.import_module("annotation.migrations.0036_peer_tally")

    with connection.schema_editor() as editor:
        migration.tally_existing_work(django_apps, editor)

    assert {e.pk: _stored(e) for e in experts} == expected
    assert all(expected[e.pk] == _recomputed(e) for e in experts)


def test_the_tier_evaluation_reads_the_tallies_in_a_fixed_number_of_queries(team, django_assert_num_queries):
    project, experts, rng = team
    _work(project, experts, 2, rng)
    veteran = experts[0]
    stats = expert_stats(veteran)
    assert (stats.peer_items, stats.peer_agree) == _recomputed(veteran)
    overall = portrait_for(veteran).overall
    assert (stats.golden_items, stats.golden_correct) == (overall.golden_total, overall.golden_correct)

    with django_assert_num_queries(6) as short:
        expert_evaluate(expert=veteran, now=timezone.now())
    _work(project, experts, 3, rng)
    with django_assert_num_queries(len(short.captured_queries)):
        expert_evaluate(expert=veteran, now=timezone.now())


@pytest.mark.postgres
def test_the_refresh_after_each_submission_is_planned_once_per_connection(team):
    """Every submission refreshes its task's tally: PostgreSQL keeps one plan for the statement instead of
    planning it again for each task (planning cost twice what running it does)."""
    from annotation.quality.peer_tally import peer_tally_refresh

    project, experts, rng = team
    done = _work(project, experts, 2, rng)
    with connection.cursor() as cursor:
        # Statistics as a working database has them (the golden tasks carry most labels).
        cursor.execute("ANALYZE annotation_label, annotation_assignment, annotation_task")
    for lease in done * 2:
        peer_tally_refresh(task_id=lease.task_id)

    with connection.cursor() as cursor:
        cursor.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                       "WHERE statement LIKE %s", ["%INSERT INTO \"annotation_peertally\"%"])
        (generic, custom), = cursor.fetchall()
    assert len(done) >= 10
    # Custom plans for its first five runs, as PostgreSQL does for every prepared statement; then one plan.
    assert custom <= 5 and generic >= len(done) * 2 - 5
