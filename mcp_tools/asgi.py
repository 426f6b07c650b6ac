"""The ASGI application: /mcp goes to the MCP SDK (behind origin checks and bearer auth), the rest to Django.

Django's ASGI handler refuses `lifespan`, and the SDK's session manager must run for the whole
process (it owns the task group 2025-11-25 sessions live in), so this wrapper answers lifespan
itself. Serve it with an ASGI server that sends lifespan events (uvicorn does).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from apps_registry.routes import celworker
from mcp_tools.app_server import APP_PATH, AppBearerAuth
from mcp_tools.auth import BearerAuth

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
API_PATH = "/api/"


class CharmingASGI:
    def __init__(
        self,
        django_app: Any,
        session_manager: StreamableHTTPSessionManager,
        mcp_app: Any = None,
        app_session_manager: StreamableHTTPSessionManager | None = None,
        api_app: Any = None,
    ) -> None:
        self.django_app = django_app
        # The REST API: Django's handling in one thread hop per request (charming/one_hop.py).
        self.api_app: ASGIApp = api_app or django_app
        self.session_manager = session_manager
        # Host/Origin first, so a foreign Origin gets 403 whether or not it carries a token.
        self.security = TransportSecurityMiddleware(session_manager.security_settings)
        self.mcp_app: ASGIApp = mcp_app or BearerAuth(session_manager.handle_request)
        # /mcp/apps/<app id>: one app's routes as tools (mcp_tools.app_server), when built with its manager.
        self.app_session_manager = app_session_manager
        self.app_mcp_app: ASGIApp | None = (
            AppBearerAuth(app_session_manager.handle_request) if app_session_manager is not None else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] == "http" and scope["path"] in (MCP_PATH, MCP_PATH + "/"):
            rejection = await self.security.validate_request(Request(scope), is_post=False)
            if rejection is not None:
                await rejection(scope, receive, send)
                return
            await self.mcp_app(scope, receive, send)
            return
        if scope["type"] == "http" and self.app_mcp_app is not None and APP_PATH.match(scope["path"]):
            rejection = await self.security.validate_request(Request(scope), is_post=False)
            if rejection is not None:
                await rejection(scope, receive, send)
                return
            await self.app_mcp_app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"].startswith(API_PATH):
            await self.api_app(scope, receive, send)
            return
        await self.django_app(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        try:
            async with self.session_manager.run(), self._app_sessions():
                celworker.prestart()  # so the first call using a comprehension does not wait for one to start
                await send({"type": "lifespan.startup.complete"})
                message = await receive()  # blocks until lifespan.shutdown
        except BaseException as exc:
            logger.exception("MCP session manager failed during %s", message["type"])
            phase = "startup" if message["type"] == "lifespan.startup" else "shutdown"
            await send({"type": f"lifespan.{phase}.failed", "message": repr(exc)})
            return
        await send({"type": "lifespan.shutdown.complete"})

    def _app_sessions(self) -> contextlib.AbstractAsyncContextManager[Any]:
        if self.app_session_manager is None:
            return contextlib.nullcontext()
        return self.app_session_manager.run()


def application_build(django_app: Any) -> CharmingASGI:
    """The whole service: Django plus /mcp and /mcp/apps/<id>, each with a fresh session manager (started via
    lifespan)."""
    from charming.one_hop import OneHopASGIHandler
    from mcp_tools.app_server import app_session_manager_build
    from mcp_tools.server import session_manager_build

    return CharmingASGI(
        django_app,
        session_manager_build(),
        app_session_manager=app_session_manager_build(),
        api_app=OneHopASGIHandler(),
    )
