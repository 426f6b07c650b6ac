"""The change log: every mutation's change set (each record's data before and after), written in the mutation's
own transaction, and undo: reverting a change is a new change that puts its records back as they were before it.

A change is one `Change` row and one `ChangeEntry` per record, inserted together (two statements per mutation
whatever its size). Reads: selectors.changes_page_for (an app's timeline, a record's history).
"""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps_registry.access import app_for, role_check
from apps_registry.exceptions import AppNotFound, ChangeConflict, InvalidInput, NotFound, OperationFailed
from apps_registry.models import App, Change, ChangeEntry, ChangeVia, Record, Storage
from apps_registry.plans import plan_stable
from apps_registry.routes.limits import current_limits, limit_details
from apps_registry.routes.storage import SqlStore, index_entry_refusal, index_entry_too_large
from apps_registry.routes.store import ChangeSet

# Old changes go in batches, each its own statement, so a purge never holds a long lock.
PURGE_BATCH = 1000


def change_log_on() -> bool:
    """Whether mutations record their change sets (CHARMING_CHANGE_LOG; off only to measure its cost)."""
    return bool(getattr(settings, "CHARMING_CHANGE_LOG", True))


def change_retention_days() -> int:
    """How many days a change is kept for history and undo (CHARMING_CHANGE_RETENTION_DAYS)."""
    return int(settings.CHARMING_CHANGE_RETENTION_DAYS)


def change_record(
    *, app_id: uuid.UUID, actor: Any, via: str, route: str, changes: ChangeSet, reverts_id: int | None = None
) -> int | None:
    """Write one change set in the caller's transaction: its id, or None when no record changed.

    Two statements whatever the number of records (INSERT ... RETURNING the change's id, then one multi-row INSERT
    of its entries), hand-written: the ORM's create and bulk_create cost more than the rest of a small mutation."""
    entries = changes.entries()
    if not entries:
        return None
    app = App._meta.pk.get_db_prep_value(app_id, connection)  # type: ignore[union-attr]
    now = Change._meta.get_field("created_at").get_db_prep_value(timezone.now(), connection)
    actor_repr = actor.get_username() if actor is not None else "system"
    actor_id = actor.pk if actor is not None else None
    head = [app, actor_id, actor_repr, via, route[:100], reverts_id, len(entries), now]
    numbered = [(n, *entry) for n, entry in enumerate(entries)]
    batches = _batches(numbered)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # One round trip: the change and its first entries in one statement (a data-modifying CTE).
            first = batches.pop(0)
            params = list(head)
            for position, collection, record_id, before, after in first:
                params += [position, app, collection, record_id, _encoded(before), _encoded(after)]
            cursor.execute(_change_with_entries_sql(len(first)), params)
        else:
            cursor.execute(_change_insert_sql(), head)
        change_id = cursor.fetchone()[0]
        _entries_insert(cursor, change_id, app, batches)
    return int(change_id)


def change_extend(*, change_id: int, app_id: uuid.UUID, changes: ChangeSet) -> bool:
    """Add `changes`' entries to change `change_id`, after its own, in the caller's transaction: a record
    migration's one change grows batch by batch. False when that change is gone (the history's purge) and nothing
    was written. The caller holds what keeps two extensions of one change apart (the migration's row lock)."""
    entries = changes.entries()
    if not entries:
        return True
    with connection.cursor() as cursor:
        cursor.execute(_records_add_sql(), [len(entries), change_id])
        row = cursor.fetchone()
        if row is None:
            return False
        first = int(row[0]) - len(entries)
        app = App._meta.pk.get_db_prep_value(app_id, connection)  # type: ignore[union-attr]
        numbered = [(first + n, *entry) for n, entry in enumerate(entries)]
        _entries_insert(cursor, change_id, app, _batches(numbered))
    return True


def _batches(numbered: list[tuple[Any, ...]]) -> list[list[tuple[Any, ...]]]:
    return [numbered[start : start + ENTRIES_PER_INSERT] for start in range(0, len(numbered), ENTRIES_PER_INSERT)]


def _entries_insert(cursor: Any, change_id: int, app: Any, batches: list[list[tuple[Any, ...]]]) -> None:
    """The entries of change `change_id`, numbered (position, collection, record_id, before, after), one
    multi-row INSERT per batch."""
    for batch in batches:
        params = []
        for position, collection, record_id, before, after in batch:
            params += [change_id, position, app, collection, record_id, _encoded(before), _encoded(after)]
        cursor.execute(_entries_insert_sql(len(batch)), params)


