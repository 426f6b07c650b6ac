"""One handler per tool: check the arguments, call one service, shape the result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext

# Handlers run their services and selectors through db(): one unit of database work each (mcp_tools.database).
from mcp_tools.database import db

__all__ = ["Handler", "ToolCall", "ToolResult", "db"]

ToolResult = types.CallToolResult | types.InputRequiredResult


@dataclass(frozen=True)
class ToolCall:
    """What a handler gets: the caller, its already-checked arguments and the SDK's request context."""

    user: Any
    arguments: dict[str, Any]
    params: types.CallToolRequestParams
    ctx: ServerRequestContext[Any, Any]


Handler = Callable[[ToolCall], Awaitable[ToolResult]]
