"""One handler per tool: check the arguments, call one service, shape the result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import close_old_connections
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


def _then_release_connection(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    # What Django does when a request finishes: drop the connection if broken or past CONN_MAX_AGE.
    # The auth wrapper did the request-start check on this same thread, so the call reuses its connection.
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()


async def db(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run a service or selector (sync ORM code) from an async handler."""
    return await sync_to_async(_then_release_connection, thread_sensitive=True)(fn, *args, **kwargs)
