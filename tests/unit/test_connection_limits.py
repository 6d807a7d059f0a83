"""The HTTP fronts' connection cap (``vera.entrypoints.connection_limits``), under real
uvicorn on a loopback port: a connection past the cap is closed as soon as it is accepted,
and the ones within it are served as before. (The header timeout is checked against the
running fronts, ``tests/fuzz/test_transport.py``.)"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from vera.entrypoints.connection_limits import bounded_http_protocol


async def ok(request):
    return PlainTextResponse("ok")


@contextlib.asynccontextmanager
async def capped_server(max_connections: int) -> AsyncIterator[int]:
    config = uvicorn.Config(
        Starlette(routes=[Route("/", ok)]),
        host="127.0.0.1",
        port=0,
        lifespan="off",
        log_config=None,
        http=bounded_http_protocol(60.0, max_connections),
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done()
        await asyncio.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await task


async def get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    return await asyncio.wait_for(reader.readline(), 10)


async def test_a_connection_past_the_cap_is_closed_and_the_others_are_served() -> None:
    async with capped_server(max_connections=2) as port:
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed at once
        writer.close()
        for held_reader, held_writer in held:
            assert (await get(held_reader, held_writer)).startswith(b"HTTP/1.1 200")
        held[0][1].close()
        await held[0][1].wait_closed()
        # A freed slot is used once the server notices the close: until then a new
        # connection is still past the cap and closed at once, so try again.
        async with asyncio.timeout(30):
            while True:
                again = await asyncio.open_connection("127.0.0.1", port)
                try:
                    answer = await get(*again)
                except ConnectionError:
                    answer = b""
                if answer:
                    break
                again[1].close()
                await asyncio.sleep(0.05)
        assert answer.startswith(b"HTTP/1.1 200")
        for _, held_writer in (held[1], again):
            held_writer.close()
