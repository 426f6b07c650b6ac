"""The MCP tool set: one record per tool (its name, its contract, its handler, how it answers), in one tuple."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_tools.contracts import contract_load
from mcp_tools.tools import Handler, authoring, delete_app, get_app, list_apps, run_route, send_feedback


@dataclass(frozen=True)
class McpTool:
    name: str
    # Served verbatim by tools/list; its inputSchema also checks each call's arguments.
    contract: dict[str, Any]
    handler: Handler
    # Whether its results are the `{ok, value?, error?, advisories?}` envelope in structuredContent;
    # delete_app's output schema describes success only, so its errors are content with isError.
    answers_envelope: bool


def _tool(name: str, handler: Handler, *, answers_envelope: bool = True) -> McpTool:
    return McpTool(name=name, contract=contract_load(name), handler=handler, answers_envelope=answers_envelope)


# In the order tools/list serves them.
TOOLS: tuple[McpTool, ...] = (
    _tool("list_apps", list_apps.handle),
    _tool("get_app", get_app.handle),
    _tool("query_app", run_route.handle_query),
    _tool("mutate_app", run_route.handle_mutate),
    _tool("send_feedback", send_feedback.handle),
    _tool("delete_app", delete_app.handle, answers_envelope=False),
    _tool("create_app", authoring.handle_create),
    _tool("update_app", authoring.handle_update),
    _tool("get_app_source", authoring.handle_source),
    _tool("check_app", authoring.handle_check),
)
_BY_NAME = {tool.name: tool for tool in TOOLS}


def tool_named(name: str) -> McpTool | None:
    return _BY_NAME.get(name)
