"""charming.serving: TCP_NODELAY on the connections uvicorn serves, read back from the served socket.

Each case serves a small ASGI app with uvicorn in a thread, on a listening socket made the way
`uvicorn --workers N` makes it (`Config.bind_socket()`: `socket.socket(family)`, proto 0, handed to
`Server.run(sockets=...)`), or the way one process makes its own. The app finds the connection it
is answering among the server's connections and answers that socket's TCP_NODELAY option, and the
value of the request's `X-Probe` header as the protocol handed it over.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn

STOCK_H11 = "h11"
STOCK_HTTPTOOLS = "httptools"
NODELAY_H11 = "charming.serving:NoDelayH11Protocol"
NODELAY_HTTPTOOLS = "charming.serving:NoDelayHttpToolsProtocol"


def _nodelay_app(server_box: list[uvicorn.Server]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        connections: set[Any] = server_box[0].server_state.connections
        (protocol,) = [p for p in connections if p.client == scope["client"]]
        sock = protocol.transport.get_extra_info("socket")
        probe = [value.decode() for name, value in scope["headers"] if name == b"x-probe"]
        body = json.dumps({"nodelay": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY), "probe": probe}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    return app


@contextmanager
def _serving(*, http: str, loop: str, shared_socket: bool) -> Iterator[int]:
    """uvicorn serving the probe app with this protocol class and loop; yields the port."""
    server_box: list[uvicorn.Server] = []
    config = uvicorn.Config(
        _nodelay_app(server_box), host="127.0.0.1", port=0, http=http, loop=loop, lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    server_box.append(server)
    if shared_socket:  # what `uvicorn --workers N` does: bind once, every worker serves that socket
        sock = config.bind_socket()
        port = sock.getsockname()[1]
        target: Any = lambda: server.run(sockets=[sock])  # noqa: E731
    else:  # one process: uvicorn opens its own listening socket (getaddrinfo, proto IPPROTO_TCP)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        config.port = port
        target = server.run
    thread = threading.Thread(target=target, name="serving-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        if shared_socket:
            sock.close()


def _nodelay_seen(port: int) -> list[int]:
    """TCP_NODELAY of the served socket, for two requests on one kept-alive connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        seen = []
        for _ in range(2):
            connection.request("GET", "/")
            response = connection.getresponse()
            assert response.status == 200
            seen.append(json.loads(response.read())["nodelay"])
        return seen
    finally:
        connection.close()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("http", [NODELAY_H11, NODELAY_HTTPTOOLS])
@pytest.mark.parametrize("shared_socket", [True, False], ids=["workers-socket", "own-socket"])
def test_nodelay_protocols_turn_nagle_off_on_every_served_connection(http, loop, shared_socket):
    with _serving(http=http, loop=loop, shared_socket=shared_socket) as port:
        assert _nodelay_seen(port) == [1, 1]


@pytest.mark.parametrize("http", [STOCK_H11, STOCK_HTTPTOOLS])
def test_stock_protocols_on_asyncio_leave_nagle_on_for_a_workers_socket(http):
    """The cause charming/serving.py fixes: asyncio skips TCP_NODELAY when the listening socket's proto is 0."""
    with _serving(http=http, loop="asyncio", shared_socket=True) as port:
        assert _nodelay_seen(port) == [0, 0]


@pytest.mark.parametrize("http", [STOCK_H11, STOCK_HTTPTOOLS])
def test_stock_protocols_on_uvloop_turn_nagle_off_for_a_workers_socket(http):
    """docs/operations.md says `uvicorn --workers N` on uvloop needs no protocol class: uvloop sets it itself."""
    with _serving(http=http, loop="uvloop", shared_socket=True) as port:
        assert _nodelay_seen(port) == [1, 1]


def _probe_header_seen(port: int, value: str) -> list[str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/", headers={"X-Probe": value})
        response = connection.getresponse()
        assert response.status == 200
        return json.loads(response.read())["probe"]
    finally:
        connection.close()


@pytest.mark.parametrize("http", [NODELAY_HTTPTOOLS, NODELAY_H11, STOCK_H11])
def test_header_values_reach_the_app_without_surrounding_whitespace(http):
    """RFC 9110 §5.5; the MCP SDK compares Mcp-Name and Mcp-Method with the body as they arrive."""
    with _serving(http=http, loop="uvloop", shared_socket=False) as port:
        assert _probe_header_seen(port, " \t list_apps \t ") == ["list_apps"]
        assert _probe_header_seen(port, "two  words") == ["two  words"]


def test_stock_httptools_protocol_keeps_trailing_whitespace_in_header_values():
    """Why charming.serving's httptools protocol strips it, and uvicorn's `--http auto` is not enough."""
    with _serving(http=STOCK_HTTPTOOLS, loop="uvloop", shared_socket=False) as port:
        assert _probe_header_seen(port, " list_apps \t ") == ["list_apps \t "]


def test_nodelay_httptools_protocol_is_uvicorns_httptools_protocol():
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from charming.serving import NoDelayH11Protocol, NoDelayHttpToolsProtocol

    assert issubclass(NoDelayHttpToolsProtocol, HttpToolsProtocol)
    assert issubclass(NoDelayH11Protocol, H11Protocol)
