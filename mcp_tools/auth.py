"""Who is calling: bearer-token authentication in front of the SDK, and the caller for handlers.

The SDK never sees a request we did not authenticate. Each request carries the caller in three
places: `scope["user"]` (the SDK binds a 2025-11-25 session to it and answers 404 to anyone
else), the SDK's `auth_context_var` (it binds sealed requestState to the same principal), and our
`current_caller` contextvar (the SDK runs handlers under the sending request's context, so
handlers read it in both protocol versions, including inside their `db()` units).
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apps_registry.access import ALL_SCOPES, CHALLENGE_SCOPES, scope_refusal_message
from apps_registry.authentication import bearer_token_from_header, is_personal_token
from apps_registry.exceptions import AuthenticationFailed, DatabaseUnavailable, RateLimited, database_unavailable
from apps_registry.oauth.policy import mcp_resource_url
from apps_registry.redaction import RedactingFilter
from apps_registry.services.oauth import oauth_token_authenticate
from apps_registry.services.tokens import token_authenticate
from mcp_tools.database import db
from mcp_tools.http import send_json
from mcp_tools.registry import tool_named
from mcp_tools.throttle import authenticate_within_limits, send_rate_limited

logger = logging.getLogger(__name__)
logger.addFilter(RedactingFilter())

# Fixed client id for personal tokens: the session owner is (client_id, issuer, subject), so the subject
# (the user id) is what tells two users apart. OAuth callers carry their client's id.
CLIENT_ID = "charming-api-token"


@dataclass(frozen=True)
class Caller:
    """Who is calling and what their credential allows.

    `scopes` are the scopes granted to the token (OAuth or personal): a tools/call of a tool outside them is
    refused with 403 insufficient_scope before the SDK sees it (`refuse_out_of_scope`). tools/list shows the
    tools of `listed_scopes`.
    """

    user: Any
    token_id: int | None
    scopes: frozenset[str] = ALL_SCOPES
    client_id: str = CLIENT_ID
    kind: str = "api-token"

    @property
    def listed_scopes(self) -> frozenset[str]:
        """The scopes whose tools tools/list shows. An OAuth host can step up to any scope on the 403 (the person
        approves it on the consent page), so it sees every tool; a personal token cannot, so it keeps the scopes
        its owner chose."""
        return ALL_SCOPES if self.kind == "oauth" else self.scopes


current_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("charming_mcp_caller", default=None)


def resource_url() -> str:
    """The protected resource: the /mcp URL clients use."""
    return mcp_resource_url()


def resource_metadata_url() -> str:
    return f"{settings.CHARMING_PUBLIC_URL}/.well-known/oauth-protected-resource/mcp"


def _authenticate(header: str | None) -> Caller:
    plaintext = bearer_token_from_header(header)
    if header and plaintext is None:
        raise AuthenticationFailed("Malformed Authorization header: expected 'Bearer <token>'.")
    if plaintext is not None and not is_personal_token(plaintext):
        access = oauth_token_authenticate(plaintext=plaintext, resource=resource_url(), exact_audience=True)
        return Caller(
            user=access.user, token_id=access.token_id, scopes=access.scopes, client_id=access.client_id, kind="oauth"
        )
    token = token_authenticate(plaintext=plaintext)
    return Caller(user=token.user, token_id=token.pk, scopes=token.scope_set)


async def send_unauthorized(send: Send, message: str, *, token_given: bool) -> None:
    """401 with RFC 9728's pointer to the protected-resource metadata and the scopes a host should ask for by
    default (read and write, not delete: least privilege), plus RFC 6750's error when a token was sent."""
    challenge = f'Bearer resource_metadata="{resource_metadata_url()}", scope="{" ".join(CHALLENGE_SCOPES)}"'
    if token_given:
        challenge += ', error="invalid_token"'
    body = {"error": "invalid_token" if token_given else "unauthorized", "error_description": message}
    await send_json(send, 401, body, {"www-authenticate": challenge})


def insufficient_scope_challenge(scope: str) -> str:
    """RFC 6750 §3.1 as the MCP authorization spec asks (step-up): only the scope this request needs; the
    client adds it to what it already holds when it authorizes again."""
    return f'Bearer error="insufficient_scope", scope="{scope}", resource_metadata="{resource_metadata_url()}"'


