"""Optional presentation hints in the author format: how a person's page draws a route. Never code.

Route keys (all optional; documented in docs/authoring.md and docs/pages.md):

- `title`: the route's heading on the page (1-100 characters), instead of its name made readable;
- `help`: a sentence or two for the people using the page (1-500 characters); `description` stays the
  agents' text;
- `view` (queries): `table`, `fields`, `figure` or `chart`, instead of the shape read from the output schema;
- `chart` (queries with `"view": "chart"`): `{"type": "bar" | "line", "x": key, "y": key or [keys]}`, the
  keys of the rows the route returns;
- `columns` (queries drawn as a table): which columns, in which order, each a property name or
  `{"key": name, "label": text}`;
- `row_actions` (queries drawn as a table): mutations offered on every row, each a route name (the row's
  `id` goes in as its `id` param) or `{"route": name, "param": name}`;
- `start` (queries): `true` on the app's start view, drawn first (at most one route per app);
- `form` (mutations): `false` keeps the route's form off the page (agents still call it).

Schema annotations, read by the page and checked here too (an `x-` keyword is ignored by JSON Schema):

- `x-charming-unit` on a number of an output schema: a currency code (`EUR`) or a short unit (`kg`, `%`);
- `x-charming-record` on a string of an input schema: the param names a record of that collection, and the
  form offers a picker of its records; `x-charming-label` beside it names the field the picker shows.

The compiler reports `hint_problems` when an app is saved and keeps `hints_of` each route in
`Route.hints`; apps_registry.pages.hints reads them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from apps_registry.values import json_repr

HINT_KEYS = ("title", "help", "view", "chart", "columns", "row_actions", "start", "form")
VIEWS = ("table", "fields", "figure", "chart")
CHART_TYPES = ("bar", "line")
MAX_TITLE = 100
MAX_HELP = 500
MAX_COLUMNS = 50
MAX_SERIES = 6  # lines or bars per row of a chart
MAX_ROW_ACTIONS = 6
MAX_UNIT = 12
UNIT = "x-charming-unit"
RECORD = "x-charming-record"
LABEL = "x-charming-label"
ANNOTATIONS = (UNIT, RECORD, LABEL)
SCHEMA_DEPTH = 64  # as deep as the schema nesting limit lets a schema go
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUERY_ONLY = ("view", "chart", "columns", "row_actions", "start")
_CHART_SHAPE = '{"type": "bar" or "line", "x": key, "y": key or [keys]}'


def hint_problems(definition: Any) -> list[dict[str, str]]:
    """Every problem with the presentation hints of a raw app definition, as {"path", "message"}."""
    problems: list[dict[str, str]] = []
    routes = definition.get("routes") if isinstance(definition, Mapping) else None
    if not isinstance(routes, Mapping):
        return problems
    collections = definition.get("collections")
    collection_names = set(collections) if isinstance(collections, Mapping) else set()
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
        if "help" in route:
            text = route["help"]
            if not isinstance(text, str) or not text.strip() or len(text) > MAX_HELP:
                problem("help", f"must be text of 1 to {MAX_HELP} characters, written for the people using the page")
        # (a route whose kind is not query or mutation is reported for that alone, not for its hints too)
        for key in _QUERY_ONLY:
            if key in route and kind == "mutation":
                problem(key, "is a hint for query routes only")
        if "form" in route and kind == "query":
            problem("form", "is a hint for mutation routes only")
        if "view" in route and route["view"] not in VIEWS:
            problem("view", f"must be one of {', '.join(VIEWS)}, got {json_repr(route['view'])}")
        if kind == "query":
            problems.extend(_chart_problems(route, path))
        if "columns" in route:
            problems.extend(_column_problems(route["columns"], f"{path}.columns"))
        if "row_actions" in route and kind == "query":
            problems.extend(_row_action_problems(route["row_actions"], routes, f"{path}.row_actions"))
        if "start" in route:
            if not isinstance(route["start"], bool):
                problem("start", "must be true or false")
            elif route["start"]:
                starts.append(name)
        if "form" in route and not isinstance(route["form"], bool):
            problem("form", "must be true or false")
        for key in ("input", "output"):
            problems.extend(_annotation_problems(route.get(key), f"{path}.{key}", key, collection_names))
    if len(starts) > 1:
        for name in starts[1:]:
            problems.append(
                {"path": f"$.routes.{name}.start", "message": f"only one start view per app; {starts[0]} is one"}
            )
    return problems


def rows_schema(output: Any) -> Mapping[str, Any] | None:
    """The schema of the rows a route returns, as a table or a chart draws them: an array's `items`, or the
    one array property of an object (a paged find's `items`); None when the output declares no rows."""
    if not isinstance(output, Mapping):
        return None
    if output.get("type") == "array" or "items" in output:
        items = output.get("items")
        return items if isinstance(items, Mapping) else {}
    properties = output.get("properties")
    if isinstance(properties, Mapping):
        lists = [p for p in properties.values() if isinstance(p, Mapping) and p.get("type") == "array"]
        if len(lists) == 1:
            items = lists[0].get("items")
            return items if isinstance(items, Mapping) else {}
    return None


def _chart_problems(route: Mapping[str, Any], path: str) -> list[dict[str, str]]:
    problems: list[dict[str, str]] = []
    chart = route.get("chart")
    if route.get("view") == "chart" and "chart" not in route:
        return [{"path": f"{path}.chart", "message": f'is required with "view": "chart": {_CHART_SHAPE}'}]
    if "chart" not in route:
        return problems
    if route.get("view") != "chart":
        problems.append({"path": f"{path}.view", "message": 'must be "chart" for the route\'s chart to be drawn'})
    if not isinstance(chart, Mapping):
        return [*problems, {"path": f"{path}.chart", "message": f"must be an object: {_CHART_SHAPE}"}]
    where = f"{path}.chart"
    extra = sorted(set(chart) - {"type", "x", "y"})
    if extra:
        problems.append({"path": where, "message": f"unknown key(s) {', '.join(extra)}; a chart takes: type, x, y"})
    if chart.get("type") not in CHART_TYPES:
        problems.append(
            {"path": f"{where}.type", "message": f"must be bar or line, got {json_repr(chart.get('type'))}"}
        )
    x = chart.get("x")
    if not isinstance(x, str) or not x:
        problems.append({"path": f"{where}.x", "message": "must be the key of the rows drawn along the x axis"})
        x = None
    y = chart.get("y")
    ys = [y] if isinstance(y, str) else y
    if not isinstance(ys, list) or not ys or len(ys) > MAX_SERIES or not all(isinstance(k, str) and k for k in ys):
        problems.append(
            {"path": f"{where}.y", "message": f"must be a key of the rows, or an array of 1 to {MAX_SERIES} keys"}
        )
        ys = []
    elif len(set(ys)) != len(ys):
        problems.append({"path": f"{where}.y", "message": "names a key more than once"})
    output = route.get("output")
    rows = rows_schema(output)
    if isinstance(output, Mapping) and rows is None and output.get("type") not in (None, "array"):
        problems.append(
            {
                "path": f"{path}.view",
                "message": f"a chart draws a list of rows, but the output is {json_repr(output.get('type'))}",
            }
        )
    properties = rows.get("properties") if rows else None
    if isinstance(properties, Mapping) and properties:
        known = ", ".join(properties)
        if x is not None and x not in properties:
            problems.append({"path": f"{where}.x", "message": f"{x!r} is not a key of the rows (they have: {known})"})
        for key in ys:
            if key not in properties:
                problems.append(
                    {"path": f"{where}.y", "message": f"{key!r} is not a key of the rows (they have: {known})"}
                )
                continue
            declared = properties[key].get("type") if isinstance(properties[key], Mapping) else None
            types = declared if isinstance(declared, list) else [declared]
            if declared is not None and not {"number", "integer"} & set(types):
                problems.append(
                    {
                        "path": f"{where}.y",
                        "message": f"{key!r} must hold numbers to be drawn, got {json_repr(declared)}",
                    }
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


def row_action_of(item: Any) -> tuple[str, str] | None:
    """(mutation, param) of one `row_actions` entry, or None when it is malformed."""
    if isinstance(item, str) and item:
        return item, "id"
    if isinstance(item, Mapping) and isinstance(item.get("route"), str) and item["route"]:
        param = item.get("param", "id")
        return (item["route"], param) if isinstance(param, str) and param else None
    return None


def _row_action_problems(actions: Any, routes: Mapping[str, Any], path: str) -> list[dict[str, str]]:
    if not isinstance(actions, list) or not actions or len(actions) > MAX_ROW_ACTIONS:
        return [{"path": path, "message": f"must be an array of 1 to {MAX_ROW_ACTIONS} mutation names"}]
    problems = []
    seen: set[str] = set()
    mutations = sorted(n for n, r in routes.items() if isinstance(r, Mapping) and r.get("kind") == "mutation")
    for index, item in enumerate(actions):
        where = f"{path}[{index}]"
        if isinstance(item, Mapping) and set(item) - {"route", "param"}:
            extra = ", ".join(sorted(set(item) - {"route", "param"}))
            problems.append({"path": where, "message": f"unknown key(s) {extra}; a row action takes: route, param"})
            continue
        parsed = row_action_of(item)
        if parsed is None:
            problems.append({"path": where, "message": 'must be a mutation\'s name or {"route": name, "param": name}'})
            continue
        name, param = parsed
        target = routes.get(name)
        if not isinstance(target, Mapping) or target.get("kind") != "mutation":
            known = ", ".join(mutations) or "none"
            problems.append(
                {"path": where, "message": f"{name!r} is not a mutation of this app (its mutations: {known})"}
            )
            continue
        if name in seen:
            problems.append({"path": where, "message": f"{name!r} is listed twice"})
        seen.add(name)
        schema = target.get("input")
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        if isinstance(properties, Mapping) and param not in properties:
            problems.append(
                {
                    "path": where,
                    "message": f"{name!r} takes no param {param!r} for the row's id "
                    f'(its params: {", ".join(properties) or "none"}); name one with {{"route": ..., "param": ...}}',
                }
            )
    return problems


def _schemas_in(schema: Any, path: str) -> Iterator[tuple[Mapping[str, Any], str]]:
    """Each subschema below `properties` and `items`, with its path (iteratively, to a bounded depth)."""
    stack: list[tuple[Any, str, int]] = [(schema, path, 0)]
    while stack:
        node, where, depth = stack.pop()
        if not isinstance(node, Mapping) or depth > SCHEMA_DEPTH:
            continue
        yield node, where
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            for key, sub in reversed(list(properties.items())):
                stack.append((sub, f"{where}.properties.{key}", depth + 1))
        if isinstance(node.get("items"), Mapping):
            stack.append((node["items"], f"{where}.items", depth + 1))


def _annotation_problems(schema: Any, path: str, side: str, collections: set[str]) -> list[dict[str, str]]:
    problems: list[dict[str, str]] = []
    for node, where in _schemas_in(schema, path):
        if not any(key in node for key in ANNOTATIONS):
            continue
        if UNIT in node:
            unit = node[UNIT]
            if not isinstance(unit, str) or not unit.strip() or len(unit) > MAX_UNIT:
                problems.append(
                    {
                        "path": f"{where}.{UNIT}",
                        "message": f"must be a currency code such as EUR or a short unit such as kg "
                        f"(1 to {MAX_UNIT} characters)",
                    }
                )
        if RECORD in node:
            collection = node[RECORD]
            if side != "input":
                problems.append({"path": f"{where}.{RECORD}", "message": "is read on input schemas only"})
            elif not isinstance(collection, str) or collection not in collections:
                known = ", ".join(sorted(collections)) or "none"
                problems.append(
                    {
                        "path": f"{where}.{RECORD}",
                        "message": f"must name a collection of this app (its collections: {known}), "
                        f"got {json_repr(collection)}",
                    }
                )
            declared = node.get("type")
            if (
                declared is not None
                and declared != "string"
                and not (isinstance(declared, list) and "string" in declared)
            ):
                problems.append(
                    {
                        "path": f"{where}.{RECORD}",
                        "message": f"a record's id is a string; the type is {json_repr(declared)}",
                    }
                )
        if LABEL in node:
            label = node[LABEL]
            if RECORD not in node:
                problems.append({"path": f"{where}.{LABEL}", "message": f"is read only beside {RECORD}"})
            elif not isinstance(label, str) or not _FIELD.match(label):
                problems.append(
                    {"path": f"{where}.{LABEL}", "message": "must be the name of a field of the records, like 'title'"}
                )
    return problems


def hints_of(route: Mapping[str, Any]) -> dict[str, Any]:
    """The hint keys of one raw route, as written (stored with the route)."""
    return {key: route[key] for key in HINT_KEYS if key in route}
