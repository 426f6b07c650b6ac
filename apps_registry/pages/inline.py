"""The app as an MCP App shows it inline in a chat (open_app, ui://charming/app): the same panels as the app page
(views, forms, row actions, charts), drawn by the same templates, plus the data a host's model reads.

The page's renderer is the only one: the App script in the host's iframe injects this HTML and turns its forms
into tools/call of query_app, mutate_app and open_app (apps_registry/static/charming/mcp-app.js). Access is
read through `app_for` and every route runs through `route_run`, as on the page and over MCP.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, QueryDict
from django.template.loader import render_to_string

from apps_registry.access import app_for, role_allows
from apps_registry.exceptions import CharmingError, UnknownOp
from apps_registry.models import App, Route
from apps_registry.pages.actions import record_params, shown_collections
from apps_registry.pages.app_views import (
    PageContext,
    QueryPanel,
    _recent_panels,
    collection_hidden,
    query_panel,
)
from apps_registry.pages.hints import route_hints, route_title
from apps_registry.pages.paging import CURSOR, is_paged, without_cursor
from apps_registry.pages.schema_forms import SchemaField, encode_choice, schema_form
from apps_registry.pages.words import people_text
from apps_registry.selectors import record_counts_of, routes_of
from apps_registry.services.routes import route_run

INLINE_TEMPLATE = "apps/_inline_app.html"


@dataclass(frozen=True)
class InlineApp:
    """What open_app answers: the app, its routes and hints, the view shown and its data, and the HTML."""

    app: App
    role: str
    routes: list[dict[str, Any]]
    view: str | None  # the query route shown first (None: the app has no view that runs without a filter)
    params: dict[str, Any]
    data: Any
    error: CharmingError | None  # why the view did not run (a bad filter...), worded by the transport
    html: str


def route_as_inline(route: Route) -> dict[str, Any]:
    hints = route_hints(route)
    return {
        "name": route.name,
        "kind": route.kind,
        "title": route_title(route),
        "description": route.description,
        "help": hints.help,
        "input": route.input_schema_ordered or {"type": "object"},
        "output": route.output_schema_ordered,
        "hints": route.hints if isinstance(route.hints, dict) else {},
    }


def _start_view(queries: list[Route], view: str | None) -> Route | None:
    if view is not None:
        for route in queries:
            if route.name == view:
                return route
        names = ", ".join(sorted(r.name for r in queries)) or "none"
        raise UnknownOp(f"This app has no view (query route) named {view[:100]!r}. Its views: {names}.")
    started = [r for r in queries if route_hints(r).start]
    if started:
        return started[0]
    for route in queries:
        schema = route.input_schema_ordered if isinstance(route.input_schema_ordered, dict) else {}
        if not schema.get("required"):
            return route
    return None


def _leaves(fields: list[SchemaField]) -> list[SchemaField]:
    found: list[SchemaField] = []
    for top in fields:
        found.extend(f for f in top.walk() if f.widget != "fieldset")
    return found


def _at(params: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def params_as_filters(route: Route, params: dict[str, Any]) -> QueryDict:
    """A view's typed `params` as the text its filter form would have sent (the inverse of `form_parse`), so the
    page's own panel draws the view with those filters filled in."""
    schema = route.input_schema_ordered
    query = QueryDict(mutable=True)
    if is_paged(route.input_schema_ordered, route.output_schema_ordered):
        schema = without_cursor(schema)
        if isinstance(params.get(CURSOR), str):  # a later page: the panel reads its cursor as the page's link gave it
            query[f"{route.name}.{CURSOR}"] = params[CURSOR]
    form = schema_form(schema, id_prefix=f"q-{route.name}", prefix=f"{route.name}.", records=record_params(route))
    if form.json_only:
        for top in form.fields:
            query[top.html_name] = json.dumps(params, ensure_ascii=False)
        return query
    for spec in _leaves(form.fields):
        present, value = _at(params, spec.name)
        if not present or value is None:
            continue
        if spec.widget == "checkbox":
            if value is True:
                query[spec.html_name] = "on"
        elif spec.widget == "tristate":
            query[spec.html_name] = "true" if value is True else "false"
        elif spec.widget in ("select", "multiselect"):
            for item in value if isinstance(value, list) else [value]:
                query.appendlist(spec.html_name, encode_choice(item))
        elif spec.widget == "list" and isinstance(value, list):
            joiner = "\n" if spec.item_type == "string" else ","
            query[spec.html_name] = joiner.join(str(item) for item in value)
        elif spec.widget == "json" or isinstance(value, (dict, list)):
            query[spec.html_name] = json.dumps(value, ensure_ascii=False)
        else:
            query[spec.html_name] = str(value)
    return query


def app_inline(*, actor: Any, app_id: Any, view: str | None = None, params: dict[str, Any] | None = None) -> InlineApp:
    """The app as open_app shows it: NotFound for an app the actor cannot read (as everywhere), UnknownOp for a
    view it does not have; the view's own refusal (a bad filter) is its `error`, the rest still drawn."""
    app, role = app_for(actor=actor, app_id=app_id, need="read")
    routes = list(routes_of(app))
    ordered = sorted((r for r in routes if r.kind == "query"), key=lambda r: not route_hints(r).start)
    start = _start_view(ordered, view)
    params = params or {}
    data: Any = None
    error: CharmingError | None = None
    if start is not None:
        try:
            data = route_run(actor=actor, app_id=app.id, op=start.name, params=params, kind="query").value
        except CharmingError as refused:
            error = refused
    filters = params_as_filters(start, params) if start is not None and params else QueryDict()
    html = _render(actor, app, role, routes, ordered, filters)
    return InlineApp(
        app=app,
        role=role,
        routes=[route_as_inline(r) for r in routes],
        view=start.name if start is not None else None,
        params=params,
        data=data,
        error=error,
        html=html,
    )


def _render(actor: Any, app: App, role: str, routes: list[Route], ordered: list[Route], filters: QueryDict) -> str:
    request = HttpRequest()
    request.user = actor
    can_mutate = role_allows(role, "mutate")
    page = PageContext(request, app, routes, filters, can_mutate=can_mutate)
    queries: list[QueryPanel] = [query_panel(page, r) for r in ordered]
    mutations = page.mutation_panels()
    mutation_routes = [panel.route for panel in mutations]
    counts = record_counts_of(app)
    shown = {
        c
        for p in queries
        if p.view is not None and p.view.shape != "empty" and not p.form.required_names()
        for c in shown_collections(p.route)
    }
    recent = _recent_panels(page, counts, mutation_routes, shown, keep=set())
    context = {
        "app": app,
        "role": role,
        "can_mutate": can_mutate,
        "queries": queries,
        "mutations": mutations,
        "recent": recent,
        "has_start": any(route_hints(r).start for r in ordered),
        "has_records": any(n for name, n in counts.items() if not collection_hidden(app, name)),
        "lead": people_text(app.description, page.titles),
        "back": "",
        "page_url": page.page_url,
    }
    # No request, so no CSRF token in the row forms: they never post to Charming (the App script sends them as
    # tools/call, with the user's token).
    return render_to_string(INLINE_TEMPLATE, context)
