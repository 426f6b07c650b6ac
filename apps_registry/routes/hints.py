"""Optional presentation hints in the author format: how a person's page draws a route. Never code.

Route keys (all optional; documented in docs/authoring.md and docs/pages.md):

- `title`: the route's heading on the page (1-100 characters), instead of its name made readable;
- `view` (queries): `table`, `fields` or `figure`, instead of the shape read from the output schema;
- `columns` (queries drawn as a table): which columns, in which order, each a property name or
  `{"key": name, "label": text}`;
- `start` (queries): `true` on the app's start view, drawn first (at most one route per app);
- `form` (mutations): `false` keeps the route's form off the page (agents still call it).

The compiler reports `hint_problems` when an app is saved and keeps `hints_of` each route in
`Route.hints`; apps_registry.pages.hints reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apps_registry.values import json_repr

HINT_KEYS = ("title", "view", "columns", "start", "form")
VIEWS = ("table", "fields", "figure")
MAX_TITLE = 100
MAX_COLUMNS = 50


def hint_problems(definition: Any) -> list[dict[str, str]]:
    """Every problem with the presentation hints of a raw app definition, as {"path", "message"}."""
    problems: list[dict[str, str]] = []
    routes = definition.get("routes") if isinstance(definition, Mapping) else None
    if not isinstance(routes, Mapping):
        return problems
    starts = []
    for name, route in routes.items():
        if not isinstance(route, Mapping):
            continue
        path = f"$.routes.{name}"
        kind = route.get("kind")

        def problem(key: str, message: str, path: str = path) -> None:
            problems.append({"path": f"{path}.{key}", "message": message})

        if "title" in route:
            title = route["title"]
            if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE:
                problem("title", f"must be text of 1 to {MAX_TITLE} characters")
        for key in ("view", "columns", "start"):
            if key in route and kind != "query":
                problem(key, "is a hint for query routes only")
        if "form" in route and kind != "mutation":
            problem("form", "is a hint for mutation routes only")
        if "view" in route and route["view"] not in VIEWS:
            problem("view", f"must be one of {', '.join(VIEWS)}, got {json_repr(route['view'])}")
        if "columns" in route:
            problems.extend(_column_problems(route["columns"], f"{path}.columns"))
        if "start" in route:
            if not isinstance(route["start"], bool):
                problem("start", "must be true or false")
            elif route["start"]:
                starts.append(name)
        if "form" in route and not isinstance(route["form"], bool):
            problem("form", "must be true or false")
    if len(starts) > 1:
        for name in starts[1:]:
            problems.append(
                {"path": f"$.routes.{name}.start", "message": f"only one start view per app; {starts[0]} is one"}
            )
    return problems


def _column_problems(columns: Any, path: str) -> list[dict[str, str]]:
    if not isinstance(columns, list) or not columns or len(columns) > MAX_COLUMNS:
        return [{"path": path, "message": f"must be an array of 1 to {MAX_COLUMNS} columns"}]
    problems = []
    seen: set[str] = set()
    for index, column in enumerate(columns):
        where = f"{path}[{index}]"
        key = column.get("key") if isinstance(column, Mapping) else column
        if not isinstance(key, str) or not key:
            problems.append({"path": where, "message": 'must be a property name or {"key": name, "label": text}'})
            continue
        if isinstance(column, Mapping):
            extra = set(column) - {"key", "label"}
            label = column.get("label", "")
            if extra:
                problems.append({"path": where, "message": f"unknown key(s) {', '.join(sorted(extra))}"})
            if not isinstance(label, str) or len(label) > MAX_TITLE:
                problems.append(
                    {"path": f"{where}.label", "message": f"must be text of at most {MAX_TITLE} characters"}
                )
        if key in seen:
            problems.append({"path": where, "message": f"column {key!r} is listed twice"})
        seen.add(key)
    return problems


def hints_of(route: Mapping[str, Any]) -> dict[str, Any]:
    """The hint keys of one raw route, as written (stored with the route)."""
    return {key: route[key] for key in HINT_KEYS if key in route}