# Rows per INSERT of a change's entries (one statement for any mutation of up to this many records).
ENTRIES_PER_INSERT = 100


def _encoded(data: dict[str, Any] | None) -> str | None:
    return None if data is None else json.dumps(data, separators=(",", ":"))


@functools.cache
def _change_insert_sql() -> str:
    quote = connection.ops.quote_name
    return plan_stable(
        f"INSERT INTO {quote(Change._meta.db_table)} "
        "(app_id, actor_id, actor_repr, via, route, reverts_id, records, created_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id"
    )


@functools.cache
def _change_with_entries_sql(rows: int) -> str:
    quote = connection.ops.quote_name
    values = ", ".join(["(%s::integer, %s::uuid, %s, %s, %s::jsonb, %s::jsonb)"] * rows)
    return plan_stable(
        f"WITH c AS ({_change_insert_sql()}) "
        f"INSERT INTO {quote(ChangeEntry._meta.db_table)} "
        "(change_id, position, app_id, collection, record_id, before, after) "
        f"SELECT c.id, v.position, v.app_id, v.collection, v.record_id, v.before, v.after FROM c, (VALUES {values}) "
        "AS v(position, app_id, collection, record_id, before, after) RETURNING change_id"
    )


@functools.cache
def _records_add_sql() -> str:
    return plan_stable(
        f"UPDATE {connection.ops.quote_name(Change._meta.db_table)} SET records = records + %s WHERE id = %s "
        "RETURNING records"
    )


@functools.cache
def _entries_insert_sql(rows: int) -> str:
    quote = connection.ops.quote_name
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    values = ", ".join([f"(%s, %s, %s, %s, %s, %s{cast}, %s{cast})"] * rows)
    return plan_stable(
        f"INSERT INTO {quote(ChangeEntry._meta.db_table)} "
        f"(change_id, position, app_id, collection, record_id, before, after) VALUES {values}"
    )


def change_id_read(value: object, *, path: str = "$.change_id") -> int:
    """A change id as callers send it (digits, as a string or an integer); invalid_input otherwise."""
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    if not text.isascii() or not text.isdigit() or len(text) > 18 or int(text) < 1:
        raise InvalidInput(
            f"{str(value)[:40]!r} is not a change id: a change id is a positive whole number, as list_changes and a "
            "mutation's result give it.",
            errors=[{"path": path, "message": "must be a change id (digits)"}],
        )
    return int(text)


def change_not_found(change_id: object) -> NotFound:
    return NotFound(
        f"No change {change_id} in any app you can see: it may be older than the history's "
        f"{change_retention_days()} days, or belong to an app that was deleted or is not shared with you."
    )


def change_for(*, actor: Any, change_id: int) -> tuple[Change, App, str]:
    """The change, its app and the actor's role there; a change of an app the actor cannot see is not found."""
    change = Change.objects.filter(pk=change_id).first()
    if change is None:
        raise change_not_found(change_id)
    try:
        app, role = app_for(actor=actor, app_id=change.app_id, need="read")
    except AppNotFound:
        raise change_not_found(change_id) from None
    return change, app, role


@dataclass(frozen=True)
class RevertResult:
    reverted_id: int  # the change reverted
    change_id: int | None  # the new change that restored its records; None when they already were as before
    app: App
    restored: list[dict[str, Any]]  # {collection, id, action: restored | deleted | recreated}
    forced_over: list[dict[str, Any]]  # later changes' records a forced revert overwrote


def change_revert(
    *, actor: Any, change_id: int | str, force: bool = False, via: str, app_id: uuid.UUID | None = None
) -> RevertResult:
    """Put the records of change `change_id` back as they were before it, as a new change (owner or editor).

    Refused (ChangeConflict, naming each record) when a later change touched one of them, unless `force`.
    A record the change created is deleted; one it deleted comes back with its id. All or nothing. With `app_id`
    (a page of that app), a change of another app is not found."""
    number = change_id_read(change_id)
    try:
        return _change_revert(actor=actor, number=number, force=force, via=via, app_id=app_id)
    except IntegrityError:  # a record of the change created again by a mutation that committed in between
        raise OperationFailed(
            f"Change {number} was not reverted: one of its records was written by another call at the same moment. "
            "Nothing was changed; look at its history again and retry."
        ) from None
    except DatabaseError as error:
        if index_entry_too_large(error):  # an index declared since the change, that its earlier data no longer fits
            raise index_entry_refusal() from None
        raise


