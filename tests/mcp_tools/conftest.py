"""A live Charming server (uvicorn in a thread of this process, on the test database) and real MCP clients.

The 2025-11-25 protocol streams SSE, which in-process ASGI transports buffer forever, so the SDK
client talks to a real socket. Tests using it need committed data: `transactional_db`.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp_types as types
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from apps_registry.services.tokens import token_create
from charming.serving import NoDelayHttpToolsProtocol  # what docs/operations.md serves with
from tests.factories import UserFactory

LEGACY = "legacy"  # 2025-11-25: initialize, Mcp-Session-Id, SSE
MODERN = "2026-07-28"  # stateless, multi-round-trip elicitation
MODES = [pytest.param(LEGACY, id="2025-11-25"), pytest.param(MODERN, id="2026-07-28")]


@dataclass(frozen=True)
class LiveServer:
    base_url: str

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def live_server_running(app: Any) -> Iterator[LiveServer]:
    """`app` served by uvicorn in a thread of this process, on a free port, until the block ends."""
    port = _free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, lifespan="on", log_level="warning", http=NoDelayHttpToolsProtocol
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="live-mcp-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the live MCP server did not start")
        time.sleep(0.05)
    yield LiveServer(base_url=f"http://127.0.0.1:{port}")
    server.should_exit = True
    thread.join(timeout=10)
    # Nothing to close: each of the server's units of database work gave its connection back when it ended
    # (mcp_tools.database), and Django closes the pool before it drops the test database.


@pytest.fixture(scope="session")
def live_server_mcp(django_db_setup) -> Iterator[LiveServer]:
    from django.core.asgi import get_asgi_application

    from mcp_tools.asgi import application_build

    with live_server_running(application_build(get_asgi_application())) as server:
        yield server


@pytest.fixture
def live(live_server_mcp, transactional_db) -> LiveServer:
    return live_server_mcp


@dataclass(frozen=True)
class Agent:
    """A user and the API token their agent connects with."""

    user: Any
    token: str


def make_agent(username: str) -> Agent:
    user = UserFactory(username=username)
    return Agent(user=user, token=token_create(user=user, name="mcp-test").plaintext)


@pytest.fixture
def alice(live) -> Agent:
    return make_agent("alice")


@pytest.fixture
def bob(live) -> Agent:
    return make_agent("bob")


def run(coro: Any) -> Any:
    """Run a client coroutine from a sync test (the ORM stays in sync code)."""
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


def answer_with(action: str, confirm: bool = True):
    """An elicitation callback; passing one makes the client declare the elicitation capability."""
    prompts: list[types.ElicitRequestParams] = []

    async def answer(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        prompts.append(params)
        if action == "accept":
            return types.ElicitResult(action="accept", content={"confirm": confirm})
        return types.ElicitResult(action=action)  # type: ignore[arg-type]

    answer.prompts = prompts  # type: ignore[attr-defined]
    return answer


def mcp_client(server: LiveServer, token: str, mode: str, elicitation=None) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    kwargs: dict[str, Any] = {"mode": mode}
    if elicitation is not None:
        kwargs["elicitation_callback"] = elicitation
    return Client(streamable_http_client(server.mcp_url, http_client=http), **kwargs)


async def _call(server: LiveServer, token: str, mode: str, name: str, args: dict[str, Any], elicitation=None):
    async with mcp_client(server, token, mode, elicitation) as c:
        return await c.call_tool(name, args)


def call_tool(server: LiveServer, agent: Agent, mode: str, name: str, args: dict[str, Any], elicitation=None):
    return run(_call(server, agent.token, mode, name, args, elicitation))


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def call_tool_ok(server, agent, mode, name, args, elicitation=None) -> types.CallToolResult:
    result = call_tool(server, agent, mode, name, args, elicitation)
    assert result.is_error is not True, text_of(result)
    return result


def call_tool_error(server, agent, mode, name, args, elicitation=None) -> types.CallToolResult:
    result = call_tool(server, agent, mode, name, args, elicitation)
    assert result.is_error is True, text_of(result)
    return result
