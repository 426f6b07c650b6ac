"""delete_app's confirmation state on protocol 2026-07-28 (multi-round-trip elicitation).

The SDK's RequestStateBoundary seals the state with AES-GCM and binds it to the tool, its exact
arguments (app_id, purge_storage, confirm), the authenticated user and an expiry. Inside we keep
our own claims too, so the rule does not rest on middleware configuration alone: the user, the
app (its id and its creation time), the purge flag, a short expiry and a one-time nonce, redeemed
once (a replayed answer is refused). Used nonces are kept in the database, so a replay is refused
by whichever worker gets it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from apps_registry.exceptions import ConfirmationRequired
from apps_registry.services.confirmations import confirmation_nonce_redeem

STATE_VERSION = 1
# How much longer the SDK's seal lives than the confirmation it carries (see mcp_tools.server.server_build).
STATE_SEAL_GRACE_SECONDS = 3600
RETRY_HINT = "Nothing was deleted; call delete_app again to get a new confirmation prompt."


def state_key() -> str:
    """The requestState sealing secret: CHARMING_MCP_STATE_KEY, or one derived from SECRET_KEY."""
    configured: str = settings.CHARMING_MCP_STATE_KEY
    if configured:
        return configured
    return hashlib.sha256(b"charming/mcp/request-state:" + settings.SECRET_KEY.encode()).hexdigest()


def confirmation_ttl_seconds() -> int:
    """How long a delete_app confirmation stays answerable (CHARMING_MCP_CONFIRM_TTL_SECONDS)."""
    return int(settings.CHARMING_MCP_CONFIRM_TTL_SECONDS)


def confirmation_state_new(*, user_id: Any, app_id: str, app_created: str, purge_storage: bool) -> str:
    """The plaintext state of a new delete prompt (sealed by the SDK on its way out).

    `app_created` (the app's creation time) names the app itself, not only its id: a prompt issued for an app that
    was then deleted and created again under the same id does not delete the new one.
    """
    claims = {
        "v": STATE_VERSION,
        "uid": str(user_id),
        "app": str(app_id).lower(),
        "created": app_created,
        "purge": purge_storage,
        "exp": time.time() + confirmation_ttl_seconds(),
        "nonce": secrets.token_urlsafe(16),
    }
    return json.dumps(claims, separators=(",", ":"))


def confirmation_state_redeem(state: str, *, user_id: Any, app_id: str, app_created: str, purge_storage: bool) -> None:
    """Accept a returned state once: same user, app (id and creation time) and purge flag, not expired, not used
    before.

    Touches the database (the used-nonce record): call it through `db(...)` from async code.
    """
    try:
        claims = json.loads(state)
        valid_shape = isinstance(claims, dict) and claims.get("v") == STATE_VERSION
    except ValueError:
        valid_shape = False
    if not valid_shape:
        raise ConfirmationRequired(f"The confirmation state is not one this server issued. {RETRY_HINT}")
    if (
        claims.get("uid") != str(user_id)
        or claims.get("app") != str(app_id).lower()
        or claims.get("purge") is not purge_storage
    ):
        raise ConfirmationRequired(f"The confirmation was given for another user, app or purge choice. {RETRY_HINT}")
    if claims.get("created") != app_created:
        raise ConfirmationRequired(
            f"The confirmation was given for an app that has since been deleted; the app now at id {app_id} is "
            f"another one. {RETRY_HINT}"
        )
    expires = claims.get("exp")
    if not isinstance(expires, int | float) or not time.time() < expires:
        raise ConfirmationRequired(f"The confirmation prompt has expired. {RETRY_HINT}")
    nonce = claims.get("nonce")
    if not isinstance(nonce, str) or not confirmation_nonce_redeem(
        nonce=nonce, expires_at=datetime.fromtimestamp(expires, tz=UTC)
    ):
        raise ConfirmationRequired(f"This confirmation was already used. {RETRY_HINT}")
