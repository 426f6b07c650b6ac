"""Reads. A caller's apps are reached only through apps_registry.access (`apps_visible_to`, `app_for`);
the selectors here list what those give, read an app already reached that way, or serve staff and
operators (who see every app)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, QuerySet, Sum, TextField
from django.db.models.functions import Cast, Coalesce, Length

from apps_registry.access import apps_visible_to
from apps_registry.models import Advisory, App, Feedback, Record, Route, Storage
from apps_registry.values import parse_uuid


@dataclass(frozen=True)
class AppListing:
    """One of the caller's apps as every transport lists it (list_apps, GET /api/apps/)."""

    id: uuid.UUID
    name: str
    description: str
    role: str


def app_listings_for(actor: Any) -> list[AppListing]:
    """The actor's apps with their role in each, by name."""
    return [
        AppListing(id=app.id, name=app.name, description=app.description, role=app.caller_role)  # type: ignore[attr-defined]
        for app in apps_visible_to(actor).order_by("name", "id")
    ]


def advisories_open_for(app: App) -> QuerySet[Advisory]:
    return Advisory.objects.filter(app=app, resolved=False).order_by("created_at", "id")


def retained_storage(
    *, detached_before: datetime | None = None, app_uuid: uuid.UUID | str | None = None
) -> QuerySet[Storage]:
    """Storage of deleted apps (detached, kept for the retention window), oldest first."""
    storages = Storage.objects.filter(detached_at__isnull=False).select_related("owner").order_by("detached_at", "id")
    if detached_before is not None:
        storages = storages.filter(detached_at__lt=detached_before)
    if app_uuid is not None:
        storages = storages.filter(app_uuid=str(app_uuid))
    return storages


@dataclass(frozen=True)
class AppSummary:
    app: App
    records: int
    routes: int
    members: int


def app_summary_for_staff(*, app_id: uuid.UUID | str) -> AppSummary | None:
    """Any app (staff see all) with its record, route and member counts; None if there is none."""
    app = App.objects.select_related("owner").filter(pk=str(app_id)).first() if parse_uuid(app_id) else None
    if app is None:
        return None
    return AppSummary(
        app=app,
        records=Record.objects.filter(storage__app=app).count(),
        routes=app.routes.count(),
        members=app.memberships.count(),
    )


@dataclass(frozen=True)
class StorageUsage:
    storage: Storage
    records: int
    # Characters of the records' JSON: an approximate size in bytes.
    size: int


def storage_with_usage(storages: QuerySet[Storage]) -> QuerySet[Storage]:
    """Annotate `record_count` and `data_size` (see StorageUsage)."""
    return storages.annotate(
        record_count=Count("records"),
        data_size=Coalesce(Sum(Length(Cast("records__data", TextField()))), 0),
    )


def storage_usage(storages: QuerySet[Storage]) -> list[StorageUsage]:
    return [
        StorageUsage(storage=s, records=int(s.record_count), size=int(s.data_size))  # type: ignore[attr-defined]
        for s in storage_with_usage(storages)
    ]


def feedback_sent_by(*, user: Any, app: App) -> QuerySet[Feedback]:
    """The user's own feedback on an app, newest first, with the staff answers prefetched."""
    return Feedback.objects.filter(author=user, app=app).prefetch_related("responses").order_by("-created_at", "-id")


def routes_of(app: App) -> QuerySet[Route]:
    """The app's routes, by name."""
    return Route.objects.filter(app=app).order_by("name")
