"""Migrating an app's stored records with a definition save (`migrate`: {"<collection>": "<CEL over record>"}).

A migration of at most `migrate_inline_records` records runs inside the save's transaction: the new definition
and the migrated records commit together, or (any record failing) nothing does. A larger one is queued as a
task (`RecordMigration`, run by `manage.py db_worker`) that works in batches in record order, each batch and
the position after it committed together: a worker killed mid-way resumes after the last committed batch, so
no record is lost or migrated twice. Until it ends, the app's mutations are refused ("migrating: N of M").

Either way the migration is one change in the change log (via `migration`, by who saved it): each record's data
before and after, written with the records it describes (a queued migration adds each batch's entries to its
change in that batch's transaction). So a record's history shows it, and reverting an earlier change to a migrated
record meets it as a later change; the migration's own change is not reverted (services/changes.py).

Fair shares: the apps of one owner have at most CHARMING_MIGRATIONS_PER_USER migrations queued or running at once
(the task worker runs tasks in the order they were queued, so more would wait before everyone else's); a save whose
migration would queue one more is refused at once with rate_limited, before its tests run. And a queued migration's
task runs SLICE_SECONDS at a time, then queues itself again behind the tasks queued meanwhile."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django_tasks_db.compat import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from apps_registry.exceptions import AppMigrating, CharmingError, InvalidDefinition, OperationFailed, RateLimited
from apps_registry.models import App, ChangeVia, Record, RecordMigration
from apps_registry.routes.limits import Limits, current_limits
from apps_registry.routes.migrate import Migration, check_migration, migrated_data
from apps_registry.routes.storage import SqlStore
from apps_registry.routes.store import ChangeSet
from apps_registry.services.changes import change_extend, change_log_on, change_record
from apps_registry.values import first_problems

logger = logging.getLogger(__name__)

BATCH = 500  # records per committed batch of a queued migration
# A queued migration with no progress for this long has lost its worker (killed, or the task was lost): the next
# refused mutation queues its task again (batches take the migration's row lock, so two runs never overlap).
STALE_AFTER = timedelta(minutes=2)
# Seconds a save refused for the owner's share of migrations is told to wait (a queued migration works through
# BATCH records a batch, usually within a minute).
SHARE_RETRY_SECONDS = 30
# Seconds a queued migration's task runs before it queues itself again behind the tasks queued meanwhile.
SLICE_SECONDS = 10


@dataclass(frozen=True)
class MigrationOutcome:
    """What a save's migration did: ran inline (every record migrated or deleted), or was queued."""

    collections: list[str]
    total: int
    migrated: int = 0
    deleted: int = 0
    queued_id: uuid.UUID | None = None
    change_id: int | None = None  # the change log's change of an inline migration that changed a record

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"collections": self.collections, "records": self.total}
        if self.queued_id is not None:
            found.update(status="queued", id=str(self.queued_id))
        else:
            found.update(status="done", migrated=self.migrated, deleted=self.deleted)
            if self.change_id is not None:
                found["change_id"] = str(self.change_id)
        return found

    @property
    def text(self) -> str:
        names = ", ".join(self.collections)
        if self.queued_id is not None:
            return (
                f"Migrating {self.total} records of {names} in the background; mutations of the app are refused "
                "until it ends (get_app shows its progress)."
            )
        logged = f" (change {self.change_id} in list_changes)" if self.change_id is not None else ""
        return f"Migrated {self.migrated} and deleted {self.deleted} records of {names} with the save{logged}."


def migration_check(*, migrate: Any) -> Migration:
    """The checked migration, or InvalidDefinition listing every problem (paths `migrate.<collection>`)."""
    migration, problems = check_migration(migrate, current_limits())
    if migration is None:
        raise InvalidDefinition(
            f"The migration has {len(problems)} problem(s); nothing was saved. {first_problems(problems)}",
            errors=[p.as_dict() for p in problems],
        )
    return migration


