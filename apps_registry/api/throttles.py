"""The REST API's share of the rate limits (apps_registry/ratelimits.py): the same token budget as /mcp, taken by a
DRF throttle class once the request is authenticated, and refused tokens counted per client address (in
apps_registry/authentication.py). Both answer 429 with Retry-After and the `rate_limited` error body; the per-app
limit comes from the route service like any domain error."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, throttling
from rest_framework.request import Request

from apps_registry.exceptions import RateLimited
from apps_registry.models import ApiToken
from apps_registry.services.oauth import OAuthAccess
from apps_registry.services.rate_limits import token_budget_key, token_budget_take


class RateLimitedAuthentication(exceptions.Throttled):
    """A RateLimited raised while authenticating: DRF's authentication lets only APIException through cleanly, so
    it travels in this one and the API's error translator answers it as the domain error."""

    def __init__(self, error: RateLimited) -> None:
        super().__init__(wait=error.retry_after_seconds, detail=error.message)
        self.error = error


class TokenBudgetThrottle(throttling.BaseThrottle):
    """Each authenticated request pays one call from its token's budget, shared with /mcp."""

    def allow_request(self, request: Request, view: Any) -> bool:
        auth = request.auth
        if isinstance(auth, ApiToken):
            key = token_budget_key(kind="api-token", token_id=auth.pk, client_id="", user_id=auth.user_id)
        elif isinstance(auth, OAuthAccess):
            key = token_budget_key(kind="oauth", token_id=auth.token_id, client_id=auth.client_id, user_id=auth.user.pk)
        else:
            return True
        # Raised rather than answered False: the refusal carries which limit and when to retry, as on /mcp.
        token_budget_take(key=key)
        return True
