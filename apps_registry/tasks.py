"""Background tasks (django-tasks, database backend; run by `manage.py db_worker`). Thin: call one service."""

from __future__ import annotations

from django_tasks import task

from apps_registry.services.collection_indexes import collection_indexes_sync
from apps_registry.services.purge_jobs import purge_job_run
from apps_registry.services.record_migrations import record_migration_slice
from apps_registry.services.schedules import schedule_run_due


@task()
def purge_job_task(*, job_id: str, target_id: str, actor_id: int | None) -> str:
    """Run one queued staff purge; returns the job's final status."""
    return purge_job_run(job_id=job_id, target_id=target_id, actor_id=actor_id).status


@task()
def collection_indexes_task(*, storage_id: str) -> str:
    """Create and drop a storage's declared collection indexes to match its app's definition now."""
    result = collection_indexes_sync(storage_id=storage_id)
    return f"created {len(result.created)}, dropped {len(result.dropped)}"


@task()
def record_migration_task(*, migration_id: str) -> str:
    """Run a queued migration of an app's records for a slice of time, queued again until it ends (resumable: see
    services/record_migrations.py)."""
    row = record_migration_slice(migration_id=migration_id)
    return "gone" if row is None else f"{row.status}: {row.done} of {row.total}"


@task()
def schedule_run_task(*, schedule_id: str, due_at: str) -> str:
    """Run one due time of a schedule, and queue the next (services/schedules.py: exactly once per due time)."""
    return schedule_run_due(schedule_id=schedule_id, due_at=due_at)
