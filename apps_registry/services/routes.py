"""Running an app's routes for a caller: access, route lookup, then the engine."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

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
    app, role = app_get_visible(user=actor, app_id=app_id)
    if kind == "mutation" and role == Role.VIEWER:
        raise Forbidden(
            f"You are a viewer of app '{app.name}'; viewers may only query (query_app). "
            "Ask the owner for editor access to change its data."
        )
    row = (
        Route.objects.filter(app=app, name=op)
        .values_list("id", "version", "updated_at", "kind", "app__storage__id")
        .first()
    )
    if row is None:
        names = list(Route.objects.filter(app=app).order_by("name").values_list("name", "kind"))
        listing = ", ".join(f"{name} ({route_kind})" for name, route_kind in names) or "none"
        raise UnknownOp(f"App '{app.name}' has no route '{op}'. Its routes: {listing}. Use get_app to see them.")
    route_id, version, updated_at, route_kind, storage_id = row
    if route_kind != kind:
        raise UnknownOp(
            f"'{op}' is a {route_kind} route: call it with {_TOOL_FOR_KIND[route_kind]}, not {_TOOL_FOR_KIND[kind]}."
        )
    limits = current_limits()
    compiled = compiled_route(
        route_id=route_id,
        version=(version, updated_at),
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
