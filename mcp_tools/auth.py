"""Who is calling: bearer-token authentication in front of the SDK, and the caller for handlers.

The SDK never sees a request we did not authenticate. Each request carries the caller in three
places: `scope["user"]` (the SDK binds a 2025-11-25 session to it and answers 404 to anyone
else), the SDK's `auth_context_var` (it binds sealed requestState to the same principal), and our
`current_caller` contextvar (the SDK runs handlers under the sending request's context, so
handlers read it in both protocol versions, including inside `sync_to_async` threads).
"""

from __future__ import annotations

import contextvars
import json
import logging
from dataclasses import dataclass
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.db import connections
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from apps_registry.authentication import bearer_token_from_header, is_personal_token
from apps_registry.exceptions import AuthenticationFailed
from apps_registry.oauth.scopes import ALL_SCOPES
from apps_registry.services.oauth import oauth_token_authenticate
from apps_registry.services.tokens import token_authenticate

logger = logging.getLogger(__name__)

# Fixed client id for personal tokens: the session owner is (client_id, issuer, subject), so the subject
# (the user id) is what tells two users apart. OAuth callers carry their client's id.
CLIENT_ID = "charming-api-token"


@dataclass(frozen=True)
class Caller:
    """Who is calling and what their credential allows.

    `scopes` are the OAuth scopes granted to the token (every scope for a personal token): the hook for
    scope enforcement at tools/list and tools/call.
    """

    user: Any
    token_id: int | None
    scopes: frozenset[str] = ALL_SCOPES
    client_id: str = CLIENT_ID
    kind: str = "api-token"


current_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("charming_mcp_caller", default=None)


def resource_url() -> str:
    """The protected resource: the /mcp URL clients use."""
    return f"{settings.CHARMING_PUBLIC_URL}/mcp"


def resource_metadata_url() -> str:
    return f"{settings.CHARMING_PUBLIC_URL}/.well-known/oauth-protected-resource/mcp"


def _authenticate(header: str | None) -> Caller:
    plaintext = bearer_token_from_header(header)
    if header and plaintext is None:
        raise AuthenticationFailed("Malformed Authorization header: expected 'Bearer <token>'.")
    if plaintext is not None and not is_personal_token(plaintext):
        access = oauth_token_authenticate(plaintext=plaintext, resource=resource_url())
        return Caller(
            user=access.user, token_id=access.token_id, scopes=access.scopes, client_id=access.client_id, kind="oauth"
        )
    token = token_authenticate(plaintext=plaintext)
    return Caller(user=token.user, token_id=token.pk)


async def send_unauthorized(send: Send, message: str, *, token_given: bool) -> None:
    """401 with RFC 9728's pointer to the protected-resource metadata (RFC 6750 error when a token was sent)."""
    challenge = f'Bearer resource_metadata="{resource_metadata_url()}"'
    if token_given:
        challenge += ', error="invalid_token"'
    body = json.dumps({"error": "invalid_token" if token_given else "unauthorized", "error_description": message})
    raw = body.encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode()),
                (b"www-authenticate", challenge.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": raw})


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
    """ASGI wrapper: resolve `Authorization: Bearer` to a user, or answer 401 before the SDK runs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        header = None
        for name, value in scope.get("headers") or []:
            if name == b"authorization":
                header = value.decode("latin-1")
                break
        # Like Django's own ASGI handler: each HTTP request gets its own thread for ORM calls (so
        # concurrent calls do not queue behind one thread) and its connections are closed when it ends.
        async with ThreadSensitiveContext():
            try:
                try:
                    caller = await sync_to_async(_authenticate, thread_sensitive=True)(header)
                except AuthenticationFailed as error:
                    await send_unauthorized(send, error.message, token_given=bool(header))
                    return
                await run_as(caller, self.app, scope, receive, send)
            finally:
                await sync_to_async(connections.close_all, thread_sensitive=True)()


async def run_as(caller: Caller, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    sdk_user = sdk_user_for(caller)
    scope = {**scope, "user": sdk_user}
    caller_token = current_caller.set(caller)
    sdk_token = auth_context_var.set(sdk_user)
    try:
        await app(scope, receive, send)
    finally:
        auth_context_var.reset(sdk_token)
        current_caller.reset(caller_token)
