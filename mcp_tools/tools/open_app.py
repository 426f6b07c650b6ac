"""open_app: one of the caller's apps as an MCP App, shown inline by hosts that render ui://charming/app."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from apps_registry.pages.inline import InlineApp, app_inline
from mcp_tools.results import envelope_ok, error_message
from mcp_tools.tools import ToolCall, ToolResult, db
from mcp_tools.ui import HTML_META_KEY

SUMMARY_ROWS = 5  # rows of the view's data the text shows; the rest is in structuredContent
SUMMARY_CHARS = 2000


def _clip(text: str) -> str:
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS] + "…"


def _value(shown: InlineApp) -> dict[str, Any]:
    app = shown.app
    value: dict[str, Any] = {
        "app": {
            "id": str(app.id),
            "name": app.name,
            "description": app.description,
            "role": shown.role,
            "version": app.version,
        },
        "routes": shown.routes,
        "view": shown.view,
        "params": shown.params,
        "data": shown.data,
    }
    if shown.error is not None:
        value["view_error"] = shown.error.as_envelope_error(error_message(shown.error))
    return value


def _summary(value: dict[str, Any]) -> str:
    """What a model reads (and what a host without MCP Apps shows): the app, its views and actions, the data."""
    app = value["app"]
    lines = [f"Opened app '{app['name']}' (id {app['id']}) for the user; you are {app['role']}."]
    queries = [r["title"] for r in value["routes"] if r["kind"] == "query"]
    mutations = [r["title"] for r in value["routes"] if r["kind"] == "mutation"]
    if queries:
        lines.append("Views: " + ", ".join(queries) + ".")
    if mutations and app["role"] != "viewer":
        lines.append("Actions: " + ", ".join(mutations) + ".")
    if value.get("view_error"):
        lines.append(f"The view {value['view']} did not run: {value['view_error']['message']}")
    elif value["view"] is not None:
        data = value["data"]
        title = next((r["title"] for r in value["routes"] if r["name"] == value["view"]), value["view"])
        shown_as = f"{title} ({value['view']})"
        if isinstance(data, list):
            shown = json.dumps(data[:SUMMARY_ROWS], ensure_ascii=False, default=str)
            more = f" (first {SUMMARY_ROWS} of {len(data)})" if len(data) > SUMMARY_ROWS else ""
            lines.append(f"{shown_as} returned{more}: {_clip(shown)}")
        else:
            lines.append(f"{shown_as} returned: {_clip(json.dumps(data, ensure_ascii=False, default=str))}")
    lines.append(
        "Hosts that show MCP Apps display the app inline, where the user can use it; "
        "use query_app and mutate_app to read or change its data yourself."
    )
    return "\n".join(lines)


async def handle(call: ToolCall) -> ToolResult:
    args = call.arguments
    shown = await db(
        app_inline, actor=call.user, app_id=args["app_id"], view=args.get("view"), params=args.get("params")
    )
    value = _value(shown)
    result = envelope_ok(value, text=_summary(value))
    # The page's HTML for the iframe travels in _meta: the App script reads it, models do not.
    return types.CallToolResult(
        content=result.content,
        structured_content=result.structured_content,
        is_error=False,
        _meta={HTML_META_KEY: shown.html},
    )
