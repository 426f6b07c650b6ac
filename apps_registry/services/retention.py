"""Retained storage: what `delete_app` keeps, and how staff restore or purge it.

Who may call: `actor=None` is an operator at the command line (shell access to the server is
already full trust); a user `actor` (the admin) needs the matching permission —
`apps_registry.purge_storage`, `apps_registry.restore_storage` or `apps_registry.purge_app`
(superusers have them all).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from apps_registry.exceptions import Forbidden, InvalidInput, NotFound, OperationFailed
from apps_registry.models import App, Record, Storage
from apps_registry.services.apps import audit_record, retention_days
from apps_registry.services.collection_indexes import collection_indexes_enqueue, declared_index_keys
from apps_registry.values import clip, clip_repr, parse_uuid

DEFAULT_BATCH_SIZE = 1000
# Called after each committed batch with (records deleted so far in this run, records present at the start).
# It runs between two batches, outside any transaction and holding no lock: the commands report progress
# with it, and tests use it as the seam where a concurrent restore lands exactly between two batches (a
# hook may block; the purge resumes, and re-checks the storage under lock, when it returns).
BatchHook = Callable[[int, int], None]


@dataclass(frozen=True)
class StoragePurgeResult:
    storage_id: uuid.UUID
    app_uuid: uuid.UUID
    app_name: str
    owner: str
    records_purged: int


@dataclass(frozen=True)
class StorageRestoreResult:
    storage_id: uuid.UUID
    app_id: uuid.UUID
    app_name: str
    from_app_id: uuid.UUID
    from_app_name: str
    records_restored: int
    # "attached": the retained storage became the app's storage (the app's own was empty);
    # "merged": its records moved into the app's non-empty storage.
    mode: Literal["attached", "merged"]


@dataclass(frozen=True)
class AppPurgeResult:
    app_id: uuid.UUID
    app_name: str
    owner: str
    records_purged: int
    storage_id: uuid.UUID | None


def retention_cutoff(*, days: int | None = None, now: datetime | None = None) -> datetime:
    """Storage detached before this moment is older than the window (and may be purged, not restored)."""
    return (now or timezone.now()) - timedelta(days=retention_days() if days is None else days)


def retained_until(storage: Storage) -> datetime | None:
    if storage.detached_at is None:
        return None
    return storage.detached_at + timedelta(days=retention_days())


def retained_storage_purge(
    *,
    actor: Any,
    storage_id: uuid.UUID | str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_batch: BatchHook | None = None,
    confirmed_via: str = "command",
) -> StoragePurgeResult:
    """Delete one retained storage and its records, in batches; safe to re-run after an interruption.

    Each batch of records is its own transaction; the storage row and its `storage.purge` audit event
    go in a final one. Interrupted, the storage stays with fewer records and a re-run continues.
    """
    staff_permission_require(actor, "purge_storage", "purge retained storage")
    _check_batch_size(batch_size)
    storage = Storage.objects.select_related("owner").filter(pk=_uuid(storage_id, "storage")).first()
    if storage is None:
        raise NotFound(f"No storage with id {storage_id} exists; it may have been purged already.")
    if not storage.is_detached:
        raise OperationFailed(
            f"Storage {storage.id} belongs to the live app '{storage.app_name}' ({storage.app_uuid}); only retained "
            "storage of a deleted app can be purged. To remove a live app with its data, use purge_app."
        )
    return _purge_detached(
        storage=storage, actor=actor, batch_size=batch_size, on_batch=on_batch, confirmed_via=confirmed_via
    )


@transaction.atomic
def storage_restore(
    *, actor: Any, storage_id: uuid.UUID | str, to_app_id: uuid.UUID | str, confirmed_via: str = "command"
) -> StorageRestoreResult:
    """Re-attach retained storage to an app of the same owner, within the retention window.

    If the app's own storage is empty, the retained storage replaces it; otherwise the retained
    records move into it, refused whole when any (collection, record id) exists in both.
    """
    staff_permission_require(actor, "restore_storage", "restore retained storage")
    storage = Storage.objects.select_for_update().filter(pk=_uuid(storage_id, "storage")).first()
    if storage is None:
        raise NotFound(f"No storage with id {storage_id} exists; it may have been purged.")
    if storage.detached_at is None:
        raise OperationFailed(
            f"Storage {storage.id} is attached to the live app '{storage.app_name}' ({storage.app_uuid}); "
            "only retained storage of a deleted app can be restored."
        )
    days = retention_days()
    now = timezone.now()
    if storage.detached_at < retention_cutoff(now=now):
        age = (now - storage.detached_at).days
        raise OperationFailed(
            f"Storage {storage.id} of the deleted app '{storage.app_name}' was detached on "
            f"{storage.detached_at:%Y-%m-%d %H:%M} UTC, {age} days ago, outside the {days}-day retention window "
            "(CHARMING_STORAGE_RETENTION_DAYS); it can no longer be restored, only purged."
        )
    app = App.objects.select_for_update().select_related("owner").filter(pk=_uuid(to_app_id, "app")).first()
    if app is None:
        raise NotFound(f"No app with id {to_app_id} exists. Create the app first, then restore into it.")
    if app.owner_id != storage.owner_id:
        raise OperationFailed(
            f"App '{app.name}' ({app.id}) is owned by {app.owner.get_username()}, but storage {storage.id} belonged "
            f"to an app of {storage.owner_name}; retained storage can only be restored to an app of the "
            "same owner."
        )
    from_app_id, from_app_name, detached_at = storage.app_uuid, storage.app_name, storage.detached_at
    current = Storage.objects.select_for_update().filter(app=app).first()
    records = Record.objects.filter(storage=storage)
    if current is None or not current.records.exists():
        if current is not None:
            if declared_index_keys(app.collections):
                collection_indexes_enqueue(storage_id=current.id)  # its indexes go with it
            current.delete()
        storage.app, storage.app_uuid, storage.app_name, storage.detached_at = app, app.id, app.name, None
        storage.save(update_fields=["app", "app_uuid", "app_name", "detached_at"])
        if declared_index_keys(app.collections):  # the app's declared indexes, now for this storage
            collection_indexes_enqueue(storage_id=storage.id)
        restored = records.count()
        mode: Literal["attached", "merged"] = "attached"
        target_id = storage.id
    else:
        clashing = records.filter(
            Exists(
                Record.objects.filter(
                    storage=current, collection=OuterRef("collection"), record_id=OuterRef("record_id")
                )
            )
        )
        clash_count = clashing.count()
        if clash_count:
            sample = [
                f"{c}/{r}"
                for c, r in clashing.order_by("collection", "record_id").values_list("collection", "record_id")[:5]
            ]
            raise OperationFailed(
                f"Cannot merge storage {storage.id} into app '{app.name}' ({app.id}): {clash_count} record id(s) exist "
                f"in both, e.g. {', '.join(sample)}. Nothing was restored. Delete those records from the app, or "
                "restore into a new, empty app.",
                details={"collisions": clash_count, "examples": sample},
            )
        restored = records.update(storage=current)
        Storage.objects.filter(pk=current.pk).update(
            records_held=F("records_held") + restored, records_changes=F("records_changes") + 1
        )
        storage.delete()
        mode = "merged"
        target_id = current.id
    audit_record(
        actor=actor,
        action="storage.restore",
        app_id=app.id,
        details={
            "storage_id": str(storage_id),
            "target_storage_id": str(target_id),
            "mode": mode,
            "from_app_id": str(from_app_id),
            "from_app_name": from_app_name,
            "to_app_name": app.name,
            "owner": app.owner.get_username(),
            "records_restored": restored,
            "detached_at": detached_at.isoformat(),
            "confirmed_via": confirmed_via,
        },
    )
    return StorageRestoreResult(
        storage_id=target_id,
        app_id=app.id,
        app_name=app.name,
        from_app_id=from_app_id,
        from_app_name=from_app_name,
        records_restored=restored,
        mode=mode,
    )


def app_purge(
    *,
    actor: Any,
    app_id: uuid.UUID | str,
    confirmed_via: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_batch: BatchHook | None = None,
) -> AppPurgeResult:
    """Remove an app (any owner's) and all its data at once: staff removal.

    The app goes in one transaction (audit `app.purge`), which detaches its storage; the records
    are then deleted in batches (audit `storage.purge`). If that is interrupted, the leftover is
    ordinary retained storage: `purge_storage --app-id` finishes it.
    """
    staff_permission_require(actor, "purge_app", "purge apps")
    _check_batch_size(batch_size)
    with transaction.atomic():
        app = App.objects.select_for_update().select_related("owner").filter(pk=_uuid(app_id, "app")).first()
        if app is None:
            raise NotFound(f"No app with id {app_id} exists.")
        storage = Storage.objects.select_for_update(of=("self",)).select_related("owner").filter(app=app).first()
        record_count = storage.records.count() if storage is not None else 0
        if storage is not None:
            storage.app, storage.detached_at = None, timezone.now()
            storage.save(update_fields=["app", "detached_at"])
            if declared_index_keys(app.collections):
                collection_indexes_enqueue(storage_id=storage.id)
        app_uuid, app_name, owner = app.id, app.name, app.owner.get_username()
        app.delete()
        audit_record(
            actor=actor,
            action="app.purge",
            app_id=app_uuid,
            details={
                "app_name": app_name,
                "owner": owner,
                "confirmed_via": confirmed_via,
                "records": record_count,
                "storage_id": str(storage.id) if storage is not None else None,
            },
        )
    purged = 0
    if storage is not None:
        purged = _purge_detached(
            storage=storage, actor=actor, batch_size=batch_size, on_batch=on_batch, confirmed_via="app.purge"
        ).records_purged
    return AppPurgeResult(
        app_id=app_uuid,
        app_name=app_name,
        owner=owner,
        records_purged=purged,
        storage_id=storage.id if storage is not None else None,
    )


def _purge_detached(
    *, storage: Storage, actor: Any, batch_size: int, on_batch: BatchHook | None, confirmed_via: str
) -> StoragePurgeResult:
    at_start = Record.objects.filter(storage_id=storage.pk).count()
    deleted = 0
    # Keyset pagination: each batch starts after the last one, so it never re-walks the index entries
    # of rows already deleted (PostgreSQL keeps them until vacuum). A re-run starts from 0 again.
    last_pk = 0
    while True:
        # Never one transaction over millions of rows: each batch commits on its own.
        with transaction.atomic():
            # Locked and re-checked per batch: a restore (which locks the same row) must not be undone
            # by the batches that follow it.
            _lock_still_detached(storage, deleted)
            batch = list(
                Record.objects.filter(storage_id=storage.pk, pk__gt=last_pk)
                .order_by("pk")
                .values_list("pk", flat=True)[:batch_size]
            )
            if not batch:
                break
            count, _ = Record.objects.filter(pk__in=batch).delete()
        last_pk = batch[-1]
        deleted += count
        if on_batch is not None:
            on_batch(deleted, at_start)
    with transaction.atomic():
        locked = _lock_still_detached(storage, deleted)
        # Nothing writes to detached storage; this only covers rows a concurrent run skipped.
        leftover, _ = Record.objects.filter(storage_id=storage.pk).delete()
        deleted += leftover
        locked.delete()
        audit_record(
            actor=actor,
            action="storage.purge",
            app_id=storage.app_uuid,
            details={
                "storage_id": str(storage.id),
                "app_name": storage.app_name,
                "owner": storage.owner_name,
                "detached_at": storage.detached_at.isoformat() if storage.detached_at else None,
                "records_purged": deleted,
                "confirmed_via": confirmed_via,
            },
        )
    return StoragePurgeResult(
        storage_id=storage.id,
        app_uuid=storage.app_uuid,
        app_name=storage.app_name,
        owner=storage.owner_name,
        records_purged=deleted,
    )


def _lock_still_detached(storage: Storage, deleted: int) -> Storage:
    locked = Storage.objects.select_for_update().filter(pk=storage.pk).first()
    if locked is None:
        raise NotFound(
            f"Storage {storage.id} no longer exists: another purge finished it, or a restore merged its records "
            f"into an app, in the meantime ({deleted} record(s) deleted by this run)."
        )
    if locked.detached_at is None:
        raise OperationFailed(
            f"Storage {storage.id} was restored to app '{locked.app_name}' while it was being purged; "
            f"{deleted} record(s) had already been deleted. The storage and its remaining records were kept."
        )
    return locked


def staff_permission_require(actor: Any, codename: str, doing: str) -> None:
    """Forbidden unless `actor` is active staff holding `apps_registry.<codename>` (None: the system itself)."""
    if actor is None:
        return
    if not (actor.is_active and actor.is_staff and actor.has_perm(f"apps_registry.{codename}")):
        raise Forbidden(f"You need the permission apps_registry.{codename} to {doing}; ask a superuser to grant it.")


def _check_batch_size(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInput(f"Batch size must be a positive whole number of records, got {batch_size!r}.")


def _uuid(value: uuid.UUID | str, what: str) -> str:
    parsed = parse_uuid(value)
    if parsed is None:
        raise NotFound(f"No {what} with id {clip(value)} exists: {clip_repr(value)} is not a UUID.")
    return str(parsed)
