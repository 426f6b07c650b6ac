"""Helpers shared by the route engine tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from apps_registry.models import Record
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str) -> dict[str, Any]:
    return json.loads((EXAMPLES / f"{name}.json").read_text())


def one_route_app(
    owner, steps: list[Any], *, kind: str = "mutation", output: Any = None, input_schema=None, tests=None, **extra
):
    """An app with a single route 'r' (plus any extra routes) and the collections 'items' and 'counters'; with
    `tests`, its definition carries them (so no route of it raises the untested-route advisory)."""
    route: dict[str, Any] = {"kind": kind, "steps": steps}
    if input_schema is not None:
        route["input"] = input_schema
    if output is not None:
        route["output"] = output
    definition = {
        "name": "Test",
        "collections": {"items": {}, "counters": {}},
        "routes": {"r": route, **copy.deepcopy(extra)},
    }
    if tests is not None:
        definition["tests"] = tests
    return app_definition_save(actor=owner, definition=definition)


def run(actor, app, op: str = "r", params: Any = None, kind: str = "mutation") -> Any:
    return route_run(actor=actor, app_id=app.id, op=op, params=params, kind=kind).value


def records(app, collection: str | None = None) -> dict[str, dict[str, Any]]:
    qs = Record.objects.filter(storage__app=app)
    if collection:
        qs = qs.filter(collection=collection)
    return {r.record_id: r.data for r in qs}
