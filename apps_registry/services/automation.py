"""What webhooks (services/hooks.py) and schedules (services/schedules.py) share: each runs one mutation route of
an app as the person who made it, is kept by the app's managers (owner and editors), and is counted against the
app's and its owner's share."""

from __future__ import annotations

from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth import get_user_model

from apps_registry.access import manager_app_for
from apps_registry.exceptions import InvalidInput, NotFound, OperationFailed
from apps_registry.models import App, Hook, Route, RouteKind, Schedule
from apps_registry.values import clip, parse_uuid

Kept = TypeVar("Kept", Hook, Schedule)  # what an app's managers keep: each has its app and its creator


def invalid(path: str, message: str) -> InvalidInput:
    return InvalidInput(f"{path.removeprefix('$.')} {message}.", errors=[{"path": path, "message": message}])


def mutation_route_checked(*, app: App, route: Any, what: str) -> Route:
    """The app's mutation route named `route` (text already checked storable); InvalidInput naming its mutation
    routes otherwise. `what` (plural) is what runs it: "webhooks", "schedules"."""
    found = Route.objects.filter(app=app, name=route).first() if isinstance(route, str) else None
    mutations = sorted(Route.objects.filter(app=app, kind=RouteKind.MUTATION).values_list("name", flat=True))
    listing = ", ".join(mutations) or "none"
    if found is None:
        shown = clip(route, 60) if isinstance(route, str) else type(route).__name__
        raise invalid("$.route", f"'{shown}' is not a route of app '{app.name}'; its mutation routes: {listing}")
    if found.kind != RouteKind.MUTATION:
        raise invalid("$.route", f"'{found.name}' is a query; {what} run mutations. Its mutation routes: {listing}")
    return found


def kept_for(
    model: type[Kept], *, actor: Any, kept_id: Any, app_id: Any, for_update: bool, what: str, missing: str
) -> Kept:
    """The `model` row `kept_id` (of app `app_id`, when given), if `actor` may manage its app's `what`; NotFound
    with `missing` alike for a missing row and one of an app the actor cannot see, AccessDenied for a viewer. Only
    the row itself is locked: its app's row stays free for the mutations that lock it (KEY SHARE) meanwhile."""
    pk = parse_uuid(kept_id)
    rows = model._default_manager.select_related("app", "creator")
    if app_id is not None:
        app_pk = parse_uuid(app_id)
        rows = rows.filter(app_id=app_pk) if app_pk is not None else rows.none()
    found = None if pk is None else (rows.select_for_update(of=("self",)) if for_update else rows).filter(pk=pk).first()
    if found is None:
        raise NotFound(missing)
    try:
        manager_app_for(actor=actor, app_id=found.app_id, what=what)
    except NotFound:
        raise NotFound(missing) from None
    return found


def shares_check(app: App, model: type[Hook | Schedule], *, what: str, limit: str, setting: str, instead: str) -> None:
    """Refuse one `model` row (one of the app's `what`) more than the app's share (setting `setting`_PER_APP) or its
    owner's (`setting`_PER_OWNER), under the owner's row lock, so two saves of two apps of one owner cannot both take
    the last place. `instead` is what the person may do at the app's share; `limit` names both in the details."""
    get_user_model().objects.select_for_update().filter(pk=app.owner_id).first()
    rows = model._default_manager
    per_app = getattr(settings, f"{setting}_PER_APP")
    if rows.filter(app=app).count() >= per_app:
        raise OperationFailed(
            f"App '{app.name}' has {per_app} {what}, the most an app may have ({setting}_PER_APP). {instead}",
            details={"limit": f"{limit}_per_app", "max": per_app},
        )
    per_owner = getattr(settings, f"{setting}_PER_OWNER")
    if rows.filter(app__owner_id=app.owner_id).count() >= per_owner:
        raise OperationFailed(
            f"The apps of this app's owner have {per_owner} {what}, the most one owner's apps may have "
            f"({setting}_PER_OWNER). Delete one first.",
            details={"limit": f"{limit}_per_owner", "max": per_owner},
        )
