"""A published rubric version never changes, whatever path tries (triggers in the database)."""
import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from rubrics.models import Dimension, RubricItem, RubricVersion
from tests.factories import RubricVersionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def published_item():
    version = RubricVersionFactory()
    item = RubricItem.objects.create(version=version, question_ref="q1", position=1, item_key="q1:1",
                                     dimension=Dimension.objects.get(code="warmth"), score=3, content="warm")
    RubricVersion.objects.filter(pk=version.pk).update(status="published", published_at=timezone.now())
    return item


def test_orm_update_of_published_item_is_refused(published_item):
    with pytest.raises(IntegrityError), transaction.atomic():
        RubricItem.objects.filter(pk=published_item.pk).update(content="changed")
    published_item.refresh_from_db()
    assert published_item.content == "warm"


def test_raw_sql_delete_of_published_item_is_refused(published_item):
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM rubrics_rubricitem WHERE id = %s", [published_item.pk])
    assert RubricItem.objects.filter(pk=published_item.pk).exists()


def test_adding_an_item_to_a_published_version_is_refused(published_item):
    with pytest.raises(IntegrityError), transaction.atomic():
        RubricItem.objects.create(version=published_item.version, question_ref="q1", position=2,
                                  item_key="q1:2", dimension=published_item.dimension, score=1, content="x")
    assert RubricItem.objects.filter(version=published_item.version).count() == 1


def test_unpublishing_a_version_is_refused(published_item):
    with pytest.raises(IntegrityError), transaction.atomic():
        RubricVersion.objects.filter(pk=published_item.version_id).update(status="draft", published_at=None)
    assert RubricVersion.objects.get(pk=published_item.version_id).status == "published"


def test_draft_items_can_still_be_edited():
    version = RubricVersionFactory()
    item = RubricItem.objects.create(version=version, question_ref="q1", position=1, item_key="q1:1",
                                     dimension=Dimension.objects.get(code="warmth"), score=3, content="warm")
    RubricItem.objects.filter(pk=item.pk).update(content="warmer")
    item.refresh_from_db()
    assert item.content == "warmer"


def test_taxonomy_has_fifteen_abilities_under_five_categories_and_one_gate():
    abilities = Dimension.objects.filter(is_gate=False)
    assert abilities.count() == 15
    assert set(abilities.values_list("category", flat=True)) == {
        "personality", "emotion", "social", "motivation", "morality"}
    assert Dimension.objects.get(is_gate=True).name_zh == "其他"


def test_a_bulk_insert_with_one_item_of_a_published_version_is_refused_whole(published_item):
    # The next number of that rubric: the factory's sequence may have given the published one any number.
    draft = RubricVersionFactory(rubric=published_item.version.rubric, number=published_item.version.number + 1)
    rows = [RubricItem(version=draft, question_ref=f"q{i}", position=1, item_key=f"q{i}:1",
                       dimension=published_item.dimension, score=1, content="x") for i in range(50)]
    rows.insert(25, RubricItem(version=published_item.version, question_ref="q9", position=1, item_key="q9:1",
                               dimension=published_item.dimension, score=1, content="sneaked in"))
    with pytest.raises(IntegrityError), transaction.atomic():
        RubricItem.objects.bulk_create(rows)
    assert RubricItem.objects.count() == 1
    RubricItem.objects.bulk_create(rows[:25] + rows[26:])  # the draft alone takes them
    assert RubricItem.objects.filter(version=draft).count() == 50
