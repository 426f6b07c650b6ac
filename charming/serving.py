"""uvicorn's HTTP protocols with Nagle's algorithm off on every connection, whatever socket it came from.

Serve Charming with `--http charming.serving:NoDelayHttpToolsProtocol` in every mode (one process
or `--workers N`): it is uvicorn's fastest HTTP protocol (httptools) with TCP_NODELAY always on, and
header values and request heads read as uvicorn's h11 protocol reads them (see the class). uvicorn's
`--http auto` picks the stock httptools protocol when httptools is installed, which does not.

asyncio turns TCP_NODELAY on for an accepted connection only when the listening socket says its
protocol is TCP (`sock.proto == IPPROTO_TCP`). One uvicorn process opens its own listening socket
through getaddrinfo, which does; `uvicorn --workers N` binds one with `socket.socket(family)`
(proto 0) and shares it, so every connection the workers accept on asyncio's loop keeps Nagle on.
A response goes out as two writes (headers, then body); on a kept-alive connection the second waits
for the client's delayed ACK of the first, ~40 ms per request. uvloop sets TCP_NODELAY on every TCP
connection it accepts, whatever the listening socket says, so `--workers N` on uvloop (uvicorn's
choice when it is installed, as requirements.txt has it) is not affected.

Setting the option in the protocol makes every loop and mode alike, for either HTTP parser (the
httptools one also strips header values as h11 does; see its docstring):

    uvicorn charming.asgi:application --workers 2 --http charming.serving:NoDelayHttpToolsProtocol
    uvicorn charming.asgi:application --workers 2 --http charming.serving:NoDelayH11Protocol

`benchmarks/keepalive.py` measures them (docs/operations.md, "Several workers");
tests/charming/test_serving.py reads the option back from served connections.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import sys

from uvicorn.protocols.http.h11_impl import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE, H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def tcp_nodelay_set(transport: asyncio.BaseTransport) -> None:
    """Turn Nagle's algorithm off for the transport's socket, when it is a TCP one."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class NoDelayOnConnect(asyncio.Protocol):
    """Mixin for an HTTP protocol class: TCP_NODELAY set before the protocol takes the connection."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        tcp_nodelay_set(transport)
        super().connection_made(transport)


class NoDelayH11Protocol(NoDelayOnConnect, H11Protocol):
    """uvicorn's h11 protocol (pure Python), with TCP_NODELAY set on each connection it serves."""


class NoDelayHttpToolsProtocol(NoDelayOnConnect, HttpToolsProtocol):
    """uvicorn's httptools protocol (the C parser), with TCP_NODELAY set on each connection it serves.

    Two more changes make it read requests as uvicorn's h11 protocol does:

    - It strips the whitespace around each header value: RFC 9110 §5.5 excludes it from the value,
      but llhttp hands uvicorn the trailing part, and the MCP SDK then finds `Mcp-Name: list_apps `
      unequal to the body's tool name and answers 400 (the conformance suite's
      http-header-validation scenario sends such a header).
    - It bounds a request's line and headers: past the bound h11 applies (uvicorn's
      `--h11-max-incomplete-event-size`, 16 KiB by default) with the head still incomplete, it
      answers 400 and closes the connection. The stock protocol buffers a head of any size.
    """

    _head_bytes = 0  # received since the current request's head began, while that head is incomplete
    _in_body = False  # between a request's headers and the end of its body

    def data_received(self, data: bytes) -> None:
        if not self._in_body:
            self._head_bytes += len(data)
        super().data_received(data)
        if not self._in_body and self._head_bytes > self._head_limit() and not self.transport.is_closing():
            self.logger.warning("Request line and headers over %d bytes.", self._head_limit())
            self.send_400_response("Request line and headers too large.")

    def _head_limit(self) -> int:
        configured = self.config.h11_max_incomplete_event_size
        return DEFAULT_MAX_INCOMPLETE_EVENT_SIZE if configured is None else configured

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value.strip(b" \t"))

    def on_headers_complete(self) -> None:
        self._head_bytes, self._in_body = 0, True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_body = False
        super().on_message_complete()


def port_taken_problem(host: str, port: int) -> str:
    """Why a server could not listen on `host`:`port` (taken, or not an address of this machine); "" if it can.
    Binds the way uvicorn does (SO_REUSEADDR, so a port whose old connections are closing counts as free)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        return f"HOST={host} is not an address this machine can listen on ({error.strerror}): set HOST to another."
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return (
                    f"Port {port} on {host} is already in use (another server: an earlier `make run`?), so Charming "
                    f"would not start. Stop that server, or choose another port: make run PORT={port + 1} "
                    "(HOST sets the address to listen on)."
                )
            return f"Cannot listen on {host}:{port} ({error.strerror}): set PORT (or HOST) to another."
    return ""


def listen_problem(listen: str) -> str:
    """Why a server could not listen on `listen` (HOST:PORT, as `make run` passes it); "" if it can."""
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return f"--listen must be HOST:PORT with a port from 1 to 65535, got {listen!r}."
    return port_taken_problem(host.strip("[]"), int(port))


if __name__ == "__main__":
    # `python -m charming.serving HOST:PORT`: `make run`'s first step, so a taken port is said in a second, before
    # the migrations; demo_setup --listen checks again just before it says "ready".
    problem = listen_problem(sys.argv[1] if len(sys.argv) == 2 else "")
    if problem:
        print(problem, file=sys.stderr)
        sys.exit(1)
