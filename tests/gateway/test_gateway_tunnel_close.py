"""Closing a WebSocket tunnel while one end has stopped reading mid-frame.

The gateway closes a tunnel at a ring change (1012) and at a stop (1001)
with a close frame between two frames.  Here one end stops reading in the
middle of a 16 MiB message until the socket buffers on the way are full
and the gateway holds the sender back: the client (a message from the
backend) or the backend (a message from the client).  Once the reader
resumes, within ``tunnel_close_grace``, the message in flight arrives
whole and then the close frame: 1012 or 1001 to the client, 1001 to the
backend.  When the grace runs out first, the connection is cut without a
frame, and the log says so.  Clients: the websockets library's and
aiohttp's.  Nothing here waits on the clock: each step waits for the state
it needs (the gateway holding the sender back, the close pending), within
generous timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
websockets = pytest.importorskip("websockets", reason="websockets is not installed")

from websockets.asyncio.client import connect  # noqa: E402
from websockets.asyncio.server import ServerConnection, serve  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from _support.waiting import eventually, run  # noqa: E402
from chash.gateway import Gateway, GatewayConfig  # noqa: E402
from chash.gateway.reload import RingChanges  # noqa: E402
from chash.gateway.tunnel import Tunnel  # noqa: E402

#: Far more than the socket buffers between the two ends hold.
BIG = 16 << 20
KEY = "user-7"


class Backend:
    """A websockets server.  ``send:N`` asks for a binary message of N
    bytes; ``pause`` stops reading (answered ``paused``) until ``resume``
    is set; any other message is counted (its length) in ``received``.
    ``closed`` gets the close code the backend received."""

    def __init__(self) -> None:
        self.resume = asyncio.Event()
        self.received: list[int] = []
        self.closed: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self.server: Any = None

    async def handler(self, ws: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for message in ws:
                if message == "pause":
                    ws.transport.pause_reading()  # the next message stays in flight
                    await ws.send("paused")
                    await self.resume.wait()
                    ws.transport.resume_reading()
                elif isinstance(message, str) and message.startswith("send:"):
                    await ws.send(b"x" * int(message[5:]))
                else:
                    self.received.append(len(message))
        if not self.closed.done():
            rcvd = ws.protocol.close_rcvd
            self.closed.set_result(None if rcvd is None else rcvd.code)

    @property
    def address(self) -> str:
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"


@contextlib.asynccontextmanager
async def cluster(grace: float = 30.0) -> AsyncIterator[tuple[Gateway, dict[str, Backend]]]:
    backends = {name: Backend() for name in ("a", "b")}
    servers = []
    for backend in backends.values():
        backend.server = await serve(backend.handler, "127.0.0.1", 0, max_size=None,
                                     ping_interval=None, compression=None)
        servers.append(backend.server)
    gateway = Gateway({name: b.address for name, b in backends.items()},
                      GatewayConfig(health=False, on_ring_change="close",
                                    tunnel_close_grace=grace))
    try:
        await gateway.start()
        yield gateway, backends
    finally:
        await gateway.stop()
        for server in servers:
            server.close()
            await server.wait_closed()


def ws_url(gateway: Gateway) -> str:
    return gateway.url.replace("http://", "ws://") + "/room"


def the_tunnel(gateway: Gateway) -> Tunnel:
    (tunnel,) = gateway.tunnels.live
    return tunnel


class WebsocketsClient:
    """The websockets library's client, over a socket with a small
    receive buffer; reading paused and resumed at its transport."""

    async def open(self, gateway: Gateway) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        sock.setblocking(False)
        host, port = gateway.url.removeprefix("http://").rsplit(":", 1)
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        self.ws = await connect(ws_url(gateway), sock=sock, additional_headers={"X-User-Id": KEY},
                                max_size=None, ping_interval=None, close_timeout=60,
                                compression=None)  # 16 MiB of x: no deflating to a few KiB

    async def send(self, message: str | bytes) -> None:
        await self.ws.send(message)

    async def receive(self) -> str | bytes:
        return await asyncio.wait_for(self.ws.recv(), 60)

    def pause(self) -> None:
        self.ws.transport.pause_reading()

    def resume(self) -> None:
        self.ws.transport.resume_reading()

    async def close_code(self) -> int | None:
        """The close code of the close frame received (None: none came)."""
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(self.ws.recv(), 60)
        return None if closed.value.rcvd is None else closed.value.rcvd.code

    async def aclose(self) -> None:
        self.ws.transport.abort()


class AiohttpClient:
    """aiohttp's WebSocket client; reading paused and resumed at its
    connection's protocol (which pauses the transport)."""

    async def open(self, gateway: Gateway) -> None:
        self.session = aiohttp.ClientSession()
        self.ws = await self.session.ws_connect(ws_url(gateway), headers={"X-User-Id": KEY},
                                                max_msg_size=0, autoping=False)

    async def send(self, message: str | bytes) -> None:
        if isinstance(message, str):
            await self.ws.send_str(message)
        else:
            await self.ws.send_bytes(message)

    async def receive(self) -> str | bytes:
        msg = await self.ws.receive(timeout=60)
        assert msg.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY), msg
        data: str | bytes = msg.data
        return data

    def pause(self) -> None:
        self.ws._conn.protocol.pause_reading()

    def resume(self) -> None:
        self.ws._conn.protocol.resume_reading()

    async def close_code(self) -> int | None:
        msg = await self.ws.receive(timeout=60)
        if msg.type is aiohttp.WSMsgType.CLOSE:
            code: int = msg.data
            return code
        assert msg.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR), msg
        return None

    async def aclose(self) -> None:
        await self.ws.close()
        await self.session.close()


