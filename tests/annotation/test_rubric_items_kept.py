"""A task's rubric items, read on every claim and submission, are kept per process for a published
version (which never changes), read each time for a draft, and read again once their time is up."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation import selectors
from annotation.models import Task
from annotation.selectors import rubric_items_for_task
from rubrics.models import RubricItem, RubricVersion
from tests.factories import make_project_with_tasks

pytestmark = pytest.mark.django_db


def _task() -> Task:
    project = make_project_with_tasks(n_questions=2, items_per_question=4)
    return Task.objects.select_related("response__question").filter(project=project).order_by("pk").first()


def _read(task: Task) -> tuple[list[str], int]:
    with CaptureQueriesContext(connection) as queries:
        items = rubric_items_for_task(task)
    return [f"{i.item_key} {i.dimension.code} {i.content}" for i in items], len(queries)


def test_a_published_versions_items_are_read_once_and_come_back_the_same_in_order():
    task = _task()
    first, reads = _read(task)
    assert reads == 1 and [row.split()[0] for row in first] == [f"{task.response.question.external_id}:{p}"
                                                                  for p in range(1, 5)]
    again, reads = _read(task)
    assert (again, reads) == (first, 0)
    # Another question of the same version is its own entry.
    other = Task.objects.select_related("response__question").exclude(pk=task.pk).get(project=task.project)
    assert _read(other)[1] == 1 and _read(other)[0] != first


def test_a_draft_versions_items_are_read_each_time_and_show_each_edit():
    task = _task()
    draft = RubricVersion.objects.create(rubric=task.project.rubric, number=2)
    ref = task.response.question.external_id
    RubricItem.objects.create(version=draft, question_ref=ref, position=1, item_key=f"{ref}:1",
                              dimension=RubricItem.objects.filter(version_id=task.rubric_version_id).first().dimension,
                              score=2, content="first wording")
    Task.objects.filter(pk=task.pk).update(rubric_version=draft)
    task.rubric_version_id = draft.pk

    assert _read(task) == ([f"{ref}:1 {RubricItem.objects.get(version=draft).dimension.code} first wording"], 1)
    RubricItem.objects.filter(version=draft).update(content="second wording")
    rows, reads = _read(task)
    assert reads == 1 and rows[0].endswith("second wording")


def test_kept_items_are_read_again_once_their_time_is_up(monkeypatch):
    task = _task()
    clock = [1000.0]
    monkeypatch.setattr(selectors.time, "monotonic", lambda: clock[0])
    assert _read(task)[1] == 1
    clock[0] += selectors.ITEMS_KEEP_S - 1
    assert _read(task)[1] == 0
    clock[0] += 2  # past the time: an admin's renaming of a dimension shows now
    assert _read(task)[1] == 1


def test_the_process_keeps_at_most_its_bound_of_entries_dropping_the_least_recently_read(monkeypatch):
    monkeypatch.setattr(selectors, "ITEMS_KEPT", 1)
    project = make_project_with_tasks(n_questions=2, items_per_question=2)
    first, second = Task.objects.select_related("response__question").filter(project=project).order_by("pk")
    assert _read(first)[1] == 1 and _read(second)[1] == 1
    assert len(selectors._items_kept) == 1
    assert _read(second)[1] == 0 and _read(first)[1] == 1  # the first was dropped for the second
