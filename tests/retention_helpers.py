"""Builders for retention tests: apps with records, and storage retained by delete_app N days ago."""

from __future__ import annotations

from datetime import timedelta

from django.core.management import call_command
from django.utils import timezone

from apps_registry.models import Record, Storage
from apps_registry.services.apps import app_delete
from tests.factories import make_app


def app_with_records(owner, name: str, count: int, collection: str = "expenses", prefix: str = "r"):
    app = make_app(owner=owner, name=name)
    Record.objects.bulk_create(
        Record(storage=app.storage, collection=collection, record_id=f"{prefix}{i}", data={"n": i})
        for i in range(count)
    )
    return app


def retained(owner, name: str = "Old budget", count: int = 5, days_ago: float = 0, **kwargs) -> Storage:
    """Storage of an app deleted (without purge) `days_ago` days ago."""
    app = app_with_records(owner, name, count, **kwargs)
    result = app_delete(actor=owner, app_id=app.id, purge_storage=False, confirmed_via="confirm_parameter")
    Storage.objects.filter(pk=result.storage_id).update(detached_at=timezone.now() - timedelta(days=days_ago))
    return Storage.objects.get(pk=result.storage_id)


def records_by_app(exclude_storage: Storage | None = None) -> dict[str, int]:
    """Record counts per app name: compared before and after a purge to prove nothing else was touched."""
    rows = Record.objects.all()
    if exclude_storage is not None:
        rows = rows.exclude(storage=exclude_storage)
    names = set(rows.values_list("storage__app_name", flat=True))
    return {name: rows.filter(storage__app_name=name).count() for name in names}


def run_purge_worker() -> None:
    """Run the task worker (`manage.py db_worker`) until the queue is empty, as the deployment's worker would.

    Needs a transactional test (`django_db(transaction=True)`): the worker resets connections between tasks.
    """
    call_command("db_worker", "--batch", "--no-startup-delay", "--interval", "0", verbosity=0)
