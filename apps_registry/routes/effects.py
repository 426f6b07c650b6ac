"""What a route does to an app's records, read off its steps as written: the basis of the hints an MCP host gets
about a route served as a tool (readOnly, destructive, idempotent).

Plain data in, plain data out: no compilation (a route that cannot compile is never saved), no database.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# Writes that replace or remove what a record held (an update or upsert merges over its fields).
OVERWRITING_OPS = frozenset({"update", "upsert", "delete"})
# Writes whose second run with the same params changes the records again (a new record, a counter moved).
ACCUMULATING_OPS = frozenset({"insert", "increment"})


@dataclass(frozen=True)
class RouteEffects:
    read_only: bool
    destructive: bool
    idempotent: bool


def _step_ops(steps: Any) -> Iterator[str]:
    """The op of each step in `steps`, those inside a for_each included."""
    if not isinstance(steps, list):
        return
    for step in steps:
        if not isinstance(step, dict):
            continue
        for op, body in step.items():
            if op in ("as", "when"):
                continue
            yield op
            if op == "for_each" and isinstance(body, dict):
                yield from _step_ops(body.get("steps"))


def route_effects(*, kind: str, definition: dict[str, Any]) -> RouteEffects:
    """A query changes nothing. A mutation is destructive when a step deletes or overwrites a record, and idempotent
    when none adds a record or moves a counter; a legacy `handler` route may do anything (MCP's defaults)."""
    if kind == "query":
        return RouteEffects(read_only=True, destructive=False, idempotent=True)
    if "steps" not in definition:
        return RouteEffects(read_only=False, destructive=True, idempotent=False)
    ops = set(_step_ops(definition["steps"]))
    return RouteEffects(
        read_only=False,
        destructive=bool(ops & OVERWRITING_OPS),
        idempotent=not (ops & ACCUMULATING_OPS),
    )
