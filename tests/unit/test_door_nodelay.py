"""The door turns Nagle's algorithm off on every connection, also on a listening socket bound as uvicorn's workers
bind it (proto 0, where asyncio leaves it on: uvicorn issue #3149)."""

import asyncio
import socket

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from door.cli import listen_options, parse_args
from door.nodelay import NoDelayHttpToolsProtocol, no_delay


def accepted_nodelay(apply: bool) -> int:
    """TCP_NODELAY of the server side of one connection to a listener bound with proto 0."""

    async def main() -> int:
        listener = socket.socket(family=socket.AF_INET)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        seen = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport):
                if apply:
                    no_delay(transport)
                sock = transport.get_extra_info("socket")
                seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
        _, writer = await asyncio.open_connection(*listener.getsockname())
        value = await asyncio.wait_for(seen, 5)
        writer.close()
        server.close()
        await server.wait_closed()
        return value

    return asyncio.run(main())


def test_a_connection_to_a_socket_bound_as_uvicorns_workers_bind_it_gets_nagle_off():
    assert accepted_nodelay(apply=True) == 1
    assert accepted_nodelay(apply=False) == 0  # what the door had on two workers: asyncio leaves it on


def test_the_doors_uvicorn_settings_load_the_protocol_that_does_it():
    listen = listen_options(parse_args([], environ={}))
    config = Config(app=lambda *_: None, **listen)
    config.load()
    assert config.http_protocol_class is NoDelayHttpToolsProtocol and issubclass(NoDelayHttpToolsProtocol, HttpToolsProtocol)
