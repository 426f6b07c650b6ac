"""A per-storage record counter, kept by the writes (the records-per-app limit no longer counts the app's
records); filled from the records already stored."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


def count_records(apps: Any, schema_editor: Any) -> None:
    schema_editor.execute(
        "UPDATE apps_registry_storage SET records_held = "
        "(SELECT count(*) FROM apps_registry_record WHERE apps_registry_record.storage_id = apps_registry_storage.id)"
    )


class Migration(migrations.Migration):
    dependencies = [("apps_registry", "0016_rate_budgets")]
    operations = [
        migrations.AddField(
            model_name="storage", name="records_held", field=models.PositiveBigIntegerField(default=0)
        ),
        migrations.RunPython(count_records, migrations.RunPython.noop),
    ]
