"""16 experts pull and submit at once against PostgreSQL; the assignment rules must hold."""
import random
import threading

import pytest
from django.db import connection, connections
from django.db.models import Count
from django.utils import timezone

from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, Task
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from tests.factories import ExpertFactory, make_project_with_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def _work(project, expert, errors):
    try:
        for _ in range(200):
            lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
            if lease is None:
                return
            keys = [i.item_key for i in rubric_items_for_task(lease.task)]
            labels = {k: random.randint(0, 1) for k in keys}
            labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
    except Exception as exc:  # collected and asserted on in the main thread
        errors.append(exc)
    finally:
        connections.close_all()


def test_sixteen_concurrent_experts_fill_every_task_exactly():
    assert connection.vendor == "postgresql"
    project = make_project_with_tasks(n_questions=30, items_per_question=3)
    experts = [ExpertFactory() for _ in range(16)]
    for e in experts:
        project_add_member(project=project, user=e)
    errors: list[Exception] = []

    threads = [threading.Thread(target=_work, args=(project, e, errors)) for e in experts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    assert errors == []
    per_task = Assignment.objects.filter(status__in=["leased", "submitted"]).values("task").annotate(n=Count("id"))
    assert {row["n"] for row in per_task} == {3}
    assert not Assignment.objects.values("task", "expert").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert Task.objects.filter(status="complete").count() == 30
    assert Task.objects.exclude(status="complete").count() == 0
    assert set(Task.objects.values_list("submitted_count", flat=True)) == {3}


def _race(targets):
    """Start every target at once behind a barrier; return what each raised."""
    barrier = threading.Barrier(len(targets))
    errors: list[Exception] = []

    def run(target):
        try:
            barrier.wait(timeout=10)
            target()
        except Exception as exc:  # collected and asserted on in the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return errors


def test_two_last_submissions_racing_on_a_tied_item_open_exactly_one_consultation():
    from annotation.models import Consultation
    from annotation.projects.services import project_settings_update

    assert connection.vendor == "postgresql"
    project = make_project_with_tasks(n_questions=1, items_per_question=2, overlap=2)
    project_settings_update(project=project, values={"tie_extra_experts": "off"}, changed_by=None,
                            now=timezone.now())
    a, b = ExpertFactory(), ExpertFactory()
    leases = []
    for expert in (a, b):
        project_add_member(project=project, user=expert)
        leases.append(assignment_claim_next(project=project, expert=expert, now=timezone.now()))
    keys = [i.item_key for i in rubric_items_for_task(leases[0].task)]

    def submit(expert, lease, value):
        return lambda: labels_submit(expert=expert, assignment_id=lease.pk, labels={keys[0]: value, keys[1]: 1},
                                     now=timezone.now())

    errors = _race([submit(a, leases[0], 1), submit(b, leases[1], 0)])

    assert errors == []
    assert Consultation.objects.count() == 1
    assert Consultation.objects.get().participants.count() == 2


def test_two_experts_flagging_the_same_item_at_once_open_exactly_one_consultation():
    from annotation.consultations.opening import consultation_open_by_expert
    from annotation.models import Consultation

    project = make_project_with_tasks(n_questions=1, items_per_question=1, overlap=3)
    experts = [ExpertFactory() for _ in range(3)]
    leases = []
    for expert in experts:
        project_add_member(project=project, user=expert)
        lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
        keys = [i.item_key for i in rubric_items_for_task(lease.task)]
        labels_submit(expert=expert, assignment_id=lease.pk, labels={keys[0]: 1}, now=timezone.now())
        leases.append(lease)
    item_id = rubric_items_for_task(leases[0].task)[0].pk

    def flag(expert, lease):
        return lambda: consultation_open_by_expert(expert=expert, assignment_id=lease.pk, rubric_item_id=item_id,
                                                   reason="两种读法都说得通", now=timezone.now())

    errors = _race([flag(e, lease) for e, lease in zip(experts, leases, strict=True)])

    assert errors == []
    assert Consultation.objects.count() == 1


def test_one_expert_claiming_from_many_tabs_at_once_never_holds_more_than_their_limit():
    """A double click or two tabs: 8 threads of one expert (limit 1) claim at the same instant."""
    from experts.models import ExpertProfile

    project = make_project_with_tasks(n_questions=20, items_per_question=2)
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    ExpertProfile.objects.filter(user=expert).update(max_concurrent_leases=1)
    start = threading.Barrier(8)
    leases: list[int] = []
    errors: list[Exception] = []

    def claim() -> None:
        try:
            start.wait(timeout=30)
            lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
            if lease is not None:
                leases.append(lease.pk)
        except Exception as exc:  # collected and asserted on in the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    for _round in range(3):
        Assignment.objects.filter(expert=expert).delete()
        Task.objects.filter(project=project).update(live_count=0, status="open")
        leases.clear()
        threads = [threading.Thread(target=claim) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)

        assert errors == []
        assert Assignment.objects.filter(expert=expert, status="leased").count() == 1
        assert len(set(leases)) == 1 and len(leases) == 8  # every tab got the same lease back


def test_one_experts_claims_and_submissions_racing_never_deadlock():
    """The claim takes the expert's lock first, a submission after its task: 4 threads of one expert
    (limit 2) claim and submit at once for many rounds; nothing deadlocks or fails, and the expert
    never holds more than their limit."""
    from experts.models import ExpertProfile

    project = make_project_with_tasks(n_questions=60, items_per_question=2, overlap=1)
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    ExpertProfile.objects.filter(user=expert).update(max_concurrent_leases=2, weekly_capacity=1000)
    errors: list[Exception] = []
    most_held: list[int] = []

    def loop() -> None:
        try:
            for _ in range(15):
                lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
                if lease is None:
                    return
                most_held.append(Assignment.objects.filter(expert=expert, status="leased").count())
                labels = {i.item_key: 1 for i in rubric_items_for_task(lease.task)}
                labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
        except Exception as exc:  # collected and asserted on in the main thread
            if "lease_limit" not in str(getattr(exc, "code", "")):
                errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=loop) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    assert errors == []
    assert max(most_held) <= 2
    submitted = Assignment.objects.filter(expert=expert, status="submitted").count()
    assert submitted >= 15  # the threads got work done, not only refusals
    assert Task.objects.filter(project=project, status="complete").count() == submitted


