"""DRF authentication with the project's API tokens (`Authorization: Bearer <token>`)."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from apps_registry import exceptions as domain
from apps_registry.models import ApiToken
from apps_registry.services.tokens import token_authenticate


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
            token = token_authenticate(plaintext=plaintext)
        except domain.AuthenticationFailed as error:
            raise exceptions.AuthenticationFailed(error.message) from None
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="charming"'