def record_migration_start(
    *, app: App, actor: Any, storage_id: uuid.UUID, version: int, migration: Migration, spec: dict[str, Any]
) -> MigrationOutcome:
    """Run or queue `migration` over the app's records, inside the save's transaction (the caller's); RateLimited
    when it would be queued beyond the owner's share."""
    limits = current_limits()
    if App.objects.filter(pk=app.pk, migrating=True).exists():
        raise migration_refusal(app, what="save a new migration")
    records = Record.objects.filter(storage_id=storage_id, collection__in=migration.collections)
    total = records.count()
    if total > limits.migrate_inline_records:
        # The owner's row locked, so two saves of the owner's apps count one after the other.
        get_user_model().objects.select_for_update().filter(pk=app.owner_id).first()
        _share_check(app=app, actor=actor)
    if total <= limits.migrate_inline_records:
        batch = list(records.select_for_update().order_by("pk"))
        changes = ChangeSet() if change_log_on() else None
        try:
            migrated, deleted = _migrate(
                batch,
                migration,
                storage_id=storage_id,
                app_id=str(app.id),
                now=timezone.now(),
                limits=limits,
                changes=changes,
            )
        except CharmingError as exc:
            raise OperationFailed(
                f"The migration failed, so nothing was saved: {exc.message}", details=exc.details
            ) from None
        change_id = None
        if changes is not None:
            change_id = change_record(app_id=app.id, actor=actor, via=ChangeVia.MIGRATION, route="", changes=changes)
        return MigrationOutcome(
            collections=migration.collections, total=total, migrated=migrated, deleted=deleted, change_id=change_id
        )
    row = RecordMigration.objects.create(
        app=app,
        storage_id=storage_id,
        version=version,
        spec=spec,
        total=total,
        actor=actor if getattr(actor, "pk", None) is not None else None,
    )
    App.objects.filter(pk=app.pk).update(migrating=True)
    _enqueue(row.id)
    return MigrationOutcome(collections=migration.collections, total=total, queued_id=row.id)


def record_migration_share_check(*, app: App, actor: Any, migration: Migration) -> None:
    """Before a save's tests run: RateLimited when `migration` would be queued (more records than the inline limit)
    while the apps of `app`'s owner already have their share of migrations queued or running. The save checks
    again under the owner's row lock when it queues it."""
    records = Record.objects.filter(storage__app=app, collection__in=migration.collections)
    if records.count() > current_limits().migrate_inline_records:
        _share_check(app=app, actor=actor)


def _share_check(*, app: App, actor: Any) -> None:
    share = int(getattr(settings, "CHARMING_MIGRATIONS_PER_USER", 2))
    if share <= 0:
        return
    queued = RecordMigration.objects.filter(app__owner_id=app.owner_id, status=RecordMigration.Status.QUEUED).count()
    if queued < share:
        return
    whose = "you own" if getattr(actor, "pk", None) == app.owner_id else "this app's owner owns"
    wait = SHARE_RETRY_SECONDS
    raise RateLimited(
        f"The apps {whose} already have {queued} record migration{'s' if queued != 1 else ''} queued or running in "
        f"the background (the most one account has at once, so that every account's get their turn). Nothing was "
        f"saved; try again in {wait} seconds, once one has finished (get_app shows a migration's progress), or "
        "migrate fewer records at a time.",
        limit="migrations",
        retry_after_seconds=wait,
        details={
            "limit": "migrations",
            "max": share,
            "queued": queued,
            "setting": "CHARMING_MIGRATIONS_PER_USER",
            "retry_after_seconds": wait,
        },
    )


def record_migration_try(*, migration: Migration, storage_id: uuid.UUID, app_id: str, limits: Limits) -> dict[str, int]:
    """Run `migration` over a storage's records, as a save does inline: an author test's (on its scratch storage,
    whose transaction is rolled back after). Its value: how many records were migrated and deleted."""
    batch = list(
        Record.objects.select_for_update()
        .filter(storage_id=storage_id, collection__in=migration.collections)
        .order_by("pk")
    )
    migrated, deleted = _migrate(
        batch, migration, storage_id=storage_id, app_id=app_id, now=timezone.now(), limits=limits
    )
    return {"migrated": migrated, "deleted": deleted}