def test_a_started_task_held_locked_by_a_submission_is_walked_past_in_the_draws_one_query():
    """Two tasks started, one of them locked by a peer's submission in progress: the next expert gets the
    other started task (not a fresh one), from the draw's one query, without waiting for the lock."""
    from django.test.utils import CaptureQueriesContext

    from annotation.assignment.manual import assignments_create_by_hand
    from annotation.assignment.services import RING_SIZE

    project = make_project_with_tasks(n_questions=6, items_per_question=2)
    busy, started, *fresh = list(Task.objects.filter(project=project).order_by("pk"))
    # Every random point of the ring lands past the started task and before the busy one: only
    # walking past the busy task (and round the ring) reaches the started one.
    Task.objects.filter(pk=busy.pk).update(shuffle_key=RING_SIZE - 1)
    Task.objects.filter(pk=started.pk).update(shuffle_key=0)
    for n, task in enumerate(fresh, start=1):
        Task.objects.filter(pk=task.pk).update(shuffle_key=n * (RING_SIZE // 8))
    peers = [ExpertFactory() for _ in range(2)]
    expert = ExpertFactory()
    for member in [*peers, expert]:
        project_add_member(project=project, user=member)
    assignments_create_by_hand(project=project, task_ids=[busy.pk], experts=[peers[0]], by=None,
                               now=timezone.now(), audited=False)
    assignments_create_by_hand(project=project, task_ids=[started.pk], experts=[peers[1]], by=None,
                               now=timezone.now(), audited=False)
    locked, release = threading.Event(), threading.Event()

    def submission_in_progress() -> None:
        # A submission holds its task's lock for its whole transaction.
        from django.db import transaction

        try:
            with transaction.atomic():
                Task.objects.select_for_update(no_key=True).get(pk=busy.pk)
                locked.set()
                release.wait(timeout=30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=submission_in_progress)
    holder.start()
    try:
        assert locked.wait(timeout=10)
        with CaptureQueriesContext(connection) as claim:
            lease = assignment_claim_next(project=project, expert=expert, now=timezone.now(),
                                          rng=random.Random(3))
    finally:
        release.set()
        holder.join(timeout=30)

    assert lease is not None and lease.task_id == started.pk
    # One draw: no second one, no walk of the ring one task at a time.
    draws = [q["sql"] for q in claim.captured_queries if "SKIP LOCKED" in q["sql"]]
    assert len(draws) == 1, "\n".join(draws)
