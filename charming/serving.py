"""uvicorn's HTTP protocol with Nagle's algorithm off on every connection, whatever socket it came from.

asyncio turns TCP_NODELAY on for an accepted connection only when the listening socket says its
protocol is TCP (`sock.proto == IPPROTO_TCP`). One uvicorn process opens its own listening socket
through getaddrinfo, which does; `uvicorn --workers N` binds one with `socket.socket(family)`
(proto 0) and shares it, so every connection the workers accept keeps Nagle on. A response goes out
as two writes (headers, then body); on a kept-alive connection the second waits for the client's
delayed ACK of the first, ~40 ms per request. Setting the option here makes both modes alike:

    uvicorn charming.asgi:application --workers 2 --http charming.serving:NoDelayH11Protocol

`benchmarks/keepalive.py` measures it (docs/operations.md, "Several workers").
"""

from __future__ import annotations

import asyncio
import socket

from uvicorn.protocols.http.h11_impl import H11Protocol


def tcp_nodelay_set(transport: asyncio.BaseTransport) -> None:
    """Turn Nagle's algorithm off for the transport's socket, when it is a TCP one."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class NoDelayH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with TCP_NODELAY set on each connection it serves."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        tcp_nodelay_set(transport)
        super().connection_made(transport)
