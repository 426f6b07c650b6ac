"""The same signed webhook delivery sent many times at once on PostgreSQL: it runs once; every other copy is refused
as a replay, waiting for the first's transaction rather than racing it."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
from django.db import connection

from apps_registry.exceptions import OperationFailed
from apps_registry.models import HookDelivery
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.hooks import hook_create, hook_deliver, signature_make
from tests.apps_registry.route_helpers import records
from tests.apps_registry.test_hooks import BUDGET

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

COPIES = 12


def test_copies_of_one_signed_delivery_sent_at_once_write_once(user):
    app = app_definition_save(actor=user, definition=BUDGET)
    made = hook_create(actor=user, app_id=app.id, route="add_expense")
    body = json.dumps({"amount": 9}).encode()
    header = signature_make(secret=made.secret, timestamp=int(time.time()), body=body)
    barrier = Barrier(COPIES)

    def one(_i):
        try:
            barrier.wait()
            return hook_deliver(hook_id=str(made.view.hook.id), signature_header=header, body=body, address="::1")
        except Exception as exc:  # noqa: BLE001
            return exc
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=COPIES) as pool:
        results = list(pool.map(one, range(COPIES)))

    ran = [r for r in results if not isinstance(r, Exception)]
    replays = [r for r in results if isinstance(r, OperationFailed) and r.details == {"replay": True}]
    assert len(ran) == 1 and len(replays) == COPIES - 1, results
    assert [r["amount"] for r in records(app, "expenses").values()] == [9]
    assert HookDelivery.objects.count() == 1


DELIVERIES = 10
ROUNDS = 4


def test_deleting_an_app_while_its_hook_delivers_neither_deadlocks_nor_fails_internally(user):
    from apps_registry.exceptions import NotFound
    from apps_registry.models import App
    from apps_registry.services.apps import app_delete

    for _round in range(ROUNDS):
        app = app_definition_save(actor=user, definition=BUDGET)
        made = hook_create(actor=user, app_id=app.id, route="add_expense")
        barrier = Barrier(DELIVERIES + 1)

        def one_delivery(i, made=made, barrier=barrier):
            body = json.dumps({"amount": i + 1}).encode()
            header = signature_make(secret=made.secret, timestamp=int(time.time()), body=body)
            barrier.wait()
            return hook_deliver(hook_id=str(made.view.hook.id), signature_header=header, body=body, address="::1")

        def delete(app=app, barrier=barrier):
            barrier.wait()
            return app_delete(actor=user, app_id=app.id, purge_storage=True, confirmed_via="command")

        def guarded(call):
            try:
                return call()
            except Exception as exc:  # noqa: BLE001 - a deadlock or a broken foreign key is what this test looks for
                return exc
            finally:
                connection.close()

        calls = [delete] + [lambda i=i: one_delivery(i) for i in range(DELIVERIES)]
        with ThreadPoolExecutor(max_workers=len(calls)) as pool:
            results = list(pool.map(guarded, calls))

        assert not isinstance(results[0], Exception), repr(results[0])
        unexpected = [r for r in results[1:] if isinstance(r, Exception) and not isinstance(r, NotFound)]
        assert unexpected == [], [repr(r) for r in unexpected]
        assert not App.objects.filter(pk=app.id).exists() and not HookDelivery.objects.exists()
