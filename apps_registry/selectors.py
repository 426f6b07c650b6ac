"""Reads. Every query a caller's access depends on starts from `apps_visible_to`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, QuerySet, Sum, TextField
from django.db.models.functions import Cast, Coalesce, Length

from apps_registry.exceptions import app_not_found
from apps_registry.models import Advisory, App, Feedback, Membership, Record, Route, Storage


def apps_visible_to(user: Any) -> QuerySet[App]:
    """Apps the user owns or is a member of."""
    return App.objects.filter(memberships__user=user).distinct()


def role_of(*, user: Any, app: App) -> str | None:
    return Membership.objects.filter(user=user, app=app).values_list("role", flat=True).first()


def app_get_visible(*, user: Any, app_id: uuid.UUID | str) -> tuple[App, str]:
    """The app and the caller's role in it; NotFound (the same for missing and invisible)."""
    membership = (
        Membership.objects.select_related("app").filter(user=user, app_id=str(app_id)).first()
        if _is_uuid(app_id)
        else None
    )
    if membership is None:
        raise app_not_found(app_id)
    return membership.app, membership.role


def app_memberships_for(user: Any) -> QuerySet[Membership]:
    """The user's memberships with their apps, ordered by app name: what list_apps shows."""
    return Membership.objects.filter(user=user).select_related("app").order_by("app__name", "app_id")


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
    app = App.objects.select_related("owner").filter(pk=str(app_id)).first() if _is_uuid(app_id) else None
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


def _is_uuid(value: uuid.UUID | str) -> bool:
    if isinstance(value, uuid.UUID):
        return True
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def routes_of(app: App) -> QuerySet[Route]:
    """The app's routes, by name: what get_app shows."""
    return Route.objects.filter(app=app).order_by("name")


@dataclass(frozen=True)
class ConnectedClient:
    """An OAuth client holding live tokens a user granted."""

    application_id: int
    name: str
    client_id: str
    scopes: list[str]
    connected_at: datetime


def oauth_clients_connected_to(user: Any) -> list[ConnectedClient]:
    """The OAuth clients holding an access token or an unrevoked refresh token of `user`, oldest first."""
    from oauth2_provider.models import AccessToken, Application, RefreshToken

    from apps_registry.oauth.scopes import SCOPES

    live_refresh = RefreshToken.objects.filter(user=user, revoked__isnull=True)
    application_ids = set(AccessToken.objects.filter(user=user).values_list("application_id", flat=True))
    application_ids |= set(live_refresh.values_list("application_id", flat=True))
    clients = []
    for application in Application.objects.filter(pk__in=application_ids).order_by("created"):
        granted: set[str] = set()
        for scope in AccessToken.objects.filter(user=user, application=application).values_list("scope", flat=True):
            granted.update(scope.split())
        first = (
            AccessToken.objects.filter(user=user, application=application).order_by("created").first()
            or live_refresh.filter(application=application).order_by("created").first()
        )
        clients.append(
            ConnectedClient(
                application_id=application.pk,
                name=application.name or application.client_id,
                client_id=application.client_id,
                scopes=[SCOPES.get(scope, scope) for scope in sorted(granted)],
                connected_at=first.created if first else application.created,
            )
        )
    return clients
