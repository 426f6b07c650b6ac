"""Reads. Every query a caller's access depends on starts from `apps_visible_to`."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import QuerySet

from apps_registry.exceptions import app_not_found
from apps_registry.models import Advisory, App, Membership


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


def _is_uuid(value: uuid.UUID | str) -> bool:
    if isinstance(value, uuid.UUID):
        return True
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True
