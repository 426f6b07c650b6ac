"""What a route does to records, read off its steps: the hints a route served as an MCP tool carries."""

from __future__ import annotations

import pytest

from apps_registry.routes.effects import RouteEffects, route_effects


def steps(*ops: dict) -> dict:
    return {"steps": list(ops)}


READ = {"find": {"collection": "logs"}, "as": "logs"}
RETURN = {"return": "logs"}


@pytest.mark.parametrize(
    ("kind", "definition", "expected"),
    [
        ("query", steps(READ, RETURN), RouteEffects(read_only=True, destructive=False, idempotent=True)),
        (
            "mutation",
            steps({"insert": {"collection": "logs", "value": "{}"}, "as": "log"}, {"return": "log"}),
            RouteEffects(read_only=False, destructive=False, idempotent=False),
        ),
        (
            "mutation",
            steps({"increment": {"collection": "c", "id": "'a'", "field": "n"}}),
            RouteEffects(read_only=False, destructive=False, idempotent=False),
        ),
        (
            "mutation",
            steps({"update": {"collection": "c", "id": "params.id", "value": "{}"}}),
            RouteEffects(read_only=False, destructive=True, idempotent=True),
        ),
        (
            "mutation",
            steps({"upsert": {"collection": "c", "id": "params.id", "value": "{}"}}),
            RouteEffects(read_only=False, destructive=True, idempotent=True),
        ),
        (
            "mutation",
            steps(
                READ, {"for_each": {"in": "logs", "as": "l", "steps": [{"delete": {"collection": "c", "id": "l.id"}}]}}
            ),
            RouteEffects(read_only=False, destructive=True, idempotent=True),
        ),
        (
            "mutation",
            steps({"delete": {"collection": "c", "id": "params.id"}}, {"insert": {"collection": "c", "value": "{}"}}),
            RouteEffects(read_only=False, destructive=True, idempotent=False),
        ),
        ("mutation", {"handler": {"op": "x"}}, RouteEffects(read_only=False, destructive=True, idempotent=False)),
    ],
    ids=["query", "insert", "increment", "update", "upsert", "delete-in-for_each", "delete-and-insert", "legacy"],
)
def test_a_routes_effects_follow_from_its_steps(kind, definition, expected):
    assert route_effects(kind=kind, definition=definition) == expected
