"""A GIN index on record data for filtering on JSON (PostgreSQL only; SQLite has no GIN)."""

from __future__ import annotations

from typing import Any

from django.db import migrations

INDEX = "apps_registry_record_data_gin"


def create_gin(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON apps_registry_record USING gin (data jsonb_path_ops)"
        )


def drop_gin(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("apps_registry", "0001_initial")]
    operations = [migrations.RunPython(create_gin, drop_gin)]
