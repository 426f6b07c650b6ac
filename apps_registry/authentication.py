"""DRF authentication: OAuth access tokens and the project's personal API tokens (`Authorization: Bearer <token>`).

Both put the token's scopes on the request as `request.auth_scopes`, which the API's permission class
(apps_registry/api/permissions.py) checks against each view's need. A client address that has had too many tokens
refused is answered 429 before its token is looked up (apps_registry/services/rate_limits.py).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from apps_registry import exceptions as domain
from apps_registry.api.throttles import RateLimitedAuthentication
from apps_registry.models import ApiToken
from apps_registry.services.oauth import OAuthAccess, oauth_token_authenticate
from apps_registry.services.rate_limits import authentication_throttled
from apps_registry.services.tokens import TOKEN_PREFIX, token_authenticate


def bearer_token_from_header(header: str | None) -> str | None:
    """The token from an Authorization header value, or None when there is none."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """A project API token; None without an Authorization header, so other authenticators can follow.

    When nothing authenticated the request, DRF answers NotAuthenticated (401, with this class's
    WWW-Authenticate) and the API's error translator words it as a missing token.
    """

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = request.META.get("HTTP_AUTHORIZATION")
        if not header:
            return None
        plaintext = bearer_token_from_header(header)
        if plaintext is None:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: expected 'Bearer <token>'.")
        try:
            token = authentication_throttled(
                address=request.META.get("REMOTE_ADDR"), authenticate=lambda: token_authenticate(plaintext=plaintext)
            )
        except domain.AuthenticationFailed as error:
            raise exceptions.AuthenticationFailed(error.message) from None
        except domain.RateLimited as error:
            raise RateLimitedAuthentication(error) from None
        request.auth_scopes = token.scope_set  # type: ignore[attr-defined]
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="charming"'


def is_personal_token(plaintext: str) -> bool:
    return plaintext.startswith(TOKEN_PREFIX)


class OAuthTokenAuthentication(authentication.BaseAuthentication):
    """OAuth access tokens; None (let the next class decide) when there is no bearer token or it is a personal one."""

    def authenticate(self, request: Request) -> tuple[Any, OAuthAccess] | None:
        plaintext = bearer_token_from_header(request.META.get("HTTP_AUTHORIZATION"))
        if plaintext is None or is_personal_token(plaintext):
            return None
        resource = f"{settings.CHARMING_PUBLIC_URL}{request.path}"
        try:
            access = authentication_throttled(
                address=request.META.get("REMOTE_ADDR"),
                authenticate=lambda: oauth_token_authenticate(plaintext=plaintext, resource=resource),
            )
        except domain.AuthenticationFailed as error:
            raise exceptions.AuthenticationFailed(error.message) from None
        except domain.RateLimited as error:
            raise RateLimitedAuthentication(error) from None
        request.auth_scopes = access.scopes  # type: ignore[attr-defined]
        return access.user, access

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="charming"'
