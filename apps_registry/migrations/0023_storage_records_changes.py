"""A per-storage changes counter, +1 in every transaction that writes the storage's records: what an open app
page polls (one read by the storage's key) to refresh its views when anyone changes the app's records."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("apps_registry", "0022_confirmed_email")]
    operations = [
        migrations.AddField(
            model_name="storage", name="records_changes", field=models.PositiveBigIntegerField(default=0)
        ),
    ]
