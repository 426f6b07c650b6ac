"""Live app pages: an open page polls its app's changes counter and, when it moved, fetches the page again and
swaps in its views (static/charming/live.js). Polling was measured against server-sent events: see
docs/performance.md ("Live updates").

A poll is one read of the counter by the storage's key: the page hands out a signed token naming the app and the
person, so the poll needs no session, user or membership lookup (the views it then fetches are the ordinary,
fully checked page). The counter only says *that* something changed, never what; a token outlives a revoked
membership by at most LIVE_TOKEN_MAX_AGE, and the page it leads to is refused at once.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core import signing
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from apps_registry.selectors import records_changes_of

LIVE_TOKEN_SALT = "charming.pages.live"
LIVE_TOKEN_MAX_AGE = 12 * 3600  # seconds: a page left open longer asks to be reloaded
LIVE_POLL_MS = 1000  # how often an open, visible page polls: a change shows within 2 s (poll, then the page)
LIVE_HEADER = "X-Charming-Live"  # on the page fetch a poll triggers: it must not use up a one-time notice


def live_context(*, app_id: uuid.UUID, user_pk: Any, changes: int | None) -> dict[str, Any]:
    """What the app page's template needs to poll: the URL (with its token), the counter it was drawn at."""
    token = signing.dumps({"a": str(app_id), "u": str(user_pk)}, salt=LIVE_TOKEN_SALT, compress=False)
    return {
        "live_url": reverse("app_changes", args=[app_id]) + "?t=" + token,
        "live_changes": changes if changes is not None else 0,
        "live_poll_ms": LIVE_POLL_MS,
    }


def is_live_refresh(request: HttpRequest) -> bool:
    return request.headers.get(LIVE_HEADER) == "1"


def _refusal(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@never_cache
@require_GET
def app_changes(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    """Whether the app's records changed since counter `since`: 204 (empty) if not, else 200 {"changes": n}."""
    try:
        claims = signing.loads(request.GET.get("t", ""), salt=LIVE_TOKEN_SALT, max_age=LIVE_TOKEN_MAX_AGE)
    except signing.SignatureExpired:
        return _refusal("This page has been open too long to follow changes: reload it.", 403)
    except signing.BadSignature:
        return _refusal("This link to follow an app's changes is not valid: reload the app's page.", 403)
    if not isinstance(claims, dict) or claims.get("a") != str(app_id):
        return _refusal("This link to follow an app's changes is for another app: reload the app's page.", 403)
    since = request.GET.get("since", "")
    if not since.isdigit() or len(since) > 19:
        return _refusal("since must be the changes counter the page was drawn at (a whole number).", 400)
    changes = records_changes_of(app_id=app_id)
    if changes is None:
        return _refusal("This app no longer exists.", 404)
    if changes == int(since):
        return HttpResponse(status=204)
    return JsonResponse({"changes": changes})
