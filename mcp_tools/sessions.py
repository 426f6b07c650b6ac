"""2025-11-25 sessions: capped per user and per client address in each process, the oldest idle ones evicted when
the process is full, and request ids unique among a session's requests in flight.

The SDK's session manager caps sessions only globally (10,000 per process, then `503 Too many open sessions` for
everyone), so one user's flood of `initialize` calls, or many accounts signed up from one address, could lock
every other user out until the flood's sessions expired. This subclass:

- counts each user's open sessions (the session owner's subject, our user id, across all their tokens and OAuth
  clients) and each client address's (an IPv6 address by its /64, as the rate limits count it), where the SDK
  admits and discards them, and refuses one more beyond either cap with HTTP 429;
- at the process's ceiling (`CHARMING_MCP_SESSIONS_MAX`), ends the session that has been idle longest (no request
  in flight, no open GET stream) to make room, rather than refusing the newcomer; only when every session is busy
  is `initialize` answered 503;
- refuses a POST whose JSON-RPC request id is already used by a request of the same session still in flight
  (HTTP 400, JSON-RPC -32600), before the SDK sees it: the SDK keys a request's response stream by its id, so a
  second request with the id of one in flight took over the first's stream (one was never answered, the other
  could get the wrong answer).
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
from typing import Any

from django.conf import settings
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext, authorization_context
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.dispatcher import coerce_request_id
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from apps_registry.services.rate_limits import client_address_key

logger = logging.getLogger(__name__)

# Ids of requests whose answer never reached the client (it disconnected first) stay reserved, since the server may
# still be running them; at most this many per session, the oldest forgotten first.
UNANSWERED_IDS_KEPT = 1000

# The client address of the request being admitted (set by handle_request; `_admit_session` is called in its task).
_admitting_address: contextvars.ContextVar[str | None] = contextvars.ContextVar("charming_admitting_address")


class SessionRefused(Exception):
    """Raised where the SDK admits a session (nothing sent yet), answered by `handle_request`."""

    status = 429
    code = INVALID_REQUEST
    headers: dict[str, str] = {}

    def response(self) -> Response:
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": self.code, "message": str(self)}}
        return Response(json.dumps(body), status_code=self.status, media_type="application/json", headers=self.headers)


def _expiry(idle_seconds: float | None) -> str:
    return f" or wait: a session expires after {idle_seconds:g} seconds without a request" if idle_seconds else ""


class SessionsPerUserExceeded(SessionRefused):
    def __init__(self, limit: int, idle_seconds: float | None) -> None:
        super().__init__(
            f"Too many open MCP sessions: you have {limit}, the most one user may keep open. Close the sessions "
            f"you no longer use (HTTP DELETE /mcp with their Mcp-Session-Id; clients do this when they disconnect)"
            f"{_expiry(idle_seconds)}, then initialize again."
        )


class SessionsPerAddressExceeded(SessionRefused):
    def __init__(self, limit: int, idle_seconds: float | None) -> None:
        super().__init__(
            f"Too many open MCP sessions from your network address: {limit}, the most one address may keep open "
            f"(all accounts together). Close the sessions you no longer use (HTTP DELETE /mcp with their "
            f"Mcp-Session-Id){_expiry(idle_seconds)}, then initialize again."
        )


class SessionsFull(SessionRefused):
    status = 503
    code = INTERNAL_ERROR
    headers = {"retry-after": "5"}

    def __init__(self, limit: int) -> None:
        super().__init__(f"Too many open MCP sessions: this server holds {limit}, all of them busy. Try again shortly.")


def _user_of(requestor: AuthorizationContext | None) -> str | None:
    return requestor["subject"] if requestor is not None else None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key == name:
            return value.decode("latin-1")
    return None


def request_ids_of(body: bytes) -> list[Any]:
    """The ids of the JSON-RPC requests in a POST body (one message; a batch's, which the SDK refuses whole), as
    sent. Notifications and responses carry no request id of the client."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return []  # the SDK answers the parse error
    messages = parsed if isinstance(parsed, list) else [parsed]
    return [
        message["id"]
        for message in messages
        if isinstance(message, dict)
        and isinstance(message.get("method"), str)
        and isinstance(message.get("id"), str | int)
        and not isinstance(message.get("id"), bool)
    ]


async def _body_of(receive: Receive) -> tuple[bytes, bool]:
    """The whole request body, and whether the client disconnected while sending it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks), True
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), False


def _replaying(body: bytes, disconnected: bool, receive: Receive) -> Receive:
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            if disconnected:
                return {"type": "http.disconnect"}
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def duplicate_id_refusal(request_id: Any) -> Response:
    shown = json.dumps(request_id)[:100]
    message = (
        f"Request id {shown} is already used by a request of this session that has not been answered yet; "
        "JSON-RPC ids must be unique among a session's requests in flight. Nothing ran: send this request again "
        "with an id of its own."
    )
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": INVALID_REQUEST, "message": message}}
    return Response(json.dumps(body), status_code=400, media_type="application/json")


class UserCappedSessionManager(StreamableHTTPSessionManager):
    """The SDK's manager with per-user and per-address caps on open sessions, eviction of the longest-idle session
    at the process's ceiling, and unique request ids in flight per session (every setting read at each use, so
    tests may change them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sessions_of: dict[str, set[str]] = {}
        self._sessions_from: dict[str, set[str]] = {}
        self._address_of: dict[str, str] = {}
        self._ids_in_flight: dict[str, set[Any]] = {}
        self._ids_unanswered: dict[str, dict[Any, None]] = {}  # insertion-ordered: the oldest are forgotten first

    def _open(self, sessions: set[str] | None) -> int:
        return sum(
            1
            for session_id in sessions or ()
            if (transport := self._server_instances.get(session_id)) is not None and not transport.is_terminated
        )

    def open_sessions(self, user: str) -> int:
        """Sessions `user` (a user id) has open in this process: not ended, even if the SDK has yet to forget them
        (it answers a DELETE before it discards the session)."""
        return self._open(self._sessions_of.get(user))

    def open_sessions_from(self, address: str | None) -> int:
        """Sessions opened from client address `address` (its /64 for IPv6) that are open in this process."""
        return self._open(self._sessions_from.get(client_address_key(address)))

    async def handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        address_token = _admitting_address.set(client[0] if client else None)
        try:
            session_id = _header(scope, MCP_SESSION_ID_HEADER.lower().encode())
            if scope.get("method") == "POST" and session_id is not None and self._owns(scope, session_id):
                await self._handle_in_session(session_id, scope, receive, send)
            else:
                await super().handle_request(scope, receive, send)
        except SessionRefused as refusal:
            await refusal.response()(scope, receive, send)
        finally:
            _admitting_address.reset(address_token)

    def _owns(self, scope: Scope, session_id: str) -> bool:
        """Whether the request's credential is the one that opened session `session_id` (else the SDK answers 404)."""
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        return session_id in self._server_instances and self._session_owners.get(session_id) == requestor

    async def _handle_in_session(self, session_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A POST to an open session: its request id reserved while it is in flight (checked and taken with no
        await in between, so two concurrent POSTs cannot both pass), given back once its answer was sent whole."""
        body, disconnected = await _body_of(receive)
        sent = request_ids_of(body)
        ids = [coerce_request_id(request_id) for request_id in sent]  # as the SDK correlates them: "7" and 7 are one
        in_flight = self._ids_in_flight.setdefault(session_id, set())
        unanswered = self._ids_unanswered.get(session_id, {})
        for request_id, key in zip(sent, ids, strict=True):
            if key in in_flight or key in unanswered:
                logger.info("Refused a request reusing id %r of a request in flight in an MCP session", request_id)
                await duplicate_id_refusal(request_id)(scope, receive, send)
                return
        in_flight.update(ids)
        answered = False

        async def watch(message: Message) -> None:
            nonlocal answered
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True

        try:
            await super().handle_request(scope, _replaying(body, disconnected, receive), watch)
        finally:
            in_flight.difference_update(ids)
            if not answered and ids and session_id in self._server_instances:
                # The client left before its answer: the server may still be running the request, and its answer
                # would go to a new request with the same id. Keep the id until the session ends.
                kept = self._ids_unanswered.setdefault(session_id, {})
                kept.update(dict.fromkeys(ids))
                while len(kept) > UNANSWERED_IDS_KEPT:
                    del kept[next(iter(kept))]

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        # Called under the SDK's session-creation lock with no await in between: check and count are one step.
        idle = self.session_idle_timeout
        user = _user_of(requestor)
        per_user = settings.CHARMING_MCP_SESSIONS_PER_USER
        if user is not None and self.open_sessions(user) >= per_user:
            raise SessionsPerUserExceeded(per_user, idle)
        address = client_address_key(_admitting_address.get(None))
        per_address = settings.CHARMING_MCP_SESSIONS_PER_ADDRESS
        if per_address and self._open(self._sessions_from.get(address)) >= per_address:
            raise SessionsPerAddressExceeded(per_address, idle)
        self.max_sessions = settings.CHARMING_MCP_SESSIONS_MAX
        if len(self._server_instances) >= self.max_sessions and not self._evict_longest_idle():
            logger.warning("Refusing to open a new session: %d sessions are open, none idle", self.max_sessions)
            raise SessionsFull(self.max_sessions)
        transport = super()._admit_session(requestor)
        if transport is not None:
            session_id = transport.mcp_session_id
            assert session_id is not None
            if user is not None:
                self._sessions_of.setdefault(user, set()).add(session_id)
            self._sessions_from.setdefault(address, set()).add(session_id)
            self._address_of[session_id] = address
        return transport

    def _evict_longest_idle(self) -> bool:
        """End the session idle longest (no request in flight, no open GET stream) to make room; False if none is.
        Its id answers 404 at once (the client initializes again, as after an idle expiry); its server task ends
        when its idle scope is cancelled, and discards it again (harmlessly) on the way out."""
        victim: tuple[float, str, StreamableHTTPServerTransport] | None = None
        for session_id, transport in self._server_instances.items():
            scope = transport.idle_scope
            if transport.is_terminated or scope is None or transport._requests_in_flight:
                continue
            since = scope.deadline if math.isfinite(scope.deadline) else -math.inf
            if victim is None or since < victim[0]:
                victim = (since, session_id, transport)
        if victim is None:
            return False
        _since, session_id, transport = victim
        logger.info("Evicting idle MCP session %s to make room for a new one", session_id[:8])
        self._forget(session_id)
        self._server_instances.pop(session_id, None)
        self._session_owners.pop(session_id, None)
        assert transport.idle_scope is not None
        transport.idle_scope.cancel()
        return True

    def _forget(self, session_id: str) -> None:
        user = _user_of(self._session_owners.get(session_id))
        if user is not None and (sessions := self._sessions_of.get(user)) is not None:
            sessions.discard(session_id)
            if not sessions:
                del self._sessions_of[user]
        address = self._address_of.pop(session_id, None)
        if address is not None and (sessions := self._sessions_from.get(address)) is not None:
            sessions.discard(session_id)
            if not sessions:
                del self._sessions_from[address]
        self._ids_in_flight.pop(session_id, None)
        self._ids_unanswered.pop(session_id, None)

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        # However a session ends (DELETE, idle expiry, eviction, a refused opening request, a crash) the SDK
        # discards it here, possibly twice; forget it while the SDK still knows its owner (it forgets before its
        # first await).
        if self._server_instances.get(session_id) is transport:
            self._forget(session_id)
        await super()._discard_session(session_id, transport)
