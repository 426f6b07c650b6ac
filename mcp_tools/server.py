"""The MCP server: tools/list serves the contracts verbatim; tools/call dispatches to one handler per tool.

Protocol errors (unknown tool, malformed request) stay JSON-RPC errors; everything a tool can get
wrong becomes a tool result. Handler exceptions never reach the SDK: on 2025-11-25 it would send
their text to the client.
"""

from __future__ import annotations

import copy
import logging
from typing import Any
from urllib.parse import urlsplit

import mcp_types as types
from django.conf import settings
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from apps_registry.access import ALL_SCOPES, scope_check
from apps_registry.redaction import redact
from apps_registry.values import clip_repr
from mcp_tools.arguments import arguments_check
from mcp_tools.auth import current_caller
from mcp_tools.confirmation import STATE_SEAL_GRACE_SECONDS, confirmation_ttl_seconds, state_key
from mcp_tools.guide import GUIDE_URI, get_prompt, list_prompts, list_resources, read_resource
from mcp_tools.registry import tool_named, tools_allowed
from mcp_tools.results import error_result
from mcp_tools.sessions import UserCappedSessionManager
from mcp_tools.tools import ToolCall, ToolResult
from mcp_tools.ui import UI_EXTENSION

logger = logging.getLogger(__name__)

SERVER_NAME = "charming"
SERVER_VERSION = "0.1.0"
INSTRUCTIONS = (
    "Charming hosts the user's small apps (a budget, a to-do list...). Start with list_apps to find an app_id, "
    "get_app to learn its routes, then query_app to read and mutate_app to change data; open_app shows an app to "
    "the user (inline in the chat, where the host shows MCP Apps) to use it themselves. Tell the user about "
    "advisories of kind feedback-response: they are staff answers to the user's feedback. To build or change an "
    f"app, read the guide {GUIDE_URI} (or use the prompt build_app), then check_app, create_app, get_app_source "
    "and update_app."
)


def tools_for(protocol_version: str, scopes: frozenset[str] = ALL_SCOPES) -> list[dict[str, Any]]:
    """The contracts a token with `scopes` may call, as served on `protocol_version` (2026-07-28 removed
    `execution` from the tool type)."""
    tools = [copy.deepcopy(tool.contract) for tool in tools_allowed(scopes)]
    if protocol_version in MODERN_PROTOCOL_VERSIONS:
        for tool in tools:
            tool.pop("execution", None)
    return tools


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    # ttl 0 and private: the list depends on the token (Caller.listed_scopes), so clients must not share caches.
    caller = current_caller.get()
    scopes = caller.listed_scopes if caller is not None else frozenset()
    return types.ListToolsResult.model_validate(
        {"tools": tools_for(ctx.protocol_version, scopes), "ttlMs": 0, "cacheScope": "private"}
    )


async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> ToolResult:
    caller = current_caller.get()
    tool = tool_named(params.name)
    if tool is None:
        available = ", ".join(t.name for t in tools_allowed(caller.listed_scopes if caller else frozenset()))
        shown = clip_repr(redact(params.name))
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {shown}. Available: {available}.")
    envelope = tool.answers_envelope
    if caller is None:  # the ASGI auth wrapper always sets it; fail closed if it did not
        logger.error("MCP tools/call %s reached without an authenticated caller", params.name)
        return error_result(RuntimeError("no caller"), envelope=envelope, tool=params.name)
    try:
        # The ASGI wrapper already answered 403 to a call without the tool's scope; this is the backstop.
        scope_check(scopes=caller.scopes, need=tool.need)
        arguments = arguments_check(params.name, params.arguments)
        return await tool.handler(ToolCall(user=caller.user, arguments=arguments, params=params, ctx=ctx))
    except Exception as error:  # noqa: BLE001 - domain errors become their envelope, anything else a generic one
        return error_result(error, envelope=envelope, tool=params.name)


def _input_schema(name: str) -> dict[str, Any] | None:
    tool = tool_named(name)
    return tool.contract["inputSchema"] if tool else None


class CharmingServer(Server[Any]):
    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        # The 2025-11-25 `initialize` answer: that version's ServerCapabilities has no `extensions` (2026-07-28's
        # server/discover has), so the extensions are declared under `experimental` there, where clients look.
        experimental = {**self.extensions, **(experimental_capabilities or {})}
        return super().create_initialization_options(notification_options, experimental, extensions)


def server_build() -> Server[Any]:
    server: Server[Any] = CharmingServer(
        SERVER_NAME,
        version=SERVER_VERSION,
        title="Charming",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        get_tool_input_schema=_input_schema,
    )
    # MCP Apps (SEP-1865): open_app's view, ui://charming/app, for hosts that render it (docs/mcp.md, "MCP Apps").
    server.extensions[UI_EXTENSION] = {}
    # The SDK wraps every message in an OpenTelemetry span by default ("drop it from this list to opt out", its
    # comment says). Charming installs no exporter, so each span is a no-op that still cost ~2% of a tool call's
    # event-loop time (docs/performance.md).
    server.middleware[:] = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    # Seals delete_app's requestState (2026-07-28): AES-GCM, bound to tool, arguments, user and expiry. The seal
    # outlives the confirmation by a grace period, so an expired prompt reaches mcp_tools.confirmation and gets its
    # confirmation_required "expired, call again" rather than the SDK's bare -32602.
    seal_ttl = float(confirmation_ttl_seconds() + STATE_SEAL_GRACE_SECONDS)
    server.middleware.append(
        RequestStateBoundary(
            RequestStateSecurity(keys=[state_key()], ttl=seal_ttl),
            default_audience=SERVER_NAME,
        )
    )
    return server


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def transport_security() -> TransportSecuritySettings:
    """DNS-rebinding protection: Host must be one we serve; a browser Origin must be ours (else 403)."""
    hosts = list(settings.CHARMING_MCP_ALLOWED_HOSTS)
    if not hosts:
        for host in settings.ALLOWED_HOSTS:
            if host and host != "*" and not host.startswith("."):
                hosts += [host, f"{host}:*"]
    origins = list(settings.CHARMING_MCP_ALLOWED_ORIGINS) or [_origin(settings.CHARMING_PUBLIC_URL)]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def session_manager_build(server: Server[Any] | None = None) -> UserCappedSessionManager:
    """A session manager serving both protocol versions on one URL; run it once per process (lifespan).

    2025-11-25 sessions are capped per user (mcp_tools.sessions) and expire after
    CHARMING_MCP_SESSION_IDLE_SECONDS without a request in flight (an open GET stream counts as one).
    """
    return UserCappedSessionManager(
        app=server or server_build(),
        stateless=False,
        json_response=False,
        security_settings=transport_security(),
        session_idle_timeout=float(settings.CHARMING_MCP_SESSION_IDLE_SECONDS),
    )
