"""uvicorn's HTTP protocol with Nagle's algorithm off on every connection.

With --workers N uvicorn binds the listening socket itself with `proto` 0, the accepted sockets inherit it, and
asyncio turns TCP_NODELAY on only for sockets that say IPPROTO_TCP, so each keep-alive answer written in two
sends (head, then body) waited for the client's delayed ACK: about 40 ms a request on Linux (uvicorn issue
#3149). Measured through the door on the simulated H100 at 1 client: 14 requests/s on two workers against 35 on
one. Setting the option on each connection does not depend on how the socket was bound."""

from __future__ import annotations

import asyncio
import socket

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def no_delay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class NoDelayHttpToolsProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        no_delay(transport)
        super().connection_made(transport)
