"""Running an app's routes for a caller: access, route lookup, then the engine."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from django.db.models import F

from apps_registry.exceptions import Forbidden, UnknownOp
from apps_registry.models import App, Role, Route
from apps_registry.routes.cache import compiled_route
from apps_registry.routes.limits import current_limits
from apps_registry.routes.runtime import run_route
from apps_registry.selectors import app_get_visible

_TOOL_FOR_KIND = {"query": "query_app", "mutation": "mutate_app"}


@dataclass(frozen=True)
class RouteResult:
    value: Any  # the validated return value of the route (JSON-compatible)
    app: App  # the app the route ran in (for advisories)


def route_run(
    *,
    actor: Any,
    app_id: uuid.UUID | str,
    op: str,
    params: dict[str, Any] | None,
    kind: Literal["query", "mutation"],
) -> RouteResult:
    """Run route `op` of app `app_id` as `actor`. Raises only apps_registry.exceptions errors."""
    # The hot path: the caller's role, the app, its storage and the route's version in one query.
    found = _route_for_call(actor=actor, app_id=app_id, op=op)
    if found is None:
        app, role = app_get_visible(user=actor, app_id=app_id)  # NotFound for missing and invisible apps
        _check_role(app, role, kind)
        names = list(Route.objects.filter(app=app).order_by("name").values_list("name", "kind"))
        listing = ", ".join(f"{name} ({route_kind})" for name, route_kind in names) or "none"
        raise UnknownOp(f"App '{app.name}' has no route '{op}'. Its routes: {listing}. Use get_app to see them.")
    route, role, storage_id = found
    app = route.app
    _check_role(app, role, kind)
    if route.kind != kind:
        raise UnknownOp(
            f"'{op}' is a {route.kind} route: call it with {_TOOL_FOR_KIND[route.kind]}, not {_TOOL_FOR_KIND[kind]}."
        )
    route_id = route.pk
    limits = current_limits()
    compiled = compiled_route(
        route_id=route_id,
        version=(route.version, route.updated_at),
        limits=limits,
        load=lambda: Route.objects.get(pk=route_id),
    )
    value = run_route(
        compiled,
        params={} if params is None else params,
        caller={"id": str(actor.pk), "role": role},
        app_id=str(app.id),
        storage_id=storage_id,
        limits=limits,
    )
    return RouteResult(value=value, app=app)


def _route_for_call(*, actor: Any, app_id: uuid.UUID | str, op: str) -> tuple[Route, str, Any] | None:
    """(route with its app, the caller's role, the storage id), or None when any of them is missing."""
    try:
        app_uuid = uuid.UUID(str(app_id))
    except ValueError:
        return None
    route = (
        Route.objects.filter(app_id=app_uuid, name=op, app__memberships__user=actor)
        .select_related("app")
        .defer("definition", "input_schema", "output_schema", "description")
        .annotate(caller_role=F("app__memberships__role"), storage_pk=F("app__storage__id"))
        .order_by()[:1]
    )
    for found in route:
        return found, found.caller_role, found.storage_pk
    return None


def _check_role(app: App, role: str, kind: str) -> None:
    if kind == "mutation" and role == Role.VIEWER:
        raise Forbidden(
            f"You are a viewer of app '{app.name}'; viewers may only query (query_app). "
            "Ask the owner for editor access to change its data."
        )
