"""The MCP server's middleware: the requestState seal, and no per-message OpenTelemetry span (no exporter here)."""

from __future__ import annotations

from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary

from mcp_tools.server import server_build


def test_the_server_seals_request_state_and_opens_no_telemetry_span_per_message():
    assert any(isinstance(m, OpenTelemetryMiddleware) for m in Server("plain").middleware)  # the SDK's default
    middleware = server_build().middleware
    assert not [m for m in middleware if isinstance(m, OpenTelemetryMiddleware)]
    assert [type(m) for m in middleware] == [RequestStateBoundary]
