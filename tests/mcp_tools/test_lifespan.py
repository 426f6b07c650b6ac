"""Server start: the ASGI lifespan starts what the first calls would otherwise wait for."""

from __future__ import annotations

import asyncio

from django.core.asgi import get_asgi_application

from apps_registry.routes import celworker
from mcp_tools.asgi import application_build


def test_server_start_prestarts_a_cel_worker_before_startup_completes(monkeypatch):
    events: list[str] = []
    monkeypatch.setattr(celworker, "prestart", lambda: events.append("prestart") or 1)
    incoming = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive():
        return next(incoming)

    async def send(message):
        events.append(message["type"])

    asyncio.run(application_build(get_asgi_application())({"type": "lifespan"}, receive, send))

    assert events == ["prestart", "lifespan.startup.complete", "lifespan.shutdown.complete"]