def _change_revert(*, actor: Any, number: int, force: bool, via: str, app_id: uuid.UUID | None) -> RevertResult:
    with transaction.atomic():
        change, app, role = change_for(actor=actor, change_id=number)
        if app_id is not None and app.id != app_id:
            raise change_not_found(number)
        role_check(app=app, role=role, need="mutate")
        if change.via == ChangeVia.MIGRATION:
            raise migration_revert_refusal(change.pk)
        storage_id = _storage_held(app)
        if app.migrating:
            # Imported here: record migrations write to the change log, so that module imports this one.
            from apps_registry.services.record_migrations import migration_refusal  # noqa: PLC0415

            raise migration_refusal(app)
        entries = list(ChangeEntry.objects.filter(change_id=change.pk).order_by("position"))
        current = _records_locked(storage_id, entries)
        migrated = _migrations_since(app, change, entries)
        if migrated:
            raise migrated_since_refusal(change.pk, migrated)
        conflicts = _later_changes(app, change, entries)
        if conflicts and not force:
            raise ChangeConflict(
                change_id=change.pk, conflicts=conflicts, reverted_by=_reverted_only_by(change, conflicts)
            )
        changes = ChangeSet()
        restored: list[dict[str, Any]] = []
        delta = 0
        now = timezone.now()
        for entry in entries:
            key = (entry.collection, entry.record_id)
            now_data = current.get(key)
            if now_data == entry.before:
                continue
            records = Record.objects.filter(
                storage_id=storage_id, collection=entry.collection, record_id=entry.record_id
            )
            if entry.before is None:
                records.delete()
                delta -= 1
                action = "deleted"
            elif now_data is None:
                Record.objects.create(
                    storage_id=storage_id, collection=entry.collection, record_id=entry.record_id, data=entry.before
                )
                delta += 1
                action = "recreated"
            else:
                records.update(data=entry.before, version=F("version") + 1, updated_at=now)
                action = "restored"
            changes.note(entry.collection, entry.record_id, now_data, entry.before)
            restored.append({"collection": entry.collection, "id": entry.record_id, "action": action})
        _records_changed(storage_id, delta)  # every revert moves the changes counter: open pages show it
        new_id = change_record(app_id=app.id, actor=actor, via=via, route="", changes=changes, reverts_id=change.pk)
    return RevertResult(
        reverted_id=change.pk,
        change_id=new_id,
        app=app,
        restored=restored,
        forced_over=conflicts if force else [],
    )


def migration_revert_refusal(change_id: int) -> OperationFailed:
    """A record migration's change is history only: the app's routes expect its records as the migration left them."""
    return OperationFailed(
        f"Change {change_id} is a record migration (a definition save's migrate), which revert_change does not undo: "
        "the app's routes expect the records as it left them. Nothing was changed. To undo it, save the definition "
        "again with a migrate that reverses it (update_app; each record's data before it is in list_changes); to "
        "change one record, run a route that writes it (add one with update_app if the app has none).",
        details={"change_id": str(change_id), "migration": True},
    )


def migrated_since_refusal(change_id: int, migrations: list[int]) -> OperationFailed:
    """Not even forced: a record migration since the change reshaped its collections' records, and the routes
    expect that shape (a record the change deleted would come back in the shape from before it, too)."""
    named = ", ".join(str(n) for n in migrations)
    return OperationFailed(
        f"Change {change_id} was not reverted: a record migration since (change {named}) reshaped the records of "
        "its collections, and reverting would put back data from before it, which the app's routes no longer "
        "expect. Nothing was changed. To change those records, run a route that writes them (add one with "
        "update_app if the app has none).",
        details={"change_id": str(change_id), "migrations": [str(n) for n in migrations]},
    )


def _migrations_since(app: App, change: Change, entries: list[ChangeEntry]) -> list[int]:
    """The record migrations after `change` that rewrote records of a collection it wrote (the migrations' few
    changes by a partial index, then each one's entries until one of those collections)."""
    later = Change.objects.filter(app=app, via=ChangeVia.MIGRATION, pk__gt=change.pk).values_list("pk", flat=True)
    collections = {entry.collection for entry in entries}
    return [
        number
        for number in sorted(later)
        if ChangeEntry.objects.filter(change_id=number, collection__in=collections).exists()
    ]


