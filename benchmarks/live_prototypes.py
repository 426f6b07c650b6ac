"""Prototypes of live app pages for benchmarks/live_updates.py to measure against the polling Charming serves
(apps_registry/pages/live.py, a Django view). Not part of the service: uvicorn serves them only when the benchmark
starts it (`--app-dir benchmarks live_prototypes:application`).

Server-sent events:
GET /apps/<id>/events/?t=<the page's live token>&since=<counter> holds the connection open and sends
`data: <counter>` whenever the app's changes counter moves. The counter is the same one polling reads: one
watcher per app and server process reads it every WATCH_SECONDS while anyone listens (exact across processes,
on SQLite as on PostgreSQL, which could use LISTEN/NOTIFY instead), and wakes every connection of that app.

Polling through Django's view: GET /apps/<id>/changes-django/?t=...&since=n is the poll Charming answers before
Django (LiveChangesASGI in charming/asgi.py) handed to Django's view instead, as a WSGI server would serve it:
what the request handling around a view (middleware, the thread hop, the response's machinery) costs.

Everything else goes to Charming's own ASGI application.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from django.core import signing

from charming.asgi import application as charming_application  # isort: skip - sets Django up first
from charming.asgi import django_application  # isort: skip

from apps_registry.pages.live import LIVE_TOKEN_MAX_AGE, LIVE_TOKEN_SALT  # isort: skip
from apps_registry.selectors import records_changes_of  # isort: skip

EVENTS = re.compile(r"^/apps/([0-9a-f-]{36})/events/$")
POLL_DJANGO = re.compile(r"^/apps/([0-9a-f-]{36})/changes-django/$")
WATCH_SECONDS = 0.5
HEARTBEAT_SECONDS = 15.0  # a comment line, so proxies keep an idle stream open


class Watcher:
    """The counter of one app, read for every listener of this process at once."""

    def __init__(self, app_id: uuid.UUID) -> None:
        self.app_id = app_id
        self.value: int | None = None
        self.listeners = 0
        self.changed = asyncio.Condition()
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        read = sync_to_async(records_changes_of, thread_sensitive=True)
        while self.listeners:
            value = await read(app_id=self.app_id)
            if value != self.value:
                self.value = value
                async with self.changed:
                    self.changed.notify_all()
            await asyncio.sleep(WATCH_SECONDS)
        self.task = None


WATCHERS: dict[uuid.UUID, Watcher] = {}


async def _send_text(send: Any, status: int, text: str) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def events(scope: Any, receive: Any, send: Any, app_id: uuid.UUID) -> None:
    query = parse_qs(scope.get("query_string", b"").decode())
    try:
        claims = signing.loads(query.get("t", [""])[0], salt=LIVE_TOKEN_SALT, max_age=LIVE_TOKEN_MAX_AGE)
    except signing.BadSignature:
        await _send_text(send, 403, "reload the page")
        return
    since = query.get("since", [""])[0]
    if not isinstance(claims, dict) or claims.get("a") != str(app_id) or not since.isdigit():
        await _send_text(send, 403, "reload the page")
        return
    watcher = WATCHERS.setdefault(app_id, Watcher(app_id))
    watcher.listeners += 1
    if watcher.task is None:
        watcher.task = asyncio.ensure_future(watcher.run())
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    gone = asyncio.ensure_future(_disconnected(receive))
    seen = int(since)
    try:
        while not gone.done():
            async with watcher.changed:
                try:
                    await asyncio.wait_for(
                        watcher.changed.wait_for(lambda seen=seen: watcher.value is not None and watcher.value != seen),
                        HEARTBEAT_SECONDS,
                    )
                except TimeoutError:
                    await send({"type": "http.response.body", "body": b": still here\n\n", "more_body": True})
                    continue
            seen = watcher.value if watcher.value is not None else seen
            await send({"type": "http.response.body", "body": f"data: {seen}\n\n".encode(), "more_body": True})
    except OSError:
        pass
    finally:
        watcher.listeners -= 1
        gone.cancel()


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def application(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        found = EVENTS.match(scope["path"])
        if found:
            await events(scope, receive, send, uuid.UUID(found.group(1)))
            return
        found = POLL_DJANGO.match(scope["path"])
        if found:
            # The same poll through Django's view, as under WSGI (before charming.asgi answered it itself).
            scope = {**scope, "path": f"/apps/{found.group(1)}/changes/"}
            await django_application(scope, receive, send)
            return
    await charming_application(scope, receive, send)
