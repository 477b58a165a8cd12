"""A rubric item's version and dimension exist for as long as the item does (rubrics/0007).

On PostgreSQL these references are checked by statement triggers instead of foreign keys;
every way around them is tried here: raw inserts and updates naming what does not exist, a
bulk insert with one bad row, deletes and renumbering of what items name, and the two races
a foreign key's locks settle (a delete while an insert is open, an insert while a delete is).
"""
import threading

import pytest
from django.db import IntegrityError, connection, connections, transaction

from rubrics.models import Dimension, RubricItem
from tests.factories import RubricVersionFactory

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

INSERT = ("INSERT INTO rubrics_rubricitem (version_id, question_ref, position, item_key, dimension_id, score, "
          "content, tags) VALUES (%s, %s, %s, %s, %s, 1, 'x', '[]')")


@pytest.fixture(autouse=True)
def _postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("SQLite keeps its foreign keys")


def new_dimension(code: str = "spare") -> Dimension:
    template = Dimension.objects.get(code="warmth")
    return Dimension.objects.create(code=code, name_zh=f"{code}维度", name_en=code, category=template.category)


def test_an_item_naming_a_dimension_or_a_version_that_does_not_exist_is_refused_and_nothing_is_written():
    version = RubricVersionFactory()
    warmth = Dimension.objects.get(code="warmth")
    for version_id, dimension_id, what in [(version.pk, 987654, "dimension 987654"),
                                           (987655, warmth.pk, "rubric version 987655")]:
        with pytest.raises(IntegrityError, match=what), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(INSERT, [version_id, "q1", 1, "q1:1", dimension_id])
    assert not RubricItem.objects.filter(question_ref="q1").exists()


def test_a_bulk_insert_with_one_bad_reference_is_refused_whole():
    version = RubricVersionFactory()
    warmth = Dimension.objects.get(code="warmth")
    rows = [RubricItem(version=version, question_ref="q1", position=i, item_key=f"q1:{i}", dimension_id=warmth.pk,
                       score=1, content="x") for i in range(1, 50)]
    rows[30].dimension_id = 987654
    with pytest.raises(IntegrityError), transaction.atomic():
        RubricItem.objects.bulk_create(rows)
    assert not RubricItem.objects.filter(version=version).exists()


def test_an_update_to_a_missing_dimension_is_refused():
    version = RubricVersionFactory()
    item = RubricItem.objects.create(version=version, question_ref="q1", position=1, item_key="q1:1",
                                     dimension=Dimension.objects.get(code="warmth"), score=1, content="x")
    with pytest.raises(IntegrityError, match="dimension 987654"), transaction.atomic():
        RubricItem.objects.filter(pk=item.pk).update(dimension_id=987654)
    item.refresh_from_db()
    assert item.dimension.code == "warmth"


def test_what_an_item_names_cannot_be_deleted_or_renumbered_by_raw_sql_but_the_unnamed_can():
    version = RubricVersionFactory()
    spare, unused = new_dimension("spare"), new_dimension("unused")
    RubricItem.objects.create(version=version, question_ref="q1", position=1, item_key="q1:1", dimension=spare,
                              score=1, content="x")
    for sql, params in [("DELETE FROM rubrics_dimension WHERE id = %s", [spare.pk]),
                        ("UPDATE rubrics_dimension SET id = %s WHERE id = %s", [spare.pk + 1000, spare.pk]),
                        ("DELETE FROM rubrics_rubricversion WHERE id = %s", [version.pk])]:
        with pytest.raises(IntegrityError, match="has rubric items"), transaction.atomic(), \
                connection.cursor() as cursor:
            cursor.execute(sql, params)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE rubrics_dimension SET name_en = 'renamed' WHERE id = %s", [spare.pk])
        cursor.execute("DELETE FROM rubrics_dimension WHERE id = %s", [unused.pk])
    assert Dimension.objects.filter(pk=spare.pk, name_en="renamed").exists()
    assert not Dimension.objects.filter(pk=unused.pk).exists()


def _in_thread(work) -> tuple[threading.Thread, list]:
    outcome: list = []

    def run() -> None:
        try:
            with transaction.atomic():
                work()
            outcome.append("committed")
        except IntegrityError as exc:
            outcome.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


@pytest.mark.django_db(transaction=True)
def test_a_delete_while_an_insert_naming_the_dimension_is_open_waits_for_it_and_fails():
    version = RubricVersionFactory()
    spare = new_dimension("spare")

    def delete() -> None:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM rubrics_dimension WHERE id = %s", [spare.pk])

    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(INSERT, [version.pk, "q1", 1, "q1:1", spare.pk])
        thread, outcome = _in_thread(delete)
        thread.join(timeout=1.0)
        assert thread.is_alive()  # the insert's lock holds the delete
    thread.join(timeout=10)
    assert len(outcome) == 1 and isinstance(outcome[0], IntegrityError)
    assert Dimension.objects.filter(pk=spare.pk).exists() and RubricItem.objects.filter(dimension=spare).count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_insert_while_a_delete_of_its_dimension_is_open_waits_for_it_and_fails():
    version = RubricVersionFactory()
    spare = new_dimension("spare")

    def insert() -> None:
        with connection.cursor() as cursor:
            cursor.execute(INSERT, [version.pk, "q1", 1, "q1:1", spare.pk])

    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM rubrics_dimension WHERE id = %s", [spare.pk])
        thread, outcome = _in_thread(insert)
        thread.join(timeout=1.0)
        assert thread.is_alive()  # the delete's lock holds the insert's check
    thread.join(timeout=10)
    assert len(outcome) == 1 and isinstance(outcome[0], IntegrityError)
    assert not Dimension.objects.filter(pk=spare.pk).exists() and not RubricItem.objects.filter(
        question_ref="q1").exists()