def _tool_calls(body: bytes) -> list[tuple[Any, str]]:
    """(id, tool name) of each tools/call in a JSON-RPC POST body (one message, or a batch). Every body is
    parsed (no substring shortcut: JSON escapes could hide the method name from one)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        # The SDK answers the parse error (or, for JSON nested deeper than Python's parser goes, parses it
        # itself: then server.call_tool's own scope check still refuses a call outside the token's scopes).
        return []
    messages = parsed if isinstance(parsed, list) else [parsed]
    calls: list[tuple[Any, str]] = []
    for message in messages:
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            if isinstance(name, str):
                calls.append((message.get("id"), name))
    return calls


def tool_scope(name: str) -> str | None:
    """The scope /mcp's tool `name` takes (None for no such tool: the SDK answers that call)."""
    tool = tool_named(name)
    return tool.scope if tool is not None else None


ScopeOf = Callable[[str], "str | None"]


def scope_missing_for(caller: Caller, body: bytes, scope_of: ScopeOf = tool_scope) -> tuple[Any, str] | None:
    """(request id, scope) of the first tools/call in `body` whose tool needs a scope the caller lacks."""
    for request_id, name in _tool_calls(body):
        needed = scope_of(name)
        if needed is not None and needed not in caller.scopes:
            return request_id, needed
    return None


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


async def refuse_out_of_scope(
    caller: Caller, app: ASGIApp, scope: Scope, receive: Receive, send: Send, scope_of: ScopeOf = tool_scope
) -> None:
    """Answer a POSTed tools/call of a tool outside the token's scopes with HTTP 403 insufficient_scope (both
    protocol versions: on 2025-11-25 the call is a POST within the session), before the SDK answers it; pass
    every other request on with its body intact."""
    if scope.get("method") != "POST":
        await app(scope, receive, send)
        return
    body, disconnected = await _body_of(receive)
    missing = None if disconnected else scope_missing_for(caller, body, scope_of)
    if missing is not None:
        request_id, needed = missing
        message = scope_refusal_message(needed)
        error = {"code": INVALID_REQUEST, "message": message, "data": {"error": "insufficient_scope", "scope": needed}}
        refusal = {"jsonrpc": "2.0", "id": request_id, "error": error}
        await send_json(send, 403, refusal, {"www-authenticate": insufficient_scope_challenge(needed)})
        return
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            if disconnected:
                return {"type": "http.disconnect"}
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    await app(scope, replay, send)


def sdk_user_for(caller: Caller) -> AuthenticatedUser:
    # The AccessToken names the API token by id, never by its secret: nothing downstream needs it.
    access = AccessToken(
        token=f"{caller.kind}:{caller.token_id}",
        client_id=caller.client_id,
        scopes=sorted(caller.scopes),
        subject=str(caller.user.pk),
    )
    return AuthenticatedUser(access)


class BearerAuth:
    """ASGI wrapper: resolve `Authorization: Bearer` to a user, or answer 401 before the SDK runs.

    The request holds no database connection: authentication is one unit of database work (mcp_tools.database),
    finished before the SDK runs, and each tool's `db()` call is another.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        header = None
        for name, value in scope.get("headers") or []:
            if name == b"authorization":
                header = value.decode("latin-1")
                break
        try:
            caller = await db(authenticate_within_limits, _authenticate, header, scope)
        except AuthenticationFailed as error:
            await send_unauthorized(send, error.message, token_given=bool(header))
            return
        except RateLimited as error:
            await send_rate_limited(send, error)
            return
        except Exception as error:
            outage = database_unavailable(error)
            if outage is None:
                raise
            logger.warning("MCP request answered 503: the database is unavailable (%s)", error)
            await send_unavailable(send, outage)
            return
        await self.serve(caller, scope, receive, send)

    async def serve(self, caller: Caller, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the authenticated request as `caller` (mcp_tools.app_server's endpoint first finds its app)."""
        await run_as(caller, self.app, scope, receive, send)


async def send_unavailable(send: Send, outage: DatabaseUnavailable) -> None:
    """503 with Retry-After and a JSON-RPC error body (no request id: the request was never read)."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": INTERNAL_ERROR, "message": outage.message}}
    await send_json(send, outage.http_status, body, {"retry-after": str(outage.retry_after_seconds)})


async def run_as(
    caller: Caller, app: ASGIApp, scope: Scope, receive: Receive, send: Send, scope_of: ScopeOf = tool_scope
) -> None:
    sdk_user = sdk_user_for(caller)
    scope = {**scope, "user": sdk_user}
    caller_token = current_caller.set(caller)
    sdk_token = auth_context_var.set(sdk_user)
    try:
        await refuse_out_of_scope(caller, app, scope, receive, send, scope_of)
    finally:
        auth_context_var.reset(sdk_token)
        current_caller.reset(caller_token)
