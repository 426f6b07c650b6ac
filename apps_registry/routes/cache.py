"""Compiled routes, cached per route version: the caller compiles a stored route on its first use
(`compile_route`) and keeps it (`cache_route`); every later call finds it (`cached_route`).

Saving an app bumps the version of exactly the routes that changed, so an edit invalidates only
that route (in every process: the version is part of the key)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from apps_registry.exceptions import OperationFailed
from apps_registry.routes.compiler import CompiledRoute, Problem, check_route, compile_parts
from apps_registry.routes.expressions import stored_definitions
from apps_registry.routes.limits import Limits, limit_details

if TYPE_CHECKING:
    from apps_registry.models import Route

MAX_ENTRIES = 2048
_entries: OrderedDict[tuple[Any, ...], CompiledRoute] = OrderedDict()
_lock = threading.Lock()
# Counts compilations, so tests can prove a route is compiled once per version.
stats = {"compiled": 0}


def cached_route(*, route_id: int, version: Any, limits: Limits) -> CompiledRoute | None:
    """The compiled route for this version, if this process has it. `version` must change whenever the
    route does: the services pass (version, updated_at), so a reused primary key can never hit a stale entry."""
    key = (route_id, version, limits)
    with _lock:
        found = _entries.get(key)
        if found is not None:
            _entries.move_to_end(key)
        return found


def cache_route(*, route_id: int, version: Any, limits: Limits, compiled: CompiledRoute) -> CompiledRoute:
    """Keep `compiled` (the caller compiled the stored route with `compile_route`) for later calls."""
    with _lock:
        _entries[(route_id, version, limits)] = compiled
        while len(_entries) > MAX_ENTRIES:
            _entries.popitem(last=False)
    return compiled


def compile_route(route: Route, limits: Limits) -> CompiledRoute:
    """Compile a stored route. Problems here mean the limits were lowered since the app was saved (an
    expression the type checker would refuse now still compiles: see `stored_definitions`)."""
    raw = {"kind": route.kind, "description": route.description, "input": route.input_schema, **route.definition}
    if route.output_schema is not None:
        raw["output"] = route.output_schema
    problems: list[Problem] = []
    with stored_definitions():  # saved before the type checker, it runs as it always did
        parts = check_route(route.name, raw, limits, problems, prefix=f"routes.{route.name}")
    if parts is None or problems:
        first = next((p for p in problems if p.limit), problems[0] if problems else None)
        details: dict[str, Any] = {"route": route.name, "errors": [p.as_dict() for p in problems]}
        if first is not None and first.limit and first.max is not None:
            details.update(limit_details(first.limit, first.max))
        message = f"{first.path}: {first.message}" if first else "the route could not be compiled"
        raise OperationFailed(
            f"Route '{route.name}' cannot run under the current limits: {message}. The app's author must change it.",
            details=details,
        )
    stats["compiled"] += 1
    return compile_parts(parts)


def forget(route_ids: list[int]) -> None:
    """Drop this process's cached versions of these routes (other processes miss on the new version)."""
    wanted = set(route_ids)
    with _lock:
        for key in [k for k in _entries if k[0] in wanted]:
            del _entries[key]