CLIENTS = {"websockets": WebsocketsClient, "aiohttp": AiohttpClient}


async def hold_a_frame_open(client: WebsocketsClient | AiohttpClient, tunnel: Tunnel) -> None:
    """The client stops reading, then asks for a 16 MiB message: once the
    socket buffers are full, the gateway holds the backend back mid-frame."""
    client.pause()
    await client.send(f"send:{BIG}")
    await eventually(lambda: tunnel.client.write_paused and not tunnel.boundaries.at_boundary,
                     "the client holding a frame open", timeout=60)


async def change_or_stop(gateway: Gateway, trigger: str) -> asyncio.Future[None] | None:
    """A ring change that takes the key's node out (1012), or a stop (1001)."""
    if trigger == "ring_change":
        owner = gateway.router.get_target_node(KEY)
        assert owner is not None
        gateway.reconfigure(gateway.config, RingChanges(removed=(owner,)))
        return None
    return asyncio.ensure_future(gateway.stop())


@contextlib.asynccontextmanager
async def a_tunnel(client_kind: str = "websockets", grace: float = 30.0) -> AsyncIterator[
        tuple[Gateway, dict[str, Backend], WebsocketsClient | AiohttpClient, Tunnel]]:
    """A cluster (``grace`` its ``tunnel_close_grace``), a client of that
    kind connected through it, and their tunnel; the client is closed at
    the end."""
    async with cluster(grace) as (gateway, backends):
        client = CLIENTS[client_kind]()
        await client.open(gateway)
        try:
            yield gateway, backends, client, the_tunnel(gateway)
        finally:
            await client.aclose()


async def closed_for(gateway: Gateway, tunnel: Tunnel, trigger: str,
                     stopping: asyncio.Future[None] | None) -> None:
    """The stop (if that was the trigger) done, the tunnel ended and counted
    closed once for its node and the trigger."""
    if stopping is not None:
        await asyncio.wait_for(stopping, 60)
    await eventually(lambda: not gateway.tunnels.live, "the tunnel ended")
    assert gateway.tunnels.counts().closed == {(tunnel.node, trigger): 1}


