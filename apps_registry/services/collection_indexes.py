"""The indexes an app's author declares per collection (`"collections": {"checkins": {"indexes": [["habit_id",
"date"]]}}`), kept in the database as expression indexes on the records table, one per declared index,
partial to the app's storage and the collection.

Saving a definition, deleting, purging or restoring an app queues `collection_indexes_sync` for the storage
(a task run by `db_worker`): it reads what the storage's app declares *now*, creates the indexes missing
(`CREATE INDEX CONCURRENTLY` on PostgreSQL, which cannot run inside a transaction, hence the task) and drops
those no longer declared. A re-run, or a stale task, converges on the current definition.

An index's expressions are `routes.storage.field_sql`, the form the engine's filters and ordering use, so the
planner matches them, followed by the keyset tie-breakers `created_at, record_id` (routes.storage._page_columns):
a find filtering on the leading fields and ordering by the next one is served whole, filter, order and limit,
with no sort, scanned forward or backward. Its name carries the storage id and a hash of the collection, the
fields and the index's form (`rix_<storage hex>_<hash>`): an index of an earlier form has another name, so a sync
builds the current one and then drops the old.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, connection, transaction
from django_tasks_db.compat import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from apps_registry.models import App, Record
from apps_registry.routes.steps import NAME
from apps_registry.routes.storage import field_sql

logger = logging.getLogger(__name__)

PREFIX = "rix_"
# The index's form, part of its name: 2 = the fields, then created_at, record_id (1: the fields alone). Changing
# the form renames every index; migration 0021 queued a sync of every storage when it became 2.
FORM = 2
# What follows the declared fields in every index: find's tie-breakers, in the order it sorts by them.
TIE_BREAKERS = ("created_at", "record_id")


@dataclass(frozen=True)
class DeclaredIndex:
    name: str
    collection: str
    fields: tuple[str, ...]


@dataclass(frozen=True)
class IndexSync:
    created: list[str]
    dropped: list[str]
    failed: list[str] = field(default_factory=list)


def index_name(storage_id: uuid.UUID, collection: str, fields: tuple[str, ...], *, form: int = FORM) -> str:
    declared = f"{collection}:{','.join(fields)}"
    digest = hashlib.sha256((declared if form == 1 else f"{declared}:v{form}").encode()).hexdigest()[:16]
    return f"{PREFIX}{storage_id.hex}_{digest}"


def declared_index_keys(collections: Any) -> set[tuple[str, tuple[str, ...]]]:
    """(collection, fields) of each index a `collections` declares."""
    if not isinstance(collections, dict):
        return set()
    return {
        (name, tuple(fields))
        for name, spec in collections.items()
        if isinstance(spec, dict) and isinstance(spec.get("indexes"), list)
        for fields in spec["indexes"]
        if isinstance(fields, list)
    }


def declared_indexes(storage_id: uuid.UUID, collections: Any) -> dict[str, DeclaredIndex]:
    """The indexes a (checked) `collections` declares for a storage, by name."""
    found: dict[str, DeclaredIndex] = {}
    for collection, fields in declared_index_keys(collections):
        name = index_name(storage_id, collection, fields)
        found[name] = DeclaredIndex(name=name, collection=collection, fields=fields)
    return found


def collection_indexes_enqueue(*, storage_id: uuid.UUID) -> None:
    """Queue a sync of the storage's indexes, with the caller's transaction (the task row commits with it), unless
    one is already waiting for the storage: that one reads the definition when it runs, so it serves this change
    too, and however many saves an author makes, a storage has at most one sync waiting (and one running) in the
    task worker's queue. The waiting one's row is locked until the caller commits (the worker skips locked rows),
    so it cannot start before this change is there to read."""
    from apps_registry.tasks import collection_indexes_task

    with transaction.atomic():
        waiting = (
            DBTaskResult.objects.select_for_update(skip_locked=True)
            .filter(
                status=TaskResultStatus.READY,
                task_path=collection_indexes_task.module_path,
                args_kwargs__kwargs__storage_id=str(storage_id),
            )
            .values_list("id", flat=True)
            .first()
        )
        if waiting is None:
            collection_indexes_task.enqueue(storage_id=str(storage_id))


def collection_indexes_sync(*, storage_id: uuid.UUID | str) -> IndexSync:
    """Make the storage's indexes those its app declares now (none once the app is gone): create the
    missing, drop the rest. Runs outside any transaction on PostgreSQL (CREATE INDEX CONCURRENTLY)."""
    storage_uuid = storage_id if isinstance(storage_id, uuid.UUID) else uuid.UUID(str(storage_id))
    postgres = connection.vendor == "postgresql"
    if postgres and connection.in_atomic_block:
        raise RuntimeError("collection_indexes_sync builds indexes concurrently: call it outside a transaction")
    app = App.objects.filter(storage__id=storage_uuid).only("collections").first()
    wanted = declared_indexes(storage_uuid, app.collections if app is not None else {})
    existing = _existing(storage_uuid)
    concurrently = "CONCURRENTLY " if postgres else ""
    for name, valid in existing.items():
        if name in wanted and not valid:  # an interrupted concurrent build leaves an invalid index
            _execute(f"DROP INDEX {concurrently}IF EXISTS {connection.ops.quote_name(name)}")
    created: list[str] = []
    failed: list[str] = []
    # Built before the others are dropped: an index renamed by a new form keeps serving until its successor is.
    for name, index in wanted.items():
        if existing.get(name):
            continue
        try:
            _execute(_create_sql(storage_uuid, index))
        except DatabaseError:
            # Records already there that the index cannot hold (PostgreSQL: an entry over its B-tree limit):
            # leave no invalid index behind and build the others. The engine's queries stay correct without it.
            logger.warning("Index %s for storage %s could not be built", name, storage_uuid, exc_info=True)
            _execute(f"DROP INDEX {concurrently}IF EXISTS {connection.ops.quote_name(name)}")
            failed.append(name)
            continue
        created.append(name)
    dropped = sorted(name for name in existing if name not in wanted)
    for name in dropped:
        _execute(f"DROP INDEX {concurrently}IF EXISTS {connection.ops.quote_name(name)}")
    return IndexSync(created=sorted(created), dropped=dropped, failed=sorted(failed))


def _create_sql(storage_id: uuid.UUID, index: DeclaredIndex) -> str:
    vendor = connection.vendor
    quote = connection.ops.quote_name
    fields = [field_sql(tuple(f.split(".")), vendor, column=quote("data")) for f in index.fields]
    expressions = ", ".join([*fields, *map(quote, TIE_BREAKERS)])
    table = quote(Record._meta.db_table)
    # Both are literals the compiler checked (a UUID; a collection name of letters, digits and underscores),
    # checked again here since they are written into the statement.
    if not NAME.match(index.collection):
        raise ValueError(f"not a collection name: {index.collection!r}")
    storage = f"'{storage_id}'::uuid" if vendor == "postgresql" else f"'{storage_id.hex}'"
    concurrently = "CONCURRENTLY " if vendor == "postgresql" else ""
    return (
        f"CREATE INDEX {concurrently}IF NOT EXISTS {quote(index.name)} ON {table} ({expressions}) "
        f"WHERE storage_id = {storage} AND collection = '{index.collection}'"
    )


def _existing(storage_id: uuid.UUID) -> dict[str, bool]:
    """The storage's indexes in the database, by name: whether each is valid (usable)."""
    prefix = f"{PREFIX}{storage_id.hex}_"
    table = Record._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE i.indrelid = %s::regclass AND starts_with(c.relname, %s)",
                [table, prefix],
            )
            return {name: bool(valid) for name, valid in cursor.fetchall()}
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = %s AND substr(name, 1, %s) = %s",
            [table, len(prefix), prefix],
        )
        return {name: True for (name,) in cursor.fetchall()}


def _execute(sql: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql)
