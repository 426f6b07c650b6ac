"""Live app pages: an open page polls its app's changes counter and, when it moved, fetches the page again and
swaps in its views (static/charming/live.js). Polling was measured against server-sent events: see
docs/performance.md ("Live updates").

A poll is one read of the counter by the storage's key: the page hands out a signed token naming the app and the
person, so the poll needs no session, user or membership lookup (the views it then fetches are the ordinary,
fully checked page). The counter only says *that* something changed, never what; a token outlives a revoked
membership by at most LIVE_TOKEN_MAX_AGE, and the page it leads to is refused at once.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from django.core import signing
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from apps_registry.exceptions import database_unavailable
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


def changes_refusal(*, app_id: uuid.UUID | str, token: str, since: str) -> tuple[int, str] | None:
    """Why a poll is refused (its status and message), before any read; None when its token and counter are good."""
    try:
        claims = signing.loads(token, salt=LIVE_TOKEN_SALT, max_age=LIVE_TOKEN_MAX_AGE)
    except signing.SignatureExpired:
        return 403, "This page has been open too long to follow changes: reload it."
    except signing.BadSignature:
        return 403, "This link to follow an app's changes is not valid: reload the app's page."
    if not isinstance(claims, dict) or claims.get("a") != str(app_id):
        return 403, "This link to follow an app's changes is for another app: reload the app's page."
    if not since.isdigit() or len(since) > 19:
        return 400, "since must be the changes counter the page was drawn at (a whole number)."
    return None


def changes_answer(*, app_id: uuid.UUID | str, since: str) -> tuple[int, dict[str, Any] | None]:
    """A good poll's answer: 204 (no body) when the counter is still `since`, else 200 {"changes": n}; 404 once the
    app is gone. One read."""
    changes = records_changes_of(app_id=app_id)
    if changes is None:
        return 404, {"error": "This app no longer exists."}
    if changes == int(since):
        return 204, None
    return 200, {"changes": changes}


@never_cache
@require_GET
def app_changes(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    """Whether the app's records changed since counter `since`: 204 (empty) if not, else 200 {"changes": n}.
    Under uvicorn, LiveChangesASGI answers this URL before Django; this view serves it everywhere else."""
    since = request.GET.get("since", "")
    refused = changes_refusal(app_id=app_id, token=request.GET.get("t", ""), since=since)
    if refused is not None:
        return JsonResponse({"error": refused[1]}, status=refused[0])
    status, body = changes_answer(app_id=app_id, since=since)
    return HttpResponse(status=204) if body is None else JsonResponse(body, status=status)


class LiveChangesASGI:
    """Polls of open pages answered before Django: the same checks and read as `app_changes`, without the request
    handling around a view (middleware, the thread hop, the response machinery), which cost three times the
    answer's own work (docs/performance.md, "Live updates"). `run_db` runs the read as one unit of database work
    off the event loop (mcp_tools.database.db: bounded threads, the connection given back after)."""

    def __init__(self, inner: Any, run_db: Callable[..., Awaitable[Any]]) -> None:
        self.inner = inner
        self.run_db = run_db

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        found = _CHANGES_PATH.match(scope.get("path", "")) if scope["type"] == "http" else None
        if found is None or scope.get("method") not in ("GET", "HEAD"):
            await self.inner(scope, receive, send)
            return
        app_id = found.group(1)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        since = query.get("since", [""])[0]
        refused = changes_refusal(app_id=app_id, token=query.get("t", [""])[0], since=since)
        extra: list[tuple[bytes, bytes]] = []
        if refused is not None:
            status, body = refused[0], {"error": refused[1]}
        else:
            try:
                status, body = await self.run_db(changes_answer, app_id=app_id, since=since)
            except Exception as error:
                outage = database_unavailable(error)
                if outage is None:
                    raise  # uvicorn logs it and answers a bare 500
                # The page asks again at its next poll; the same answer as Django's side gives in an outage.
                status, body = outage.http_status, {"error": outage.message}
                extra = [(b"retry-after", str(outage.retry_after_seconds).encode())]
        payload = b"" if body is None else json.dumps(body).encode()
        headers = [
            (b"cache-control", b"max-age=0, no-cache, no-store, must-revalidate, private"),
            (b"x-content-type-options", b"nosniff"),
            *extra,
        ]
        if body is not None:
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload if scope.get("method") == "GET" else b""})


_CHANGES_PATH = re.compile(r"^/apps/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/changes/$")
