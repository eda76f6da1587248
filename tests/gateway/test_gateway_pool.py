"""The gateway's connections (chash.gateway.channel) and per-backend pools
(chash.gateway.pool) over real sockets on 127.0.0.1: every kind of read,
its timeout and its end, flow control, and pool reuse and limits."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from _support.ports import refused_node
from _support.raw_backends import RawBackend
from _support.waiting import eventually, run
from chash.gateway.channel import BLOCK, Channel, ReadTimeout
from chash.gateway.heads import HttpError
from chash.gateway.pool import NoSlot, Pool

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
REQUEST = b"GET / HTTP/1.1\r\nHost: b\r\n\r\n"


@contextlib.asynccontextmanager
async def peer() -> AsyncIterator[tuple[Channel, asyncio.StreamWriter]]:
    """A ``Channel`` connected to a server, and the server's side of it."""
    loop = asyncio.get_running_loop()
    accepted: asyncio.Future[asyncio.StreamWriter] = loop.create_future()

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result(writer)

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, channel = await loop.create_connection(Channel, "127.0.0.1", port)
    writer = await accepted
    try:
        yield channel, writer
    finally:
        channel.abort()
        writer.transport.abort()
        server.close()
        await server.wait_closed()


async def exchange(channel: Channel) -> bytes:
    """One request on ``channel`` and the body of its answer."""
    channel.write(REQUEST)
    head = await channel.read_head(1024, 5.0, 502)
    assert head is not None and head.startswith(b"HTTP/1.1 200")
    return await channel.read_exact(2, 5.0)


# -- Channel ------------------------------------------------------------------


def test_reads_of_each_kind() -> None:
    async def main() -> None:
        async with peer() as (channel, writer):
            writer.write(b"GET / HTTP/1.1\r\nHost: h\r\n\r\nline one\r\nabc12345")
            assert await channel.read_head(1024, 5.0, 400) == \
                b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"
            assert await channel.read_line(100, 5.0) == b"line one"
            assert await channel.read_exact(3, 5.0) == b"abc"
            await eventually(lambda: channel.buffered == 5, "the rest arrives")
            assert await channel.read_some(3, 5.0) == b"123"
            assert await channel.read_some(100, 5.0) == b"45"
            assert channel.buffered == 0
    run(main())


@pytest.mark.parametrize("read", ["wait_data", "read_some", "read_exact", "read_line",
                                  "read_head"])
def test_a_silent_peer_times_each_read_out(read: str) -> None:
    async def main() -> None:
        async with peer() as (channel, writer):
            writer.write(b"partial")  # never a whole head, line or 100 bytes
            calls = {
                "wait_data": lambda: channel.wait_data(0.3),
                "read_some": lambda: channel.read_some(10, 0.3),
                "read_exact": lambda: channel.read_exact(100, 0.3),
                "read_line": lambda: channel.read_line(100, 0.3),
                "read_head": lambda: channel.read_head(1024, 0.3, 400),
            }
            if read in ("wait_data", "read_some"):
                await eventually(lambda: channel.buffered == 7, "the bytes arrive")
                assert await channel.read_exact(7, 1.0) == b"partial"
            started = time.monotonic()
            with pytest.raises(ReadTimeout):
                await calls[read]()
            assert 0.25 <= time.monotonic() - started < 5.0
    run(main())


def test_the_read_timer_is_rearmed_for_each_read() -> None:
    # One timer per connection, moved lazily: a read that completes early
    # leaves it armed, and it must neither fire into the next read too
    # soon nor let that read wait past its own timeout.
    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with peer() as (channel, writer):
            loop.call_later(0.1, writer.write, b"x")
            assert await channel.read_some(10, 0.5) == b"x"
            started = time.monotonic()
            with pytest.raises(ReadTimeout):
                await channel.read_some(10, 0.8)
            assert 0.75 <= time.monotonic() - started < 5.0
            started = time.monotonic()
            with pytest.raises(ReadTimeout):
                await channel.read_some(10, 0.2)
            assert time.monotonic() - started < 0.7
    run(main())


def test_the_ends_of_a_connection() -> None:
    async def main() -> None:
        async with peer() as (channel, writer):
            writer.close()
            assert await channel.read_head(1024, 5.0, 400) is None  # closed before a byte
            assert await channel.read_some(10, 5.0) == b""
            assert channel.peer_closed
        async with peer() as (channel, writer):
            writer.write(b"GET / HT")
            writer.close()
            with pytest.raises(HttpError) as exc:
                await channel.read_head(1024, 5.0, 400)
            assert (exc.value.status, exc.value.reason) == (400, "connection closed mid-head")
        async with peer() as (channel, writer):
            writer.write(b"abc")
            writer.close()
            with pytest.raises(EOFError, match="after 3 of 5 bytes"):
                await channel.read_exact(5, 5.0)
        async with peer() as (channel, writer):
            writer.write(b"no end of line")
            writer.close()
            with pytest.raises(HttpError, match="malformed chunked body"):
                await channel.read_line(100, 5.0)
    run(main())


def test_limits_on_heads_and_lines() -> None:
    async def main() -> None:
        async with peer() as (channel, writer):
            writer.write(b"GET / HTTP/1.1\r\nX: " + b"y" * 200 + b"\r\n\r\n")
            with pytest.raises(HttpError) as exc:
                await channel.read_head(100, 5.0, 400)
            assert exc.value.status == 431  # a client's head: too large
        async with peer() as (channel, writer):
            writer.write(b"HTTP/1.1 200 OK\r\nX: " + b"y" * 200 + b"\r\n\r\n")
            with pytest.raises(HttpError) as exc:
                await channel.read_head(100, 5.0, 502)
            assert exc.value.status == 502  # a backend's head: a bad gateway
        async with peer() as (channel, writer):
            writer.write(b"f" * 50)
            with pytest.raises(HttpError):
                await channel.read_line(10, 5.0)
    run(main())