@pytest.mark.parametrize("trigger", ["ring_change", "stop"])
@pytest.mark.parametrize("client_kind", sorted(CLIENTS))
def test_a_client_not_reading_mid_frame_gets_the_frame_then_the_close(
        client_kind: str, trigger: str) -> None:
    """Backend to client: the client stops reading in the middle of a
    16 MiB message; after the change (or stop) it resumes, and gets the
    whole message, then the close frame."""
    async def main() -> None:
        async with a_tunnel(client_kind) as (gateway, backends, client, tunnel):
            await hold_a_frame_open(client, tunnel)
            stopping = await change_or_stop(gateway, trigger)
            await eventually(lambda: tunnel.reason is not None, "the close begun")
            code = 1012 if trigger == "ring_change" else 1001
            assert tunnel.reason == trigger and tunnel.closing == code  # pending
            client.resume()
            message = await client.receive()
            assert message == b"x" * BIG
            assert await client.close_code() == code
            assert await asyncio.wait_for(backends[tunnel.node].closed, 60) == 1001
            await closed_for(gateway, tunnel, trigger, stopping)
    run(main(), timeout=180)


@pytest.mark.parametrize("trigger", ["ring_change", "stop"])
@pytest.mark.parametrize("client_kind", sorted(CLIENTS))
def test_a_backend_not_reading_mid_frame_gets_the_frame_then_the_close(
        client_kind: str, trigger: str) -> None:
    """Client to backend: the backend stops reading in the middle of the
    client's 16 MiB message; the client gets its close frame, and once the
    backend resumes it gets the whole message, then a close frame (1001)."""
    async def main() -> None:
        async with a_tunnel(client_kind) as (gateway, backends, client, tunnel):
            backend = backends[tunnel.node]
            await client.send("pause")
            assert await client.receive() == "paused"
            sending = asyncio.ensure_future(client.send(b"y" * BIG))
            await eventually(lambda: tunnel.backend.write_paused
                             and not tunnel.client_frames.at_boundary,
                             "the backend holding a frame open", timeout=60)
            stopping = await change_or_stop(gateway, trigger)
            await eventually(lambda: tunnel.reason is not None, "the close begun")
            code = 1012 if trigger == "ring_change" else 1001
            assert tunnel.reason == trigger
            backend.resume.set()
            with contextlib.suppress(ConnectionClosed, ConnectionError):
                await asyncio.wait_for(sending, 60)
            assert await client.close_code() == code
            assert await asyncio.wait_for(backend.closed, 60) == 1001
            assert backend.received == [BIG]  # the message in flight, whole
            await closed_for(gateway, tunnel, trigger, stopping)
    run(main(), timeout=180)


