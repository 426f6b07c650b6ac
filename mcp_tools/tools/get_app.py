"""get_app: an app, its routes with their schemas, and its open advisories."""

from __future__ import annotations

import json
from typing import Any

from apps_registry import selectors
from apps_registry.access import app_for
from apps_registry.cursors import items_within_budget
from apps_registry.links import app_page_url, public_page_url
from apps_registry.models import Route
from apps_registry.oauth.policy import app_mcp_url
from apps_registry.services.advisories import advisories_deliver
from mcp_tools.guide import GUIDE_URI
from mcp_tools.results import TOOL_FOR_KIND, advisories_as_contract, envelope_ok
from mcp_tools.tools import ToolCall, ToolResult, db


def route_as_contract(route: Route) -> dict[str, Any]:
    return {
        "name": route.name,
        "kind": route.kind,
        "description": route.description,
        "input": route.input_schema or {"type": "object"},
        "output": route.output_schema,
    }


def _describe(
    user: Any, app_id: str, cursor: str | None
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    app, role = app_for(actor=user, app_id=app_id, need="read")
    routes = [route_as_contract(route) for route in selectors.routes_after(app, cursor)]
    # The routes fill the result budget at most: past it they continue on the next call, by cursor.
    kept = items_within_budget(routes)
    paging: dict[str, Any] = {}
    if kept < len(routes):
        paging = {"next_cursor": selectors.route_cursor(app, routes[kept - 1]["name"]), "truncated": True}
    value = {
        "id": str(app.id),
        "name": app.name,
        "description": app.description,
        "role": role,
        "version": app.version,
        "mcp_url": app_mcp_url(app.id),
        "page_url": app_page_url(app.id),
        "authoring_guide": GUIDE_URI,
        "routes": routes[:kept],
    }
    public = selectors.public_listing_of(app)
    if public is not None:
        value["public_url"] = public_page_url(public.handle)
    return value, paging, advisories_as_contract(advisories_deliver(actor=user, app=app))


async def handle(call: ToolCall) -> ToolResult:
    value, paging, advisories = await db(_describe, call.user, call.arguments["app_id"], call.arguments.get("cursor"))
    lines = [
        f"App '{value['name']}' (id {value['id']}, version {value['version']}); you are {value['role']}.",
        f"Its page, for the person to open in a browser: {value['page_url']}",
        f"Its own MCP server, with each route as a tool: {value['mcp_url']}",
    ]
    if "public_url" in value:
        lines.append(f"It is public: anyone may open {value['public_url']}")
    if value["description"]:
        lines.append(value["description"])
    if not value["routes"]:
        lines.append("It has no routes yet.")
    for route in value["routes"]:
        tool = TOOL_FOR_KIND[route["kind"]]
        lines.append(
            f"\n{route['name']} ({route['kind']}, call with {tool}): {route['description'] or 'no description'}"
            f"\n  input: {json.dumps(route['input'], ensure_ascii=False)}"
            f"\n  output: {json.dumps(route['output'], ensure_ascii=False)}"
        )
    if paging:
        lines.append(
            f"\nMore routes follow (this result was cut to fit the size budget): call get_app with cursor "
            f"{paging['next_cursor']!r} for the rest."
        )
    return envelope_ok(value, advisories=advisories, text="\n".join(lines), paging=paging)