def test_reading_pauses_while_the_buffer_is_full() -> None:
    async def main() -> None:
        async with peer() as (channel, writer):
            data = bytes(range(256)) * (4 * BLOCK // 256) * 4  # 1 MiB
            writer.write(data)
            await asyncio.sleep(0.3)
            # Paused above BLOCK: the rest waits in the kernel and the writer.
            assert BLOCK < channel.buffered < len(data)
            assert await channel.read_exact(len(data), 5.0) == data
    run(main())


def test_an_idle_connection_finishes_and_writes_fail_once_lost() -> None:
    async def main() -> None:
        async with peer() as (channel, writer):
            waiting = asyncio.ensure_future(channel.wait_data(30.0))
            await asyncio.sleep(0.05)
            channel.finish_if_idle()
            await asyncio.wait_for(waiting, 1.0)  # woken, as by the peer's EOF
            assert channel.peer_closed and not channel.lost
            channel.close()
            assert channel.lost
            with pytest.raises(ConnectionResetError):
                channel.write(b"x")
            with pytest.raises(ConnectionResetError):
                await channel.drain()
    run(main())


# -- Pool ---------------------------------------------------------------------


def test_a_released_connection_is_reused() -> None:
    async def main() -> None:
        backend = await RawBackend(ANSWER).start()
        pool = Pool(backend.address, 10)
        deadline = asyncio.get_running_loop().time() + 10
        try:
            first, reused = await pool.acquire(2.0, deadline)
            assert not reused and pool.open == 1
            assert await exchange(first) == b"ok"
            pool.release(first, True)
            assert pool.idle == [first]
            again, reused = await pool.acquire(2.0, deadline)
            assert again is first and reused
            assert await exchange(again) == b"ok"
            assert backend.connections == 1 and len(backend.requests) == 2
            # fresh: a new connection even with one idle.
            pool.release(again, True)
            other, reused = await pool.acquire(2.0, deadline, fresh=True)
            assert other is not first and not reused and pool.open == 2
            assert await exchange(other) == b"ok"
            assert backend.connections == 2
            # Not to be reused: closed, and its slot freed.
            pool.release(other, False)
            assert other.lost and pool.open == 1
            pool.close()
            assert first.lost and pool.open == 0 and pool.idle == []
        finally:
            await backend.stop()
    run(main())


def test_a_connection_the_backend_closed_is_not_reused() -> None:
    async def main() -> None:
        backend = await RawBackend(ANSWER, close=True).start()
        pool = Pool(backend.address, 10)
        deadline = asyncio.get_running_loop().time() + 10
        try:
            first, _ = await pool.acquire(2.0, deadline)
            assert await exchange(first) == b"ok"
            await eventually(lambda: first.peer_closed, "the backend's close arrives")
            pool.release(first, True)
            second, reused = await pool.acquire(2.0, deadline)
            assert second is not first and not reused
            assert first.lost and pool.open == 1
            assert await exchange(second) == b"ok"
            pool.release(second, False)
        finally:
            await backend.stop()
    run(main())


def test_the_limit_holds_requests_until_a_connection_is_free() -> None:
    async def main() -> None:
        backend = await RawBackend(ANSWER).start()
        pool = Pool(backend.address, 1)
        loop = asyncio.get_running_loop()
        try:
            held, _ = await pool.acquire(2.0, loop.time() + 10)
            waiting = asyncio.ensure_future(pool.acquire(2.0, loop.time() + 10))
            await asyncio.sleep(0.1)
            assert not waiting.done() and pool.open == 1
            pool.release(held, True)
            handed, reused = await asyncio.wait_for(waiting, 2.0)
            assert handed is held and reused
            # Until the deadline only: then NoSlot, and no waiter is left behind.
            started = time.monotonic()
            with pytest.raises(NoSlot):
                await pool.acquire(2.0, loop.time() + 0.3)
            assert 0.25 <= time.monotonic() - started < 5.0
            assert not pool.waiters
            # A connection closed instead of returned frees its slot too.
            waiting = asyncio.ensure_future(pool.acquire(2.0, loop.time() + 10))
            await asyncio.sleep(0.05)
            pool.release(handed, False)
            new, reused = await asyncio.wait_for(waiting, 2.0)
            assert new is not handed and not reused and pool.open == 1
            pool.release(new, False)
            assert backend.connections == 2
        finally:
            await backend.stop()
    run(main())


def test_no_limit_and_refused_connections() -> None:
    async def main() -> None:
        backend = await RawBackend(ANSWER).start()
        deadline = asyncio.get_running_loop().time() + 10
        try:
            pool = Pool(backend.address, 0)  # 0: no limit
            held = [await pool.acquire(2.0, deadline) for _ in range(5)]
            assert pool.open == 5 and not any(reused for _, reused in held)
            for channel, _ in held:
                pool.release(channel, False)
            assert pool.open == 0
            refused = Pool(refused_node(), 1)
            with pytest.raises(OSError):
                await refused.acquire(2.0, deadline)
            assert refused.open == 0  # the failed connection gave its slot back
            with pytest.raises(OSError):
                await refused.acquire(2.0, deadline)
        finally:
            await backend.stop()
    run(main())
