"""One handler per tool: check the arguments, call one service, shape the result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import mcp_types as types
from asgiref.sync import sync_to_async
from mcp.server.context import ServerRequestContext

P = ParamSpec("P")
R = TypeVar("R")

ToolResult = types.CallToolResult | types.InputRequiredResult


@dataclass(frozen=True)
class ToolCall:
    """What a handler gets: the caller, its already-checked arguments and the SDK's request context."""

    user: Any
    arguments: dict[str, Any]
    params: types.CallToolRequestParams
    ctx: ServerRequestContext[Any, Any]


Handler = Callable[[ToolCall], Awaitable[ToolResult]]


async def db(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run a service or selector (sync ORM code) from an async handler.

    It runs on the HTTP request's own thread (see mcp_tools.auth.BearerAuth), which closes the
    request's database connections when the request ends.
    """
    return await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)
