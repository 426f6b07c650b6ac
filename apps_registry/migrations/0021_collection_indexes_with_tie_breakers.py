"""Declared collection indexes gain find's tie-breakers (their fields, then created_at, record_id) and with them a
new name (services/collection_indexes.py, FORM 2). Queue a sync of every storage whose app declares indexes or
that holds one: the task worker builds each new index, then drops the old one. Nothing is built here: on
PostgreSQL the sync builds concurrently, which cannot run inside this migration's transaction, and a large
deployment's indexes take a while; until a storage's sync has run, its old indexes keep serving its filters."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import migrations

PREFIX = "rix_"


def _storages_holding_indexes(schema_editor: Any) -> set[uuid.UUID]:
    with schema_editor.connection.cursor() as cursor:
        if schema_editor.connection.vendor == "postgresql":
            cursor.execute(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE i.indrelid = 'apps_registry_record'::regclass AND starts_with(c.relname, %s)",
                [PREFIX],
            )
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'apps_registry_record' "
                "AND substr(name, 1, 4) = %s",
                [PREFIX],
            )
        names = [name for (name,) in cursor.fetchall()]
    found = set()
    for name in names:  # rix_<storage hex>_<hash>
        try:
            found.add(uuid.UUID(name[len(PREFIX) :].split("_", 1)[0]))
        except ValueError:
            continue
    return found


def queue_syncs(apps: Any, schema_editor: Any) -> None:
    # The task itself, not a copy of its row: the backend writes its row in this migration's transaction.
    from apps_registry.tasks import collection_indexes_task

    Storage = apps.get_model("apps_registry", "Storage")
    storages = _storages_holding_indexes(schema_editor)
    for storage_id, collections in Storage.objects.filter(app__isnull=False).values_list("id", "app__collections"):
        declared = collections.values() if isinstance(collections, dict) else []
        if any(isinstance(spec, dict) and spec.get("indexes") for spec in declared):
            storages.add(storage_id)
    for storage_id in sorted(storages):
        collection_indexes_task.enqueue(storage_id=str(storage_id))


class Migration(migrations.Migration):
    dependencies = [
        ("apps_registry", "0020_record_migrations"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
    ]
    operations = [migrations.RunPython(queue_syncs, migrations.RunPython.noop)]
