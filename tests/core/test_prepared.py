"""Querysets compiled once (core.prepared): each run binds its own values, and gives what the plain queryset gives."""
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import Count, F, Q
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from annotation.models import Assignment, Task
from core.prepared import Prepared, PreparedError
from tests.factories import ExpertFactory, make_project_with_tasks

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _tasks(*, project_id: int, after: object, min_overlap: int, done: bool):
    rows = Task.objects.filter(project_id=project_id, created_at__gte=after, overlap__gte=min_overlap)
    if done:
        rows = rows.filter(status=Task.Status.COMPLETE)
    return (rows.select_related("response__question", "project")
            .annotate(assignments_n=Count("assignments"), double=F("overlap") * 2).order_by("pk"))


TASKS = Prepared(_tasks)


def _fields(task: Task) -> tuple:
    return (task.pk, task.status, task.response.question.external_id, task.project.name,
            task.assignments_n, task.double)


def test_each_run_binds_its_own_values_and_matches_the_plain_queryset():
    one = make_project_with_tasks(n_questions=3, items_per_question=1, overlap=2)
    two = make_project_with_tasks(n_questions=2, items_per_question=1, overlap=3)
    Assignment.objects.create(task=Task.objects.filter(project=two).first(), expert=ExpertFactory(), slot=1,
                              leased_at=timezone.now(), expires_at=timezone.now() + timedelta(hours=1))
    long_ago = timezone.now() - timedelta(days=1)

    for project, overlap in ((one, 1), (two, 1), (one, 3), (two, 3)):
        values = {"project_id": project.pk, "after": long_ago, "min_overlap": overlap}
        prepared = TASKS.all(shape={"done": False}, **values)
        plain = list(_tasks(done=False, **values))
        assert [_fields(t) for t in prepared] == [_fields(t) for t in plain]
    assert [t.assignments_n for t in TASKS.all(shape={"done": False}, project_id=two.pk, after=long_ago,
                                                  min_overlap=1)] == [1, 0]
    assert TASKS.all(shape={"done": False}, project_id=one.pk, after=timezone.now() + timedelta(days=1),
                     min_overlap=1) == []
    # Another shape is another query: no task is complete.
    assert TASKS.all(shape={"done": True}, project_id=one.pk, after=long_ago, min_overlap=1) == []
    first = TASKS.first(shape={"done": False}, project_id=one.pk, after=long_ago, min_overlap=1)
    assert first is not None and first.pk == min(Task.objects.filter(project=one).values_list("pk", flat=True))
    assert first._state.adding is False and first._state.db == "default"


def test_a_value_the_query_changes_before_it_reaches_the_sql_is_refused():
    shifted = Prepared(lambda *, project_id: Task.objects.filter(project_id=project_id + 1))
    with pytest.raises(PreparedError, match="computed from the values"):
        shifted.all(project_id=1)
    day = Prepared(lambda *, at: Task.objects.filter(created_at__gte=at - timedelta(days=1)))
    with pytest.raises(PreparedError, match="computed from the values"):
        day.all(at=timezone.now())
    # A value one shape does not use is no error: that shape's SQL does not read it.
    some = Prepared(lambda *, project_id, status, narrow: Task.objects.filter(
        project_id=project_id, **({"status": status} if narrow else {})))
    project = make_project_with_tasks(n_questions=2, items_per_question=1, overlap=1)
    assert len(some.all(shape={"narrow": False}, project_id=project.pk, status="complete")) == 2
    assert some.all(shape={"narrow": True}, project_id=project.pk, status="complete") == []
    with pytest.raises(PreparedError, match="list"):
        Prepared(lambda *, ids: Task.objects.filter(pk__in=ids)).all(ids=[1, 2])


def test_a_value_of_another_type_than_the_first_run_is_refused():
    by_project = Prepared(lambda *, project_id: Task.objects.filter(project_id=project_id))
    assert by_project.all(project_id=10**6) == []
    with pytest.raises(TypeError, match="project_id must be int"):
        by_project.all(project_id="1 OR 1=1")


@pytest.mark.django_db(transaction=True)
def test_a_lock_outside_a_transaction_is_refused_as_django_refuses_it():
    project = make_project_with_tasks(n_questions=1, items_per_question=1, overlap=1)
    locked = Prepared(lambda *, task_id: Task.objects.select_for_update().filter(pk=task_id))
    task_id = Task.objects.get(project=project).pk
    with transaction.atomic():
        assert locked.first(task_id=task_id).pk == task_id
    with pytest.raises(TransactionManagementError):
        locked.first(task_id=task_id)


@pytest.mark.django_db(transaction=True)
def test_threads_compile_their_own_plan_and_read_their_own_rows():
    projects = [make_project_with_tasks(n_questions=n, items_per_question=1, overlap=1) for n in (1, 2, 3, 4)]
    by_project = Prepared(lambda *, project_id: Task.objects.filter(Q(project_id=project_id)).order_by("pk"))
    seen: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def read(project_id: int) -> None:
        try:
            for _ in range(20):
                seen[project_id] = [t.pk for t in by_project.all(project_id=project_id)]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=read, args=(p.pk,)) for p in projects]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert {p: len(ids) for p, ids in seen.items()} == {p.pk: n for p, n in zip(projects, (1, 2, 3, 4), strict=True)}


def test_a_values_list_of_columns_and_expressions_gives_the_plain_querysets_tuples_in_its_order():
    project = make_project_with_tasks(n_questions=3, items_per_question=1, overlap=2)
    Task.objects.filter(project=project).update(status=Task.Status.COMPLETE)
    Task.objects.filter(pk=Task.objects.filter(project=project).order_by("pk").first().pk).update(
        status=Task.Status.OPEN)

    def build(*, project_id: int):
        return (Task.objects.filter(project_id=project_id).order_by("pk")
                .values_list(F("overlap") * 3, "pk", "status", Count("assignments")))

    rows = Prepared(build)
    assert rows.tuples(project_id=project.pk) == [tuple(r) for r in build(project_id=project.pk)]
    assert [r[0] for r in rows.tuples(project_id=project.pk)] == [6, 6, 6]
    assert [r[2] for r in rows.tuples(project_id=project.pk)] == ["open", "complete", "complete"]
