"""App lifecycle: creation with its owner and storage, deletion with retention or purge."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps_registry.access import app_for
from apps_registry.exceptions import ConfirmationRequired
from apps_registry.models import App, AuditEvent, Hook, Membership, Role, Schedule, Storage
from apps_registry.services.collection_indexes import collection_indexes_enqueue, declared_index_keys


@dataclass(frozen=True)
class DeletionResult:
    app_id: uuid.UUID
    app_name: str
    purged: bool
    records_purged: int
    storage_id: uuid.UUID | None
    retained_until: datetime | None


def audit_record(*, actor: Any, action: str, app_id: uuid.UUID | None, details: dict[str, Any]) -> AuditEvent:
    """Append one audit event. `actor` may be None for system actions."""
    return AuditEvent.objects.create(
        actor=actor,
        actor_repr=str(actor.get_username()) if actor is not None else "system",
        app_id=app_id,
        action=action,
        details=details,
    )


@transaction.atomic
def app_create(*, owner: Any, name: str, description: str = "", app_id: uuid.UUID | None = None) -> App:
    """Create an app with its owner membership and its (empty) storage."""
    app = App.objects.create(id=app_id or uuid.uuid4(), owner=owner, name=name, description=description)
    Membership.objects.create(user=owner, app=app, role=Role.OWNER)
    Storage.objects.create(app=app, app_uuid=app.id, app_name=app.name, owner=owner)
    return app


def app_delete_check(*, actor: Any, app_id: uuid.UUID | str) -> App:
    """The app, if the actor may delete it (NotFound or AccessDenied otherwise): ask before a confirmation prompt."""
    app, _role = app_for(actor=actor, app_id=app_id, need="delete")
    return app


def retention_days() -> int:
    """How many days storage detached by app_delete is kept (CHARMING_STORAGE_RETENTION_DAYS)."""
    return int(settings.CHARMING_STORAGE_RETENTION_DAYS)


@transaction.atomic
def app_delete(
    *,
    actor: Any,
    app_id: uuid.UUID | str,
    purge_storage: bool,
    confirmed_via: str,
    created_at: datetime | None = None,
) -> DeletionResult:
    """Delete an app the actor owns. Its storage is purged, or detached and retained.

    `confirmed_via` records how the user confirmed ("elicitation", "confirm_parameter", "admin", "command").
    `created_at`, when given, is the creation time of the app the user confirmed deleting: an app since deleted and
    created again under the same id is another app, and is refused (ConfirmationRequired).
    """
    app, _role = app_for(actor=actor, app_id=app_id, need="delete", for_update=True)
    if created_at is not None and app.created_at != created_at:
        raise ConfirmationRequired(
            f"The confirmation was given for another app that had the id {app.id}; app '{app.name}' is not the one "
            "the user confirmed deleting. Nothing was deleted; call delete_app again to ask about this app."
        )
    # Its schedules and webhooks first: a schedule's run holds the schedule's row, and a delivery its hook's (KEY SHARE,
    # inserting the delivery), then each takes the storage's (KEY SHARE); taking the storage's first and theirs by the
    # cascade below would be the opposite order, a deadlock. A delivery arriving after this finds no hook (404).
    Schedule.objects.filter(app=app).delete()
    # The hooks' rows locked first: a delivery in flight holds its hook's (FOR NO KEY UPDATE) until it commits, and
    # the delete below must not collect the deliveries before the last one is in (a foreign key violation).
    list(Hook.objects.select_for_update().filter(app=app).values_list("pk", flat=True))
    Hook.objects.filter(app=app).delete()
    storage = Storage.objects.select_for_update().filter(app=app).first()
    records_purged = 0
    retained_until = None
    storage_id = storage.id if storage else None
    if storage is not None:
        if declared_index_keys(app.collections):  # the app goes, and its indexes with it
            collection_indexes_enqueue(storage_id=storage.id)
        if purge_storage:
            records_purged, _ = storage.records.all().delete()
            storage.delete()
            storage_id = None
        else:
            storage.app = None
            storage.detached_at = timezone.now()
            storage.save(update_fields=["app", "detached_at"])
            retained_until = storage.detached_at + timedelta(days=retention_days())
    app_uuid, app_name = app.id, app.name
    app.delete()
    audit_record(
        actor=actor,
        action="app.delete",
        app_id=app_uuid,
        details={
            "app_name": app_name,
            "purge_storage": purge_storage,
            "confirmed_via": confirmed_via,
            "records_purged": records_purged,
            "retained_storage_id": str(storage_id) if storage_id else None,
        },
    )
    return DeletionResult(
        app_id=app_uuid,
        app_name=app_name,
        purged=purge_storage,
        records_purged=records_purged,
        storage_id=storage_id,
        retained_until=retained_until,
    )
