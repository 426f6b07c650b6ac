"""The REST API's ASGI handler: Django's own request handling, in one thread hop per request.

Django's ASGIHandler runs its middleware chain async and hops to a thread wherever a sync piece sits: the
request_started receivers, WhiteNoise (sync only), the DRF view, the response's close and the request_finished
receivers; each hop a handoff through the event loop, and each request a fresh single-thread executor for them
(asgiref's ThreadSensitiveContext). A REST call paid twice the server CPU of the same call over MCP for it
(docs/performance.md, issue 21). This handler reads the body on the event loop, then runs everything else that is
sync (the signals, the whole sync middleware chain and view, the close) in one unit on the same bounded threads
as MCP's database work (mcp_tools/database.py), and sends the response from the loop. The connection the view
used goes back to the pool in the thread that used it, by request_finished, as in Django's own handlers.

For /api/ only: its responses are whole JSON bodies (a streaming one would be read whole here). The site's pages
and static files stay on Django's ASGIHandler.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from django.core import signals
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.http import HttpResponse
from django.urls import set_script_prefix
from starlette.types import Receive, Scope, Send

from mcp_tools.database import executor


class OneHopASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)  # the sync chain: no adapter between sync and async pieces

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # type: ignore[override]
        try:
            body_file = await self.read_body(receive)
        except Exception:  # RequestAborted: the client went away before its body arrived
            return
        try:
            loop = asyncio.get_running_loop()
            context = contextvars.copy_context()
            response = await loop.run_in_executor(executor(), context.run, self._respond, scope, body_file)
        finally:
            body_file.close()
        await self.send_response(response, send)  # type: ignore[arg-type]

    def _respond(self, scope: Scope, body_file: Any) -> Any:
        """The request's whole sync part, in its thread: started, handled, its body read, closed (finished)."""
        set_script_prefix(self.get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        response: Any = error_response if request is None else self.get_response(request)
        if response.streaming:  # not from the API's views; read it here, where its iterator may use the database
            whole = HttpResponse(b"".join(response), status=response.status_code)
            for header, value in response.items():
                whole[header] = value
            response._resource_closers.append(response.close)  # closed with the whole one, below
            response = whole
        response._handler_class = self.__class__  # the sender close() names, as Django's handlers set it
        response.close()  # request_finished: this thread's connection back to the pool
        return response

    @staticmethod
    def get_script_prefix(scope: Scope) -> str:
        from django.core.handlers.asgi import get_script_prefix

        return str(get_script_prefix(scope))
