"""Concurrent route calls on PostgreSQL: increments are atomic, duplicate inserts fail cleanly."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
from django.db import connection

from apps_registry.exceptions import CharmingError, OperationFailed
from apps_registry.models import Record
from tests.apps_registry.route_helpers import one_route_app, run

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CALLS = 50


def call_concurrently(user, app, params_for) -> list[object]:
    """Run CALLS calls at once, each in its own thread and database connection."""
    barrier = Barrier(CALLS)

    def one(i: int) -> object:
        try:
            barrier.wait()
            return run(user, app, params=params_for(i))
        except CharmingError as exc:
            return exc
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=CALLS) as pool:
        return list(pool.map(one, range(CALLS)))


def test_fifty_concurrent_increments_of_one_counter_end_at_fifty(user):
    app = one_route_app(
        user,
        [
            {"get": {"collection": "counters", "id": "'hits'"}, "as": "before"},
            {"increment": {"collection": "counters", "id": "'hits'", "field": "n", "by": "1"}},
            {"return": "before.n"},
        ],
    )
    Record.objects.create(storage=app.storage, collection="counters", record_id="hits", data={"n": 0})
    results = call_concurrently(user, app, lambda i: {})
    assert not [r for r in results if isinstance(r, Exception)]
    assert Record.objects.get(record_id="hits").data == {"n": CALLS}
    assert Record.objects.get(record_id="hits").version == CALLS + 1


def test_fifty_concurrent_inserts_of_one_id_leave_one_record_and_49_clear_failures(user):
    app = one_route_app(
        user,
        [
            {"insert": {"collection": "items", "id": "'only'", "value": "{'caller': params.i}"}, "as": "r"},
            {"return": "r.id"},
        ],
    )
    results = call_concurrently(user, app, lambda i: {"i": i})
    succeeded = [r for r in results if r == "only"]
    failed = [r for r in results if isinstance(r, OperationFailed)]
    assert len(succeeded) == 1
    assert len(failed) == CALLS - 1
    assert {f.message for f in failed} == {"A record items/only already exists; use update or upsert to change it."}
    assert Record.objects.filter(storage=app.storage, collection="items").count() == 1


def test_fifty_concurrent_inserts_near_the_records_limit_stop_exactly_at_it(user, settings):
    settings.CHARMING_ROUTES_MAX_RECORDS_PER_APP = 30
    app = one_route_app(user, [{"insert": {"collection": "items", "value": "{'caller': params.i}"}}])
    for i in range(5):
        run(user, app, params={"i": -i})
    results = call_concurrently(user, app, lambda i: {"i": i})
    refused = [r for r in results if isinstance(r, OperationFailed)]
    assert len(refused) == CALLS - 25
    assert {r.details["limit"] for r in refused} == {"records_per_app"}
    assert Record.objects.filter(storage=app.storage).count() == 30
    app.storage.refresh_from_db(fields=["records_held"])
    assert app.storage.records_held == 30
