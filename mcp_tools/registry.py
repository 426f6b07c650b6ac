"""The MCP tool set: one record per tool (its name, its contract, its handler, the scope it takes, how it
answers), in one tuple."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps_registry.access import Need, Scope, scope_for
from mcp_tools.contracts import contract_load
from mcp_tools.tools import (
    Handler,
    authoring,
    bundles,
    changes,
    delete_app,
    get_app,
    hooks,
    list_apps,
    open_app,
    run_route,
    schedules,
    send_feedback,
    templates,
)


@dataclass(frozen=True)
class McpTool:
    name: str
    # Served verbatim by tools/list; its inputSchema also checks each call's arguments.
    contract: dict[str, Any]
    handler: Handler
    # What the tool does (an access.Need) and so the token scope it takes (access.NEED_SCOPES): tools/list
    # shows the tool only to tokens carrying the scope; a tools/call without it gets HTTP 403 insufficient_scope.
    need: Need
    scope: Scope
    # Whether its results are the `{ok, value?, error?, advisories?}` envelope in structuredContent;
    # delete_app's output schema describes success only, so its errors are content with isError.
    answers_envelope: bool


def _tool(name: str, handler: Handler, *, need: Need, answers_envelope: bool = True) -> McpTool:
    return McpTool(
        name=name,
        contract=contract_load(name),
        handler=handler,
        need=need,
        scope=scope_for(need),
        answers_envelope=answers_envelope,
    )


# In the order tools/list serves them. `need` is what the tool does (access.py gives its scope); an
# authoring tool declares need="author".
TOOLS: tuple[McpTool, ...] = (
    _tool("list_apps", list_apps.handle, need="read"),
    _tool("get_app", get_app.handle, need="read"),
    _tool("open_app", open_app.handle, need="read"),
    _tool("query_app", run_route.handle_query, need="query"),
    _tool("mutate_app", run_route.handle_mutate, need="mutate"),
    _tool("send_feedback", send_feedback.handle, need="feedback"),
    _tool("delete_app", delete_app.handle, need="delete", answers_envelope=False),
    _tool("create_app", authoring.handle_create, need="author"),
    _tool("update_app", authoring.handle_update, need="author"),
    _tool("get_app_source", authoring.handle_source, need="author"),
    _tool("check_app", authoring.handle_check, need="author"),
    _tool("list_changes", changes.handle_list, need="read"),
    _tool("revert_change", changes.handle_revert, need="mutate"),
    _tool("list_schedules", schedules.handle_list, need="read"),
    _tool("create_schedule", schedules.handle_create, need="author"),
    _tool("update_schedule", schedules.handle_update, need="author"),
    _tool("delete_schedule", schedules.handle_delete, need="author"),
    _tool("list_hooks", hooks.handle_list, need="author"),
    _tool("create_hook", hooks.handle_create, need="author"),
    _tool("rotate_hook_secret", hooks.handle_rotate, need="author"),
    _tool("delete_hook", hooks.handle_delete, need="author"),
    _tool("search_templates", templates.handle_search, need="read"),
    _tool("remix_app", templates.handle_remix, need="author"),
    _tool("export_app", bundles.handle_export, need="author"),
)
_BY_NAME = {tool.name: tool for tool in TOOLS}


def tool_named(name: str) -> McpTool | None:
    return _BY_NAME.get(name)


def tools_allowed(scopes: frozenset[str]) -> tuple[McpTool, ...]:
    """The tools a token with `scopes` may see and call, in tools/list order."""
    return tuple(tool for tool in TOOLS if tool.scope in scopes)
