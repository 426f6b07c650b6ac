"""delete_app racing mutations of the same app on PostgreSQL (issue 12, finding 3): no deadlock, no internal error."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
from django.db import connection

from apps_registry.exceptions import CharmingError, NotFound
from apps_registry.models import App, Record, Storage
from apps_registry.services.apps import app_delete
from tests.apps_registry.route_helpers import one_route_app, run

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

MUTATORS = 12
ROUNDS = 6
# Lock record rows first (update), then insert: the insert's deferred foreign key check wants the storage row at
# COMMIT, while the delete holds that row and waits for the records.
STEPS = [
    {"update": {"collection": "items", "id": "'a'", "value": "{'n': params.i}"}},
    {"update": {"collection": "items", "id": "'b'", "value": "{'n': params.i}"}},
    {"insert": {"collection": "items", "value": "{'by': params.i}"}, "as": "made"},
    {"return": "made.id"},
]


def in_threads(calls):
    def one(call):
        try:
            return call()
        except CharmingError as exc:
            return exc
        except Exception as exc:  # noqa: BLE001 - a deadlock or a broken foreign key is what this test looks for
            return exc
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(one, calls))


@pytest.mark.parametrize("purge_storage", [True, False], ids=["purge", "retain"])
def test_deleting_an_app_while_it_is_mutated_neither_deadlocks_nor_fails_internally(user, purge_storage):
    for _round in range(ROUNDS):
        app = one_route_app(user, STEPS)
        Record.objects.create(storage=app.storage, collection="items", record_id="a", data={})
        Record.objects.create(storage=app.storage, collection="items", record_id="b", data={})
        storage_id = app.storage.id
        barrier = Barrier(MUTATORS + 1)

        def mutate(i, app=app, barrier=barrier):
            barrier.wait()
            return run(user, app, params={"i": i})

        def delete(app=app, barrier=barrier):
            barrier.wait()
            return app_delete(actor=user, app_id=app.id, purge_storage=purge_storage, confirmed_via="command")

        results = in_threads([delete] + [lambda i=i: mutate(i) for i in range(MUTATORS)])

        deleted, mutations = results[0], results[1:]
        assert not isinstance(deleted, Exception), repr(deleted)
        unexpected = [r for r in mutations if isinstance(r, Exception) and not isinstance(r, NotFound)]
        assert unexpected == [], [repr(r) for r in unexpected]
        assert not App.objects.filter(pk=app.id).exists()
        succeeded = [r for r in mutations if isinstance(r, str)]
        if purge_storage:
            assert not Storage.objects.filter(pk=storage_id).exists()
            assert not Record.objects.filter(storage_id=storage_id).exists()
        else:
            # Every mutation that succeeded committed before the delete: its record was retained with the rest.
            kept = set(Record.objects.filter(storage_id=storage_id).values_list("record_id", flat=True))
            assert set(succeeded) | {"a", "b"} == kept
