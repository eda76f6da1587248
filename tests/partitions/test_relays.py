"""The delaying, losing relay (tests/_support/relays.py), on loopback: bytes
arrive whole and in order, never sooner than the delay, and the lost share
follows the seed."""
from __future__ import annotations

import asyncio
import time

from _support.relays import Relay
from _support.waiting import run


def test_the_relay_delays_keeps_order_and_loses_by_its_seed() -> None:
    async def main() -> tuple[bytes, float, Relay]:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.close()

        target = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = target.sockets[0].getsockname()[1]
        relay = Relay(("127.0.0.1", 0), ("127.0.0.1", port), delay=0.05, loss=0.3, seed=3)
        server = await relay.serve()
        relay_port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", relay_port)
        started = time.monotonic()
        sent = b"".join(f"{i:04d}".encode() for i in range(200))
        for i in range(0, len(sent), 40):
            writer.write(sent[i:i + 40])
            await writer.drain()
            await asyncio.sleep(0.002)
        got = b""
        while len(got) < len(sent):
            got += await asyncio.wait_for(reader.read(65536), 30)
        took = time.monotonic() - started
        # End it in order: our EOF goes through the relay to the echo
        # server, whose EOF comes back the same way.
        writer.write_eof()
        while await asyncio.wait_for(reader.read(65536), 30):
            pass
        writer.close()
        await writer.wait_closed()
        for listening in (server, target):
            listening.close()
            await listening.wait_closed()
        return got, took, relay

    got, took, relay = run(main())
    assert got == b"".join(f"{i:04d}".encode() for i in range(200))
    assert took >= 2 * 0.05  # there and back, each at least the delay
    assert relay.chunks > 0 and 0 < relay.late < relay.chunks
