"""charming.serving: TCP_NODELAY on the connections uvicorn serves, read back from the served socket.

Each case serves a small ASGI app with uvicorn in a thread, on a listening socket made the way
`uvicorn --workers N` makes it (`Config.bind_socket()`: `socket.socket(family)`, proto 0, handed to
`Server.run(sockets=...)`), or the way one process makes its own. The app finds the connection it
is answering among the server's connections and answers that socket's TCP_NODELAY option, and the
value of the request's `X-Probe` header as the protocol handed it over, and how many body bytes it read.
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
        received = 0
        while True:
            message = await receive()
            received += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        nodelay = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        body = json.dumps({"nodelay": nodelay, "probe": probe, "received": received}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
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


def _raw_exchange(port: int, *parts: bytes) -> bytes:
    """Send `parts` one after another on a new connection (the server sees each arrive), read until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        for part in parts:
            sock.sendall(part)
            time.sleep(0.05)  # ordering only: each part reaches the server before the next (no timing asserted)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


HEAD_START = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Big: "


@pytest.mark.parametrize("http", [NODELAY_HTTPTOOLS, NODELAY_H11])
def test_a_request_head_past_the_bound_is_refused_with_400_before_it_ends(http):
    """Past uvicorn's --h11-max-incomplete-event-size (16 KiB) with the head still open: 400, connection closed."""
    with _serving(http=http, loop="uvloop", shared_socket=False) as port:
        answer = _raw_exchange(port, HEAD_START + b"a" * 10_000, b"a" * 10_000)
    assert answer.startswith(b"HTTP/1.1 400 ")
    if http == NODELAY_HTTPTOOLS:
        assert answer.endswith(b"Request line and headers too large.")


@pytest.mark.parametrize("http", [NODELAY_HTTPTOOLS, NODELAY_H11])
def test_a_request_head_within_the_bound_is_served_when_it_arrives_in_parts(http):
    with _serving(http=http, loop="uvloop", shared_socket=False) as port:
        answer = _raw_exchange(port, HEAD_START + b"a" * 6_000, b"a" * 6_000, b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize("http", [NODELAY_HTTPTOOLS, NODELAY_H11])
def test_a_body_larger_than_the_head_bound_is_not_counted_as_head(http):
    body = b"b" * 1_000_000
    head = b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
    with _serving(http=http, loop="uvloop", shared_socket=False) as port:
        answer = _raw_exchange(port, head + body[:300_000], body[300_000:])
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["received"] == len(body)


def test_stock_httptools_protocol_buffers_a_request_head_of_any_size():
    """Why charming.serving's httptools protocol bounds it."""
    with _serving(http=STOCK_HTTPTOOLS, loop="uvloop", shared_socket=False) as port:
        answer = _raw_exchange(port, HEAD_START + b"a" * 100_000, b"a" * 100_000, b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 ")


def test_nodelay_httptools_protocol_is_uvicorns_httptools_protocol():
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from charming.serving import NoDelayH11Protocol, NoDelayHttpToolsProtocol

    assert issubclass(NoDelayHttpToolsProtocol, HttpToolsProtocol)
    assert issubclass(NoDelayH11Protocol, H11Protocol)