def test_a_client_still_not_reading_when_the_grace_runs_out_is_cut(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        async with a_tunnel(grace=1.0) as (gateway, _, client, tunnel):
            await hold_a_frame_open(client, tunnel)
            with caplog.at_level(logging.WARNING, logger="chash.gateway"):
                await change_or_stop(gateway, "ring_change")
                await eventually(lambda: not gateway.tunnels.live,
                                 "the tunnel cut after the grace", timeout=60)
            client.resume()
            assert await client.close_code() is None  # cut: no close frame
            cut = [r for r in caplog.records if "cut without its close frame" in r.message]
            assert len(cut) == 1 and "within 1 s" in cut[0].message
            assert gateway.tunnels.counts().closed == {(tunnel.node, "ring_change"): 1}
    run(main(), timeout=120)


# -- ring changes reach the tunnels as they happen ----------------------------------

def test_a_health_verdict_closes_the_moved_tunnel_as_it_is_applied() -> None:
    """The verdict that takes the key's node out closes its tunnel in the
    same call: the gateway's own change hook, no look at the ring later."""
    async def main() -> None:
        backends = {name: Backend() for name in ("a", "b")}
        for backend in backends.values():
            backend.server = await serve(backend.handler, "127.0.0.1", 0, compression=None)
        gateway = Gateway({name: b.address for name, b in backends.items()},
                          GatewayConfig(health_interval=3600.0, fall=3))
        try:
            await gateway.start()
            client = WebsocketsClient()
            await client.open(gateway)
            tunnel = the_tunnel(gateway)
            health = gateway.health
            assert health is not None
            for _ in range(3):
                if tunnel.node in gateway.router:
                    health.report_failure(tunnel.node, "refused")
            assert tunnel.node not in gateway.router
            assert tunnel.reason == "ring_change"  # at once, nothing awaited
            assert await client.close_code() == 1012
            await client.aclose()
        finally:
            await gateway.stop()
            for backend in backends.values():
                backend.server.close()
                await backend.server.wait_closed()
    run(main(), timeout=120)


def test_a_change_made_from_another_thread_reaches_the_tunnels() -> None:
    """``Gateway.ring_changed`` from a thread (a shared ring's driver, a
    record set's poller) closes the moved tunnels on the loop."""
    async def main() -> None:
        async with cluster() as (gateway, _):
            client = WebsocketsClient()
            await client.open(gateway)
            tunnel = the_tunnel(gateway)

            def elsewhere() -> None:
                gateway.router.remove_service_node(tunnel.node)
                gateway.ring_changed()

            await asyncio.to_thread(elsewhere)
            assert await client.close_code() == 1012
            assert tunnel.reason == "ring_change"
            await client.aclose()
    run(main(), timeout=120)


def test_a_shared_ring_change_closes_the_moved_tunnel() -> None:
    """With a Redis membership (its own threads apply the store's changes
    to the router), another instance removes the key's node: the
    membership's listener tells the gateway, whose loop closes the tunnel
    with 1012."""
    redis = pytest.importorskip("redis", reason="redis-py is not installed")
    from _support.redis_server import running_server
    from chash import ConsistentHashRouter
    from chash.membership import RedisMembership

    servers = running_server()
    srv = next(servers)
    try:
        async def main() -> None:
            backends = {name: Backend() for name in ("a", "b")}
            for backend in backends.values():
                backend.server = await serve(backend.handler, "127.0.0.1", 0, compression=None)
            router = ConsistentHashRouter()
            for name in backends:
                router.add_service_node(name)
            client = redis.Redis(**srv.client_kwargs())
            shared = RedisMembership(router, client, "rooms", bootstrap=True)
            operator = RedisMembership(ConsistentHashRouter(), client, "rooms")
            await asyncio.to_thread(shared.start)
            gateway = Gateway({name: b.address for name, b in backends.items()},
                              GatewayConfig(health=False, on_ring_change="close"),
                              membership=shared)
            try:
                await gateway.start()
                ws = WebsocketsClient()
                await ws.open(gateway)
                tunnel = the_tunnel(gateway)
                await asyncio.to_thread(operator.refresh)
                await asyncio.to_thread(operator.remove_node, tunnel.node)
                assert await ws.close_code() == 1012
                assert tunnel.reason == "ring_change" and tunnel.node not in router
                await ws.aclose()
            finally:
                await gateway.stop()
                await asyncio.to_thread(shared.stop)
                client.close()
                for backend in backends.values():
                    backend.server.close()
                    await backend.server.wait_closed()
        run(main(), timeout=120)
    finally:
        servers.close()


def test_a_stop_waits_for_the_tunnels_own_grace() -> None:
    """``stop(grace)`` shorter than ``tunnel_close_grace``: a client that
    resumes after the first, within the second, still gets its frame and
    its 1001."""
    async def main() -> None:
        async with a_tunnel(grace=30.0) as (gateway, _, client, tunnel):
            await hold_a_frame_open(client, tunnel)
            stopping = asyncio.ensure_future(gateway.stop(grace=0.1))
            await eventually(lambda: tunnel.reason == "stop", "the close begun")
            await asyncio.sleep(1.0)  # well past the stop's own grace
            assert not stopping.done()
            client.resume()
            assert await client.receive() == b"x" * BIG
            assert await client.close_code() == 1001
            await asyncio.wait_for(stopping, 60)
    run(main(), timeout=120)
