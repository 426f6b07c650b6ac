"""API tokens: issued once, stored only as a hash, checked on every request."""

from __future__ import annotations

import functools
import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps_registry.access import ALL_SCOPES, SCOPES
from apps_registry.exceptions import AuthenticationFailed, InvalidInput, NotFound
from apps_registry.models import ApiToken
from apps_registry.plans import plan_stable
from apps_registry.rows import columns_of
from apps_registry.services.apps import audit_record
from apps_registry.services.email_confirmation import confirmed_email_require

TOKEN_PREFIX = "chm_"
# Last-used is written at most this often per token, so authentication stays read-mostly.
LAST_USED_RESOLUTION = timedelta(minutes=1)
MISSING_TOKEN_MESSAGE = "Missing token: send the header 'Authorization: Bearer <token>'."


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    plaintext: str


def token_hash(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def token_scopes_checked(scopes: Iterable[str] | None) -> str:
    """The scopes a token is issued with, as stored (access.SCOPES order); every scope when None."""
    chosen = ALL_SCOPES if scopes is None else frozenset(scopes)
    unknown = sorted(chosen - ALL_SCOPES)
    if unknown:
        raise InvalidInput(
            f"Unknown scope {unknown[0]!r}: a token's scopes are {', '.join(SCOPES)}.",
            errors=[{"path": "$.scopes", "message": f"unknown scope {scope!r}"} for scope in unknown],
        )
    if not chosen:
        raise InvalidInput(
            f"A token needs at least one scope: {', '.join(SCOPES)}.",
            errors=[{"path": "$.scopes", "message": "is empty"}],
        )
    return " ".join(scope for scope in SCOPES if scope in chosen)


def token_create(
    *,
    user: Any,
    name: str = "default",
    expires_days: int | None = None,
    scopes: Iterable[str] | None = None,
    by_operator: bool = False,
) -> IssuedToken:
    """Issue a token with `scopes` (every scope by default). The plaintext is returned once here and never stored.

    A person's own account must have confirmed its e-mail address first (Forbidden, saying how); an operator
    (`by_operator`: `manage.py create_token`) vouches for the account and needs no confirmation."""
    if not by_operator:
        confirmed_email_require(user=user, to="create a token")
    stored_scopes = token_scopes_checked(scopes)
    if expires_days is not None and expires_days <= 0:
        raise InvalidInput(
            f"A token's lifetime must be a positive number of days, got {expires_days}.",
            errors=[{"path": "$.expires_days", "message": "must be a positive number of days"}],
        )
    prefix = secrets.token_hex(4)
    plaintext = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    expires_at = timezone.now() + timedelta(days=expires_days) if expires_days else None
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=f"{TOKEN_PREFIX}{prefix}",
            secret_hash=token_hash(plaintext),
            expires_at=expires_at,
            scopes=stored_scopes,
        )
        # The audit trail names the token by its public prefix; never its secret.
        audit_record(
            actor=user, action="token.create", app_id=None, details=_token_details(token, by_operator=by_operator)
        )
    return IssuedToken(token=token, plaintext=plaintext)


def _token_details(token: ApiToken, **extra: Any) -> dict[str, Any]:
    return {"token_id": token.pk, "prefix": token.prefix, "name": token.name, "scopes": token.scopes, **extra}


def token_authenticate(*, plaintext: str | None) -> ApiToken:
    """Resolve a bearer token to its ApiToken, or say exactly why it is refused (never echoing it).

    One query on the unique hash index (the token with its user; nothing cached, so a revocation holds from
    the next request), and at most one write per token per LAST_USED_RESOLUTION (`token_last_used_note`).
    """
    if not plaintext:
        raise AuthenticationFailed(MISSING_TOKEN_MESSAGE)
    token = _token_with_user(token_hash(plaintext))
    if token is None:
        raise AuthenticationFailed("Unknown token: no such API token exists. Create one with manage.py create_token.")
    if token.revoked:
        raise AuthenticationFailed(f"Revoked token: token {token.prefix}… was revoked; create a new one.")
    if token.expired:
        assert token.expires_at is not None
        raise AuthenticationFailed(
            f"Expired token: token {token.prefix}… expired at {token.expires_at:%Y-%m-%d %H:%M} UTC; create a new one."
        )
    if not token.user.is_active:
        raise AuthenticationFailed("Inactive user: the account this token belongs to is disabled.")
    token_last_used_note(token=token)
    return token


def _token_with_user(secret_hash: str) -> ApiToken | None:
    """The token with this hash and its user, in one query on the unique hash index (hand-written: building the
    ORM's select_related join on every request cost more than the rest of authenticating)."""
    token_columns, user_columns = columns_of(ApiToken), columns_of(get_user_model())
    with connection.cursor() as cursor:
        cursor.execute(_token_with_user_sql(), [secret_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    token = token_columns.instance(row)
    token.user = user_columns.instance(row, start=len(token_columns.columns))
    return token


@functools.cache
def _token_with_user_sql() -> str:
    """The lookup's SQL, written once per process (its columns come from the models, in `columns_of`'s order)."""
    user_model = get_user_model()
    quote = connection.ops.quote_name
    user_pk, token_user = quote(user_model._meta.pk.column), quote(ApiToken._meta.get_field("user").column)
    return plan_stable(
        f"SELECT {columns_of(ApiToken).select('t')}, {columns_of(user_model).select('u')} "
        f"FROM {quote(ApiToken._meta.db_table)} t "
        f"JOIN {quote(user_model._meta.db_table)} u ON u.{user_pk} = t.{token_user} "
        f"WHERE t.{quote('secret_hash')} = %s"
    )


def token_last_used_note(*, token: ApiToken) -> None:
    """Record that `token` was used now, at most once per LAST_USED_RESOLUTION: nothing is written while the
    value just read is recent, and the write is conditional, so of the requests (in any worker) that found it
    stale at the same moment only the first writes."""
    now = timezone.now()
    stale_before = now - LAST_USED_RESOLUTION
    if token.last_used_at is not None and token.last_used_at >= stale_before:
        return
    ApiToken.objects.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale_before), pk=token.pk).update(
        last_used_at=now
    )
    token.last_used_at = now


@transaction.atomic
def token_revoke(*, token: ApiToken, actor: Any = None) -> ApiToken:
    """Revoke a token (by `actor`: its owner when None); revoking twice keeps the first revocation time."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(actor=actor or token.user, action="token.revoke", app_id=None, details=_token_details(token))
    return token


def token_revoke_own(*, actor: Any, token_id: int | str) -> ApiToken:
    """Revoke one of the actor's own tokens; another user's token is reported exactly like a missing one."""
    token = ApiToken.objects.filter(pk=token_id, user=actor).first() if str(token_id).isdigit() else None
    if token is None:
        raise NotFound(f"No token with id {token_id} exists.")
    return token_revoke(token=token, actor=actor)
