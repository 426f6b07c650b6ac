"""OAuth access tokens (issued by django-oauth-toolkit) as credentials, clients' registrations, and a
person disconnecting a client."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken
from oauth2_provider.settings import oauth2_settings

from apps_registry.exceptions import AuthenticationFailed
from apps_registry.models import OAuthClientRegistration, RedeemedAuthorizationCode
from apps_registry.oauth.scopes import scopes_parse
from apps_registry.services.apps import audit_record

REGISTRATION_WINDOW = timedelta(hours=1)
# How long an exchanged code is remembered. A code lives a minute (AUTHORIZATION_CODE_EXPIRE_SECONDS); a replay
# after a day is an attacker far too late to matter, and the tokens it bought have expired or rotated by then.
REDEEMED_CODE_MEMORY = timedelta(days=1)


@dataclass(frozen=True)
class OAuthAccess:
    """An authenticated OAuth access token: whose it is, which client holds it, and what it may do."""

    user: Any
    token_id: int
    client_id: str
    client_name: str
    scopes: frozenset[str]


def _audience_allows(token: AccessToken, resource: str, *, exact: bool) -> bool:
    """Whether `token` may be presented to `resource`: its RFC 8707 audience names exactly `resource` (`exact`, the
    MCP endpoint: a token for the site root or /api/ is refused there), or a URL `resource` lies under (the REST
    API, DOT's prefix rule, which also lets a token with no audience through)."""
    if exact:
        return resource in (token.resource or [])
    return token.allows_audience(resource)


def oauth_token_authenticate(*, plaintext: str, resource: str, exact_audience: bool = False) -> OAuthAccess:
    """Resolve an OAuth access token presented to `resource`, or say exactly why it is refused."""
    checksum = hashlib.sha256(plaintext.encode()).hexdigest()
    try:
        # One query on the unique checksum index; get(), not first(), which would add ORDER BY id.
        token = AccessToken.objects.select_related("user", "application").get(token_checksum=checksum)
    except AccessToken.DoesNotExist:
        raise AuthenticationFailed(
            "Unknown token: no such access token exists (it may have been revoked). Connect again to get a new one."
        ) from None
    if token.user is None or oauth2_settings.DCR_REGISTRATION_SCOPE in scopes_parse(token.scope):
        raise AuthenticationFailed(
            "Not a user's access token: it acts for no user (e.g. a client registration token), so it grants no access."
        )
    if token.is_expired():
        raise AuthenticationFailed(
            f"Expired token: this access token expired at {token.expires:%Y-%m-%d %H:%M:%S} UTC; "
            "refresh it or connect again."
        )
    if not _audience_allows(token, resource, exact=exact_audience):
        issued_for = ", ".join(token.resource) or "no resource in particular"
        raise AuthenticationFailed(
            f"Token issued for another resource: it is valid for {issued_for}, not {resource}. "
            f"Request a token with resource={resource}."
        )
    if not token.user.is_active:
        raise AuthenticationFailed("Inactive user: the account this token belongs to is disabled.")
    application = token.application
    return OAuthAccess(
        user=token.user,
        token_id=token.pk,
        client_id=application.client_id if application else "",
        client_name=(application.name if application else "") or "an unnamed client",
        scopes=scopes_parse(token.scope),
    )


def registration_allowed(*, client_ip: str) -> bool:
    """Whether `client_ip` may register another client now (CHARMING_OAUTH_REGISTRATIONS_PER_HOUR)."""
    since = timezone.now() - REGISTRATION_WINDOW
    recent = OAuthClientRegistration.objects.filter(client_ip=client_ip, created_at__gte=since).count()
    return recent < settings.CHARMING_OAUTH_REGISTRATIONS_PER_HOUR


def registration_record(*, client_id: str, client_ip: str, auth_method: str) -> OAuthClientRegistration:
    """Note which address registered the client `client_id` (counted by `registration_allowed`), and how it
    authenticates at the token endpoint (RFC 7591 token_endpoint_auth_method)."""
    application = Application.objects.get(client_id=client_id)
    return OAuthClientRegistration.objects.create(
        application=application, client_ip=client_ip, token_endpoint_auth_method=auth_method
    )


def client_registration_of(*, client_id: str) -> OAuthClientRegistration | None:
    """How `client_id` registered through RFC 7591 (when, with which token_endpoint_auth_method), or None for a
    client that did not (a Client ID Metadata Document, an operator's)."""
    return OAuthClientRegistration.objects.filter(application__client_id=client_id).first()


@transaction.atomic
def oauth_client_disconnect(*, user: Any, application_id: int) -> int:
    """Revoke everything `user` granted the client: its access and refresh tokens and pending codes.

    Returns how many tokens were revoked; 0 when the client holds nothing of the user's (or does not exist).
    """
    refresh_tokens = list(
        RefreshToken.objects.select_for_update().filter(user=user, application_id=application_id, revoked__isnull=True)
    )
    for refresh_token in refresh_tokens:
        refresh_token.revoke()
    access_tokens = AccessToken.objects.filter(user=user, application_id=application_id)
    revoked = len(refresh_tokens) + access_tokens.count()
    access_tokens.delete()
    Grant.objects.filter(user=user, application_id=application_id).delete()
    if revoked:
        name = Application.objects.filter(pk=application_id).values_list("name", flat=True).first() or ""
        audit_record(
            actor=user,
            action="oauth.disconnect",
            app_id=None,
            details={"client_id_pk": application_id, "client_name": name, "tokens_revoked": revoked},
        )
    return revoked


def _code_checksum(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def authorization_code_redeemed(*, code: str, application: Any, token_family: Any) -> None:
    """Remember that `code` bought the refresh-token family `token_family` (called as the tokens are saved, in the
    same transaction); forget codes older than REDEEMED_CODE_MEMORY on the way."""
    RedeemedAuthorizationCode.objects.filter(redeemed_at__lt=timezone.now() - REDEEMED_CODE_MEMORY).delete()
    RedeemedAuthorizationCode.objects.create(
        code_checksum=_code_checksum(code), application=application, token_family=token_family
    )


def authorization_code_replay_revoke(*, code: str, application: Any) -> bool:
    """A code presented again after its exchange: revoke every token it bought (the refresh-token family and its
    access tokens). True when `code` was a redeemed one; the token request is refused either way."""
    redeemed = RedeemedAuthorizationCode.objects.filter(
        code_checksum=_code_checksum(code), application=application
    ).first()
    if redeemed is None:
        return False
    RefreshToken.revoke_family(redeemed.token_family)
    return True
