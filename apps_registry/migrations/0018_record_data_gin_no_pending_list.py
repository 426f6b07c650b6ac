"""The GIN index on record data writes each insert's entries into the index itself (`fastupdate = off`)
instead of a pending list: with the list, every containment query also reads the whole list (up to
`gin_pending_list_limit`, 4 MB: ~320 buffers and 2-7 ms per query measured at 1M records, whatever the
app's size) until a vacuum or the list's own flush merges it (PostgreSQL only; benchmarks/scaling.py)."""

from __future__ import annotations

from typing import Any

from django.db import migrations

INDEX = "apps_registry_record_data_gin"


def no_pending_list(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER INDEX IF EXISTS {INDEX} SET (fastupdate = off)")


def pending_list(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER INDEX IF EXISTS {INDEX} RESET (fastupdate)")


class Migration(migrations.Migration):
    dependencies = [("apps_registry", "0017_storage_records_held")]
    operations = [migrations.RunPython(no_pending_list, pending_list)]
