"""Idempotency records: a request's key is stored once; a duplicate stored meanwhile is replayed."""
import pytest
from django.db import connection

import annotation.idempotency as idempotency
from annotation.models import IdempotencyRecord
from tests.factories import ExpertFactory


@pytest.mark.django_db(transaction=True)
def test_a_key_stored_by_a_concurrent_duplicate_is_replayed_and_the_connection_stays_usable(monkeypatch):
    expert = ExpertFactory()
    runs = []

    def run():
        runs.append(1)
        return 201, {"n": len(runs)}

    assert not connection.in_atomic_block  # outside a transaction the record is one autocommit statement
    assert idempotency.idempotent_call(user=expert, key="k1", scope="s", payload={"a": 1}, run=run) == (201, {"n": 1})
    # The duplicate's look-up found nothing (the first had not stored its answer yet): its insert meets
    # the stored record, and the first answer is returned.
    monkeypatch.setattr(idempotency._RECORD, "first", lambda **_kwargs: None)
    assert idempotency.idempotent_call(user=expert, key="k1", scope="s", payload={"a": 1}, run=run) == (201, {"n": 1})
    assert len(runs) == 2 and IdempotencyRecord.objects.filter(user=expert, key="k1").count() == 1
    # The same key with another request is refused, on the path that met the duplicate too.
    with pytest.raises(idempotency.DomainError):
        idempotency.idempotent_call(user=expert, key="k1", scope="s", payload={"a": 2}, run=run)
