"""Purge and restore racing each other on PostgreSQL, each in its own thread and connection."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier, Event

import pytest
from django.db import connection

from apps_registry.exceptions import CharmingError, NotFound, OperationFailed
from apps_registry.models import AuditEvent, Record, Storage
from apps_registry.services.retention import retained_storage_purge, storage_restore
from tests.factories import make_app
from tests.retention_helpers import app_with_records, records_by_app, retained

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def in_threads(*calls):
    """Run each callable in its own thread (and database connection); return results or raised errors."""

    def one(call):
        try:
            return call()
        except CharmingError as exc:
            return exc
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(one, calls))


def test_two_purges_of_the_same_storage_at_once_delete_it_once(user, other_user):
    app_with_records(other_user, "Bystander", 7)
    storage = retained(user, name="Doomed", count=400, days_ago=40)
    before = records_by_app(exclude_storage=storage)
    barrier = Barrier(2)

    def purge():
        barrier.wait()
        return retained_storage_purge(actor=None, storage_id=storage.id, batch_size=10)

    results = in_threads(purge, purge)
    finished = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(finished) == 1 and len(refused) == 1, results
    # Depending on where the loser is when the winner finishes: mid-batch, or at its very first query.
    assert isinstance(refused[0], NotFound)
    assert "no longer exists" in refused[0].message or "may have been purged already" in refused[0].message
    assert not Storage.objects.filter(pk=storage.pk).exists()
    assert AuditEvent.objects.filter(action="storage.purge").count() == 1
    assert records_by_app() == before == {"Bystander": 7}


def test_a_restore_racing_a_purge_never_loses_the_records_it_restored(user):
    storage = retained(user, name="Contested", count=300, days_ago=10)
    target = make_app(owner=user, name="Rescue")
    purge_started = Event()

    def slow_purge():
        def hook(done: int, total: int) -> None:
            purge_started.set()
            time.sleep(0.01)

        return retained_storage_purge(actor=None, storage_id=storage.id, batch_size=10, on_batch=hook)

    def restore_midway():
        assert purge_started.wait(10)
        return storage_restore(actor=None, storage_id=storage.id, to_app_id=target.id)

    purged, restored = in_threads(slow_purge, restore_midway)
    assert isinstance(purged, OperationFailed) and "while it was being purged" in purged.message, purged
    assert not isinstance(restored, Exception), restored
    assert 0 < restored.records_restored < 300
    assert Record.objects.filter(storage__app=target).count() == restored.records_restored
    assert Storage.objects.get(pk=storage.pk).app_id == target.id
    assert not AuditEvent.objects.filter(action="storage.purge").exists()
    assert AuditEvent.objects.filter(action="storage.restore").count() == 1
