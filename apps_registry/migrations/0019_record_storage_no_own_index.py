"""Record.storage loses its own index: the unique (storage, collection, record_id) and the (storage, collection,
created_at) indexes both start with storage. The lone index cost every insert, and PostgreSQL's generic plans for
prepared statements, made while the table was small, chose it over the unique index (docs/performance.md)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("apps_registry", "0018_record_data_gin_no_pending_list"),
    ]

    operations = [
        migrations.AlterField(
            model_name="record",
            name="storage",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="records",
                to="apps_registry.storage",
            ),
        ),
    ]
