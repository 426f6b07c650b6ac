"""Concurrent calls with one idempotency key on PostgreSQL: one write, every caller gets its result."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
from django.db import connection

from apps_registry.models import IdempotentResult, Record
from apps_registry.services.idempotency import idempotency_key_check
from apps_registry.services.routes import route_run
from tests.apps_registry.route_helpers import one_route_app

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CALLS = 20


def test_concurrent_calls_with_one_key_write_once_and_all_get_the_first_result(user):
    app = one_route_app(user, [{"insert": {"collection": "items", "value": "{'n': 1}"}, "as": "r"}, {"return": "r.id"}])
    key = idempotency_key_check("same-key", source="test")
    barrier = Barrier(CALLS)

    def one(_i):
        try:
            barrier.wait()
            return route_run(actor=user, app_id=app.id, op="r", params={}, kind="mutation", idempotency_key=key).value
        except Exception as exc:  # noqa: BLE001
            return exc
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=CALLS) as pool:
        results = list(pool.map(one, range(CALLS)))

    assert [r for r in results if isinstance(r, Exception)] == []
    record = Record.objects.get(storage__app=app)
    assert set(results) == {record.record_id}
    assert IdempotentResult.objects.count() == 1
