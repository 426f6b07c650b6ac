"""What the app page reads from a route's steps (plain data, never run): which params hold the id of a record
of which collection (so the form offers a picker of those records instead of an id box), and whether a
mutation deletes (so its buttons ask to confirm). docs/pages.md, "Acting on rows" and "Pickers"."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from apps_registry.models import Route

# Steps that need the record to exist: their `id` param names a record of their collection.
_RECORD_STEPS = ("update", "delete", "increment")
_PARAM = re.compile(r"^\s*params\.([A-Za-z_][A-Za-z0-9_]*)\s*$")
MAX_WALK = 10_000  # step nodes read at most (a definition is bounded anyway)


def _nodes(value: Any) -> Iterator[Mapping[str, Any]]:
    stack = [value]
    seen = 0
    while stack and seen < MAX_WALK:
        node = stack.pop()
        seen += 1
        if isinstance(node, Mapping):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _body(route: Route) -> Any:
    definition = route.definition if isinstance(route.definition, Mapping) else {}
    handler = definition.get("handler")
    if isinstance(handler, Mapping):
        action, collection = handler.get("action"), handler.get("collection")
        return [{action: {"collection": collection, "id": "params.id"}}] if action in ("update", "delete") else []
    return definition.get("steps", [])


def record_params(route: Route) -> dict[str, str]:
    """param -> collection, for each param a step uses as the id of a record that must exist
    (`{"update": {"collection": "todos", "id": "params.id", ...}}`)."""
    found: dict[str, str] = {}
    for node in _nodes(_body(route)):
        for kind in (*_RECORD_STEPS, "get"):
            spec = node.get(kind)
            if not isinstance(spec, Mapping) or not isinstance(spec.get("collection"), str):
                continue
            if kind == "get" and "default" in spec:  # a get with a default may name a record that is not there
                continue
            match = _PARAM.match(spec["id"]) if isinstance(spec.get("id"), str) else None
            if match:
                found.setdefault(match.group(1), spec["collection"])
    return found


def is_destructive(route: Route) -> bool:
    """Whether the mutation deletes records (its buttons ask to confirm first)."""
    return any(isinstance(node.get("delete"), Mapping) for node in _nodes(_body(route)))


def shown_collections(route: Route) -> set[str]:
    """The collections whose records a query returns as they are stored (`find`, `get`): a page showing its
    result already shows their records."""
    found = set()
    for node in _nodes(_body(route)):
        for kind in ("find", "get"):
            spec = node.get(kind)
            if isinstance(spec, Mapping) and isinstance(spec.get("collection"), str):
                found.add(spec["collection"])
    return found


def field_order(routes: list[Route]) -> list[str]:
    """Field names in the order the app's routes write them (inputs, then outputs, route by route): the
    order a table of raw records puts its columns in."""
    order: list[str] = []
    for route in routes:
        for schema in (route.input_schema_ordered, route.output_schema_ordered):
            for node in _nodes(schema):
                properties = node.get("properties")
                if isinstance(properties, Mapping):
                    order.extend(k for k in properties if isinstance(k, str) and k not in order)
    return order