def _enqueue(migration_id: uuid.UUID) -> None:
    """Queue the migration's task, unless one is already waiting to run it (a migration has at most one task
    waiting, however often it is queued again: by its own slices, or by a stale resume)."""
    from apps_registry.tasks import record_migration_task  # the task module imports the services

    waiting = DBTaskResult.objects.filter(
        status=TaskResultStatus.READY,
        task_path=record_migration_task.module_path,
        args_kwargs__kwargs__migration_id=str(migration_id),
    )
    if not waiting.exists():
        record_migration_task.enqueue(migration_id=str(migration_id))


def _migrate(
    batch: list[Record],
    migration: Migration,
    *,
    storage_id: uuid.UUID,
    app_id: str,
    now: Any,
    limits: Limits,
    until: float | None = None,
    changes: ChangeSet | None = None,
) -> tuple[int, int]:
    """Migrate (or delete) each record of `batch`, locked by the caller; (migrated, deleted). With `until` (a
    time.monotonic() value), it stops once past it, after at least one record: the records not reached are
    left as they were and the caller's position goes after the last one done. Each record's before and after
    are noted in `changes`, when given (the caller writes them to the change log)."""
    store = SqlStore(storage_id=storage_id, max_bytes=limits.record_bytes)
    changed: list[Record] = []
    gone: list[int] = []
    for record in batch:
        if until is not None and (changed or gone) and time.monotonic() > until:
            break
        expr = migration.exprs[record.collection]
        data = migrated_data(
            expr, record={**record.data, "id": record.record_id}, now=now, app_id=app_id, store=store, limits=limits
        )
        if changes is not None:
            changes.note(record.collection, record.record_id, record.data, data)
        if data is None:
            gone.append(record.pk)
            continue
        record.data = data
        record.version += 1
        record.updated_at = now
        changed.append(record)
    if changed:
        Record.objects.bulk_update(changed, ["data", "version", "updated_at"], batch_size=BATCH)
    if gone:
        Record.objects.filter(pk__in=gone).delete()
    if changed or gone:
        store.records_changed(-len(gone))  # open pages see the batch (and the record count stays true)
    return len(changed), len(gone)


def record_migration_slice(*, migration_id: uuid.UUID | str) -> RecordMigration | None:
    """What the task runs: the migration for SLICE_SECONDS at most, then, unfinished, its task queued again, at the
    back of the queue: the task worker runs tasks in the order they were queued, so a long migration (up to the
    app's records, each up to the CEL time of a call) takes turns with every other account's tasks instead of
    holding the worker until it ends."""
    row = record_migration_run(migration_id=migration_id, seconds=SLICE_SECONDS)
    if row is not None and row.status == RecordMigration.Status.QUEUED:
        _enqueue(row.id)
    return row