def _storage_held(app: App) -> uuid.UUID:
    """The app's storage id, its row held as a mutation holds it (FOR KEY SHARE: storage, then records, in the one
    order app_delete and the purges take too; see services/routes.py)."""
    storage = Storage.objects.filter(app=app).values_list("id", flat=True)
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(Storage._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id FROM {table} WHERE app_id = %s FOR KEY SHARE", [app.pk])
            row = cursor.fetchone()
        found = row[0] if row else None
    else:
        found = storage.first()
    if found is None:
        raise OperationFailed(f"App '{app.name}' has no storage for its records; ask staff to look at it.")
    return found if isinstance(found, uuid.UUID) else uuid.UUID(str(found))


def _records_locked(storage_id: uuid.UUID, entries: list[ChangeEntry]) -> dict[tuple[str, str], Any]:
    """The data of the change's records as they are now (locked until the revert commits), by (collection, id)."""
    by_collection: dict[str, list[str]] = {}
    for entry in entries:
        by_collection.setdefault(entry.collection, []).append(entry.record_id)
    found: dict[tuple[str, str], Any] = {}
    for collection, ids in by_collection.items():
        rows = (
            Record.objects.select_for_update()
            .filter(storage_id=storage_id, collection=collection, record_id__in=ids)
            .values_list("record_id", "data")
        )
        found.update({(collection, record_id): data for record_id, data in rows})
    return found


def _later_changes(app: App, change: Change, entries: list[ChangeEntry]) -> list[dict[str, Any]]:
    """Each of the change's records a later change touched: the record and the latest such change."""
    by_collection: dict[str, list[str]] = {}
    for entry in entries:
        by_collection.setdefault(entry.collection, []).append(entry.record_id)
    touched = Q()
    for collection, ids in by_collection.items():
        touched |= Q(collection=collection, record_id__in=ids)
    later = (
        ChangeEntry.objects.filter(touched, app=app, change_id__gt=change.pk)
        .order_by("collection", "record_id", "-change_id")
        .values_list("collection", "record_id", "change_id")
    )
    latest: dict[tuple[str, str], int] = {}
    for collection, record_id, later_id in later:
        latest.setdefault((collection, record_id), later_id)
    return [
        {"collection": collection, "id": record_id, "change_id": str(later_id)}
        for (collection, record_id), later_id in latest.items()
    ]


def _reverted_only_by(change: Change, conflicts: list[dict[str, Any]]) -> int | None:
    """The change that reverted `change`, when it is the only later change to its records (a second revert of an
    already reverted change); else None."""
    later = {int(c["change_id"]) for c in conflicts}
    if len(later) != 1:
        return None
    (only,) = later
    return only if Change.objects.filter(pk=only, reverts_id=change.pk).exists() else None


def _records_changed(storage_id: uuid.UUID, delta: int) -> None:
    limits = current_limits()
    total = SqlStore(storage_id=storage_id, max_bytes=limits.record_bytes, savepoint=False).records_changed(delta)
    if delta > 0 and total > limits.records_per_app:
        raise OperationFailed(
            f"Reverting would make this app hold more than {limits.records_per_app} records; delete some first. "
            "Nothing was changed.",
            details=limit_details("records_per_app", limits.records_per_app),
        )


def change_cutoff(*, days: int | None = None, now: datetime | None = None) -> datetime:
    """Changes made before this moment are older than the history's window."""
    return (now or timezone.now()) - timedelta(days=change_retention_days() if days is None else days)


def changes_purge(*, older_than: datetime, batch: int = PURGE_BATCH) -> int:
    """Delete the changes made before `older_than` (and their entries), a batch per transaction; how many.

    Changes are read oldest first by id (the primary key: created_at has no index, ids grow with time), and the
    purge stops at the first change inside the window."""
    purged = 0
    while True:
        with transaction.atomic():
            oldest = list(Change.objects.order_by("id").values_list("id", "created_at")[:batch])
            ids = [change_id for change_id, created_at in oldest if created_at < older_than]
            if ids:
                # A later revert of a purged change keeps its own entries; only its link goes.
                Change.objects.filter(reverts_id__in=ids).update(reverts=None)
                ChangeEntry.objects.filter(change_id__in=ids).delete()
                Change.objects.filter(pk__in=ids).delete()
        purged += len(ids)
        if len(ids) < len(oldest) or len(oldest) < batch:
            return purged
