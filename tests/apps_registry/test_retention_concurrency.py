"""Purge and restore racing each other on PostgreSQL, each in its own thread and connection."""

from __future__ import annotations

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


def purge_pausing_after_first_batch(storage, restore):
    """Purge `storage` in batches of 10 and, in another thread and connection, run `restore` exactly
    between the first and second batch: the purge's batch hook waits until the restore has returned."""
    first_batch_done, restore_done = Event(), Event()
    batches: list[int] = []

    def purge():
        def between_batches(done: int, total: int) -> None:
            batches.append(done)
            if len(batches) == 1:
                first_batch_done.set()
                assert restore_done.wait(30), "the restore never finished"

        return retained_storage_purge(actor=None, storage_id=storage.id, batch_size=10, on_batch=between_batches)

    def restore_between_batches():
        assert first_batch_done.wait(30), "the purge never finished a batch"
        try:
            return restore()
        finally:
            restore_done.set()

    purged, restored = in_threads(purge, restore_between_batches)
    return purged, restored, batches


def test_a_restore_between_two_purge_batches_stops_the_purge_and_keeps_every_remaining_record(user):
    storage = retained(user, name="Contested", count=300, days_ago=10)
    target = make_app(owner=user, name="Rescue")

    purged, restored, batches = purge_pausing_after_first_batch(
        storage, lambda: storage_restore(actor=None, storage_id=storage.id, to_app_id=target.id)
    )
    assert isinstance(purged, OperationFailed), purged
    assert purged.message == (
        f"Storage {storage.id} was restored to app 'Rescue' while it was being purged; 10 record(s) had "
        "already been deleted. The storage and its remaining records were kept."
    )
    assert batches == [10]
    assert not isinstance(restored, Exception), restored
    assert restored.mode == "attached" and restored.records_restored == 290
    assert Record.objects.filter(storage__app=target).count() == 290
    assert Storage.objects.get(pk=storage.pk).app_id == target.id
    assert not AuditEvent.objects.filter(action="storage.purge").exists()
    assert AuditEvent.objects.filter(action="storage.restore").count() == 1


def test_a_merge_restore_between_two_purge_batches_stops_the_purge_and_keeps_the_merged_records(user):
    storage = retained(user, name="Contested", count=300, days_ago=10, prefix="old")
    target = app_with_records(user, "Has data", 5, prefix="new")

    purged, restored, batches = purge_pausing_after_first_batch(
        storage, lambda: storage_restore(actor=None, storage_id=storage.id, to_app_id=target.id)
    )
    assert isinstance(purged, NotFound), purged
    assert purged.message == (
        f"Storage {storage.id} no longer exists: another purge finished it, or a restore merged its records "
        "into an app, in the meantime (10 record(s) deleted by this run)."
    )
    assert batches == [10]
    assert not isinstance(restored, Exception), restored
    assert restored.mode == "merged" and restored.records_restored == 290
    assert Record.objects.filter(storage=target.storage).count() == 5 + 290
    assert not Storage.objects.filter(pk=storage.pk).exists()
    assert not AuditEvent.objects.filter(action="storage.purge").exists()
    assert AuditEvent.objects.filter(action="storage.restore").count() == 1