def record_migration_run(
    *, migration_id: uuid.UUID | str, batches: int | None = None, seconds: float | None = None
) -> RecordMigration | None:
    """Run a queued migration to its end (or for `batches` batches, or about `seconds`: the batch under way when
    they run out stops after its record at hand): each batch in its own transaction, under the migration's row
    lock, with the position after it. A record failing ends it as failed (batches before stay migrated; the app's
    mutations are allowed again and its author is told by an advisory)."""
    limits = current_limits()
    until = time.monotonic() + seconds if seconds is not None else None
    done_batches = 0
    while (batches is None or done_batches < batches) and (
        until is None or not done_batches or time.monotonic() < until
    ):
        with transaction.atomic():
            row = RecordMigration.objects.select_for_update().filter(pk=migration_id).first()
            if row is None or row.status != RecordMigration.Status.QUEUED:
                return row
            migration, problems = check_migration(row.spec, limits)
            if migration is None:  # an operator lowered a limit since it was saved
                _finish(row, error=f"the migration no longer passes the limits: {first_problems(problems)}")
                return row
            batch = list(
                Record.objects.select_for_update()
                .filter(storage_id=row.storage_id, collection__in=migration.collections, pk__gt=row.position)
                .order_by("pk")[:BATCH]
            )
            if not batch:
                _finish(row)
                return row
            changes = ChangeSet() if change_log_on() else None
            try:
                with transaction.atomic():  # a savepoint: a failing batch leaves nothing, its failure is kept
                    migrated, deleted = _migrate(
                        batch,
                        migration,
                        storage_id=row.storage_id,
                        app_id=str(row.app_id),
                        now=row.created_at,
                        limits=limits,
                        until=until,
                        changes=changes,
                    )
            except CharmingError as exc:
                _finish(row, error=exc.message)
                return row
            if changes is not None:
                _logged(row, changes)
            row.position = batch[migrated + deleted - 1].pk
            row.done += migrated + deleted
            row.save(update_fields=["position", "done", "change_id", "updated_at"])
        done_batches += 1
    return RecordMigration.objects.filter(pk=migration_id).first()


def _logged(row: RecordMigration, changes: ChangeSet) -> None:
    """A batch's records in the migration's one change: added to it, or it made with the first batch that wrote
    (again if the history's purge took it meanwhile). In the batch's transaction, under the migration's row lock."""
    if row.change_id is not None and change_extend(change_id=row.change_id, app_id=row.app_id, changes=changes):
        return
    row.change_id = change_record(
        app_id=row.app_id, actor=row.actor, via=ChangeVia.MIGRATION, route="", changes=changes
    )


def _finish(row: RecordMigration, *, error: str = "") -> None:
    from apps_registry.models import Advisory  # noqa: PLC0415 (kept beside its one use)

    row.status = RecordMigration.Status.FAILED if error else RecordMigration.Status.DONE
    row.error = error
    row.save(update_fields=["status", "error", "updated_at"])
    App.objects.filter(pk=row.app_id).update(migrating=False)
    if error:
        logger.warning("Record migration %s of app %s failed: %s", row.id, row.app_id, error)
        Advisory.objects.create(
            app_id=row.app_id,
            kind="migration-failed",
            severity="warn",
            summary=(
                f"The migration saved with version {row.version} stopped after {row.done} of {row.total} records: "
                f"{error} The records before it stay migrated; fix the expression and save again with a migration "
                "for the rest."
            ),
            user_summary="Updating this app's stored data stopped part-way; its author has been told.",
            data={"migration": str(row.id), "done": row.done, "total": row.total},
        )


def migration_progress(app: App) -> RecordMigration | None:
    """The app's migration under way, if any."""
    return RecordMigration.objects.filter(app=app, status=RecordMigration.Status.QUEUED).order_by("-created_at").first()


def migration_refusal(app: App, *, what: str = "change its records") -> AppMigrating:
    """The refusal of a mutation (or of a second migration) while the app's records are being migrated."""
    row = migration_progress(app)
    done, total = (row.done, row.total) if row is not None else (0, 0)
    return AppMigrating(
        f"App '{app.name}' is migrating: {done} of {total} records; cannot {what} until it ends. Try again shortly.",
        app_id=app.pk,
        details={"migrating": True, "done": done, "total": total},
    )


def migration_resume_if_stale(*, app_id: Any) -> bool:
    """Queue the task of the app's migration again when it has made no progress for STALE_AFTER (its worker was
    killed, or its task lost); called after a refusal, outside the refused call's transaction. Two runs never
    overlap: each batch takes the migration's row lock and reads the position under it."""
    with transaction.atomic():
        row = (
            RecordMigration.objects.select_for_update(skip_locked=True)
            .filter(app_id=app_id, status=RecordMigration.Status.QUEUED, updated_at__lt=timezone.now() - STALE_AFTER)
            .first()
        )
        if row is None:
            return False
        row.save(update_fields=["updated_at"])
        _enqueue(row.id)
    return True
