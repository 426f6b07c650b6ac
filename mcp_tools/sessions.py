"""2025-11-25 sessions, at most CHARMING_MCP_SESSIONS_PER_USER per user in each process.

The SDK's session manager caps sessions only globally (10,000 per process), so one user's flood of
`initialize` calls would lock every other user out until the flood's sessions expired. This subclass
counts each user's open sessions (the session owner's subject, our user id, across all their tokens
and OAuth clients) where the SDK admits and discards them, and refuses one more with HTTP 429.
"""

from __future__ import annotations

import json

from django.conf import settings
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import INVALID_REQUEST
from starlette.responses import Response
from starlette.types import Receive, Scope, Send


class SessionsPerUserExceeded(Exception):
    """Raised where the SDK admits a session (nothing sent yet), answered by `handle_request`."""

    def __init__(self, limit: int, idle_seconds: float | None) -> None:
        expiry = f" or wait: a session expires after {idle_seconds:g} seconds without a request" if idle_seconds else ""
        super().__init__(
            f"Too many open MCP sessions: you have {limit}, the most one user may keep open. Close the sessions "
            f"you no longer use (HTTP DELETE /mcp with their Mcp-Session-Id; clients do this when they disconnect)"
            f"{expiry}, then initialize again."
        )

    def response(self) -> Response:
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": str(self)}}
        return Response(json.dumps(body), status_code=429, media_type="application/json")


def _user_of(requestor: AuthorizationContext | None) -> str | None:
    return requestor["subject"] if requestor is not None else None


class UserCappedSessionManager(StreamableHTTPSessionManager):
    """The SDK's manager with a per-user cap on open sessions (read at each admission, so tests may change it)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._sessions_of: dict[str, set[str]] = {}

    def open_sessions(self, user: str) -> int:
        """Sessions `user` (a user id) has open in this process: not ended, even if the SDK has yet to forget them
        (it answers a DELETE before it discards the session)."""
        return sum(
            1
            for session_id in self._sessions_of.get(user, ())
            if (transport := self._server_instances.get(session_id)) is not None and not transport.is_terminated
        )

    async def handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().handle_request(scope, receive, send)
        except SessionsPerUserExceeded as refusal:
            await refusal.response()(scope, receive, send)

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        # Called under the SDK's session-creation lock with no await in between: check and count are one step.
        user = _user_of(requestor)
        limit = settings.CHARMING_MCP_SESSIONS_PER_USER
        if user is not None and self.open_sessions(user) >= limit:
            raise SessionsPerUserExceeded(limit, self.session_idle_timeout)
        transport = super()._admit_session(requestor)
        if transport is not None and user is not None:
            assert transport.mcp_session_id is not None
            self._sessions_of.setdefault(user, set()).add(transport.mcp_session_id)
        return transport

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        # However a session ends (DELETE, idle expiry, a refused opening request, a crash) the SDK discards it
        # here, possibly twice; forget it while the SDK still knows its owner (it forgets before its first await).
        user = _user_of(self._session_owners.get(session_id))
        if user is not None and (sessions := self._sessions_of.get(user)) is not None:
            sessions.discard(session_id)
            if not sessions:
                del self._sessions_of[user]
        await super()._discard_session(session_id, transport)
