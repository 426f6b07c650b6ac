"""Rate limits on /mcp, before the SDK sees a request (the budgets are apps_registry's: services/rate_limits.py).

What counts: every HTTP request to /mcp, whatever it carries (a POSTed JSON-RPC request, notification or
response, a GET event stream), one each, against the token's budget; a DELETE ending a 2025-11-25 session is
never counted nor refused (refusing it would keep the session's memory held until it idles out). The SDK refuses
JSON-RPC batches whole (both protocol versions accept one message per POST), so a batch is one request that runs
nothing.

Failed authentications count against the client's address (the ASGI scope's client, as uvicorn sets it, behind a
proxy from --proxy-headers); once the address has spent that budget, its requests are refused before their token
is looked up. A request without any Authorization header looks nothing up and counts nothing.

Both refusals are HTTP 429 with `Retry-After` and a JSON-RPC error (id null: the body was not read) whose `data`
names the limit and carries `retry_after_seconds`. The per-app limit is not here: it is a tool result
(`rate_limited`), raised by the route service.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from starlette.types import Scope, Send

from apps_registry.exceptions import RateLimited
from apps_registry.services.rate_limits import authentication_throttled, token_budget_key, token_budget_take
from mcp_tools.http import send_json

# JSON-RPC's implementation-defined server error range; `data.error` says which refusal it is.
RATE_LIMITED_CODE = -32000


class Credential(Protocol):
    """What the token budget needs of mcp_tools.auth.Caller (read only, as the frozen Caller is)."""

    @property
    def user(self) -> Any: ...
    @property
    def token_id(self) -> int | None: ...
    @property
    def client_id(self) -> str: ...
    @property
    def kind(self) -> str: ...


C = TypeVar("C", bound=Credential)


def client_address(scope: Scope) -> str | None:
    client = scope.get("client")
    return client[0] if client else None


def authenticate_within_limits(authenticate: Callable[[str | None], C], header: str | None, scope: Scope) -> C:
    """`authenticate(header)` throttled: refused (RateLimited) before the lookup when the client's address has had
    too many refused tokens; then the caller's token budget pays for this request. Sync: runs in the request's
    thread, in the same hop as the lookup."""
    if header:
        caller = authentication_throttled(address=client_address(scope), authenticate=lambda: authenticate(header))
    else:
        caller = authenticate(header)  # AuthenticationFailed (no credential): nothing looked up, nothing counted
    if scope.get("method") != "DELETE":  # ending a session frees what it holds: never refuse it
        key = token_budget_key(
            kind=caller.kind, token_id=caller.token_id, client_id=caller.client_id, user_id=caller.user.pk
        )
        token_budget_take(key=key)
    return caller


async def send_rate_limited(send: Send, error: RateLimited) -> None:
    """HTTP 429 with Retry-After and a JSON-RPC error naming the limit and when to retry."""
    data = {"error": "rate_limited", **(error.details or {})}
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": RATE_LIMITED_CODE, "message": error.message, "data": data}}
    await send_json(send, 429, body, {"retry-after": str(error.retry_after_seconds)})
