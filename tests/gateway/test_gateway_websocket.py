"""WebSocket through the gateway, against real parts: the websockets
library's client and server, aiohttp's WebSocket client and server.

A handshake is routed by its key like a request (its owner is the ring's
``get_target_node``), fails over before the 101, then the tunnel carries
text, binary, fragmented and 1 MiB messages, pings and close codes both
ways, a hundred at once; idle tunnels close, the cap answers 503, other
upgrades are served as plain requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
websockets = pytest.importorskip("websockets", reason="websockets is not installed")

from websockets.asyncio.client import connect  # noqa: E402
from websockets.asyncio.server import ServerConnection, serve  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402

from _support.gateways import raw, split  # noqa: E402
from _support.waiting import eventually, run  # noqa: E402
from chash.gateway import Gateway, GatewayConfig  # noqa: E402


class WsBackend:
    """A websockets server: says its name and the handshake's key, then
    echoes every message; ``close:CODE`` closes with that code."""

    def __init__(self, name: str, tls: Any = None) -> None:
        self.name = name
        self.tls = tls  # a server ssl.SSLContext: wss
        self.server: Any = None
        self.handshakes: list[Any] = []  # the handshakes' header fields
        self.statuses: list[int] = []  # answer these statuses to the next handshakes

    async def handler(self, ws: ServerConnection) -> None:
        request = ws.request
        assert request is not None
        with contextlib.suppress(ConnectionClosed):  # the gateway may close it
            await ws.send(json.dumps({"backend": self.name,
                                      "key": request.headers.get("X-User-Id"),
                                      "path": request.path}))
            async for message in ws:
                if isinstance(message, str) and message.startswith("close:"):
                    await ws.close(int(message[6:]), "asked")
                    return
                await ws.send(message)

    def process_request(self, ws: ServerConnection, request: Any) -> Any:
        self.handshakes.append(request.headers)
        if self.statuses:
            return ws.respond(self.statuses.pop(0), "no\n")
        return None

    async def start(self) -> WsBackend:
        self.server = await serve(self.handler, "127.0.0.1", 0, max_size=None,
                                  process_request=self.process_request, ssl=self.tls)
        return self

    @property
    def address(self) -> str:
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"https://localhost:{port}" if self.tls is not None else f"{host}:{port}"

    async def stop(self) -> None:
        self.server.close()
        await self.server.wait_closed()


@contextlib.asynccontextmanager
async def ws_cluster(names: str = "abc", **options: Any,
                     ) -> AsyncIterator[tuple[Gateway, dict[str, WsBackend]]]:
    backends = {name: await WsBackend(name).start() for name in names}
    options.setdefault("health", False)
    gateway = Gateway({b.name: b.address for b in backends.values()}, GatewayConfig(**options))
    try:
        await gateway.start()
        yield gateway, backends
    finally:
        await gateway.stop()
        for backend in backends.values():
            await backend.stop()


def ws_url(gateway: Gateway, path: str = "/room") -> str:
    return gateway.url.replace("http://", "ws://") + path


async def hello(ws: Any) -> dict[str, Any]:
    message = await asyncio.wait_for(ws.recv(), 10)
    assert isinstance(message, str)
    result: dict[str, Any] = json.loads(message)
    return result


def test_the_handshake_of_the_issue_reaches_the_keys_owner() -> None:
    async def main() -> None:
        async with ws_cluster() as (gateway, backends):
            for user in ("u1", "u2", "u3", "u4", "u5", "u6"):
                async with connect(ws_url(gateway), additional_headers={"X-User-Id": user}
                                   ) as ws:
                    said = await hello(ws)
                    assert said == {"backend": gateway.router.get_target_node(user),
                                    "key": user, "path": "/room"}
                    await ws.send("hi")
                    assert await ws.recv() == "hi"
            # The backend saw the handshake's own fields, and the gateway's.
            seen = [h for b in backends.values() for h in b.handshakes]
            assert len(seen) == 6
            assert all(h.get("Upgrade") == "websocket" and h.get("Sec-WebSocket-Key")
                       and h.get("X-Forwarded-For") == "127.0.0.1" for h in seen)
    run(main())


@pytest.mark.parametrize(("rule", "path", "headers", "key"), [
    ("cookie:room", "/room", {"Cookie": "room=r7"}, "r7"),
    ("query:room", "/chat?room=r8", {}, "r8"),
    ("path", "/r9/chat", {}, "r9"),
])
def test_every_key_source_routes_the_handshake(rule: str, path: str, headers: dict[str, str],
                                               key: str) -> None:
    async def main() -> None:
        async with ws_cluster(key=rule) as (gateway, _), \
                connect(ws_url(gateway, path), additional_headers=headers) as ws:
            assert (await hello(ws))["backend"] == gateway.router.get_target_node(key)
    run(main())


def test_messages_of_every_kind_go_both_ways_unchanged() -> None:
    async def main() -> None:
        async with ws_cluster() as (gateway, _):
            async with connect(ws_url(gateway), additional_headers={"X-User-Id": "u1"},
                               max_size=None) as ws:
                await hello(ws)
                await ws.send("text é")
                assert await ws.recv() == "text é"
                await ws.send(bytes(range(256)))
                assert await ws.recv() == bytes(range(256))
                await ws.send(iter(["frag", "mented ", "text"]))  # one message, three frames
                assert await ws.recv() == "fragmented text"
                big = bytes(i % 251 for i in range(1 << 20))
                await ws.send(big)
                assert await asyncio.wait_for(ws.recv(), 30) == big
                pong = await ws.ping(b"p1")
                latency = await asyncio.wait_for(pong, 10)
                assert latency >= 0
                await ws.send("close:4001")  # the backend closes with its code
                with pytest.raises(ConnectionClosed) as closed:
                    await asyncio.wait_for(ws.recv(), 10)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 4001
            await eventually(lambda: not gateway.tunnels.live, "the tunnel ended")
    run(main())


def test_the_clients_close_code_reaches_the_backend() -> None:
    async def main() -> None:
        codes: list[int | None] = []

        async def handler(ws: ServerConnection) -> None:
            with contextlib.suppress(ConnectionClosed):
                async for _ in ws:
                    pass
            codes.append(ws.close_code)

        async with serve(handler, "127.0.0.1", 0) as server:
            host, port = server.sockets[0].getsockname()[:2]
            async with Gateway([f"{host}:{port}"], GatewayConfig(health=False)) as gateway:
                async with connect(ws_url(gateway)) as ws:
                    await ws.close(4002, "bye")
                await eventually(lambda: codes == [4002], "the backend saw the code")
    run(main())


def test_a_hundred_tunnels_at_once_each_on_its_keys_owner() -> None:
    async def main() -> None:
        async with ws_cluster() as (gateway, _):
            async def one(i: int) -> None:
                user = f"user-{i}"
                async with connect(ws_url(gateway), additional_headers={"X-User-Id": user}
                                   ) as ws:
                    assert (await hello(ws))["backend"] == gateway.router.get_target_node(user)
                    for n in range(5):
                        await ws.send(f"{user} {n}")
                        assert await ws.recv() == f"{user} {n}"
                    await opened.wait()

            opened = asyncio.Event()
            tasks = [asyncio.ensure_future(one(i)) for i in range(100)]
            await eventually(lambda: len(gateway.tunnels.live) == 100, "100 tunnels open",
                             timeout=30)
            counts = gateway.tunnels.counts()
            assert sum(counts.open.values()) == 100
            opened.set()
            await asyncio.gather(*tasks)
            await eventually(lambda: not gateway.tunnels.live, "every tunnel ended")
            counts = gateway.tunnels.counts()
            assert sum(counts.opened.values()) == 100 and set(counts.open.values()) == {0}
            assert sum(counts.closed.values()) == 100
    run(main(), timeout=120)


def test_aiohttp_client_and_server() -> None:
    from aiohttp import WSMsgType, web

    async def main() -> None:
        async def handler(request: web.Request) -> web.WebSocketResponse:
            ws = web.WebSocketResponse(max_msg_size=0)
            await ws.prepare(request)
            await ws.send_str(f"hello {request.headers['X-User-Id']}")
            async for message in ws:
                if message.type is WSMsgType.TEXT and message.data == "bye":
                    await ws.close(code=4003, message=b"asked")
                elif message.type is WSMsgType.TEXT:
                    await ws.send_str(message.data)
                elif message.type is WSMsgType.BINARY:
                    await ws.send_bytes(message.data)
            return ws

        app = web.Application()
        app.router.add_get("/ws", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with Gateway([f"127.0.0.1:{port}"], GatewayConfig(health=False)) as gateway, \
                    aiohttp.ClientSession() as session, \
                    session.ws_connect(gateway.url + "/ws", headers={"X-User-Id": "u9"},
                                       max_msg_size=0, heartbeat=None) as ws:
                assert await ws.receive_str(timeout=10) == "hello u9"
                await ws.send_str("one")
                assert await ws.receive_str(timeout=10) == "one"
                big = b"\x01" * (1 << 20)
                await ws.send_bytes(big)
                assert await ws.receive_bytes(timeout=30) == big
                await ws.ping(b"x")  # answered by the server's pong, passed back
                await ws.send_str("bye")
                message = await ws.receive(timeout=10)
                assert message.type is WSMsgType.CLOSE and message.data == 4003
        finally:
            await runner.cleanup()
    run(main())


def test_the_handshake_fails_over_before_the_101() -> None:
    async def main() -> None:
        async with ws_cluster() as (gateway, backends):
            user = "u1"
            owner, second = gateway.router.get_preference_list(user, 2)
            backends[owner].statuses = [503]  # a 5xx on the handshake: the next node
            async with connect(ws_url(gateway), additional_headers={"X-User-Id": user}) as ws:
                assert (await hello(ws))["backend"] == second
            await backends[owner].stop()  # refused: the next node again
            async with connect(ws_url(gateway), additional_headers={"X-User-Id": user}) as ws:
                assert (await hello(ws))["backend"] == second
            # Any other answer is the answer, passed on.
            backends[second].statuses = [403]
            backends[owner].server = await serve(backends[owner].handler, "127.0.0.1", 0)
            with pytest.raises(InvalidStatus) as refused:
                async with connect(ws_url(gateway), additional_headers={"X-User-Id": "u1"}):
                    pass
            assert refused.value.response.status_code == 403
    run(main())


def test_the_cap_answers_503_with_retry_after() -> None:
    async def main() -> None:
        async with ws_cluster(max_tunnels=2) as (gateway, _):
            async with connect(ws_url(gateway)) as one, connect(ws_url(gateway)) as two:
                await hello(one)
                await hello(two)
                with pytest.raises(InvalidStatus) as refused:
                    async with connect(ws_url(gateway)):
                        pass
                response = refused.value.response
                assert response.status_code == 503 and response.headers["Retry-After"] == "1"
            await eventually(lambda: not gateway.tunnels.live, "the tunnels ended")
            async with connect(ws_url(gateway)) as three:  # room again
                await hello(three)
    run(main())


def test_an_idle_tunnel_is_closed() -> None:
    async def main() -> None:
        async with ws_cluster(tunnel_idle_timeout=0.5) as (gateway, _):
            async with connect(ws_url(gateway), ping_interval=None) as ws:
                await hello(ws)
                with pytest.raises(ConnectionClosed):
                    await asyncio.wait_for(ws.recv(), 20)
            counts = gateway.tunnels.counts()
            assert sum(n for (_, reason), n in counts.closed.items() if reason == "idle") == 1
    run(main())


def test_other_upgrades_are_served_as_plain_requests() -> None:
    async def main() -> None:
        from _support.echo_backends import EchoBackend

        backend = await EchoBackend("a").start()
        try:
            async with Gateway([backend.address], GatewayConfig(health=False)) as gateway:
                answer = await raw(gateway.url, b"GET /x HTTP/1.1\r\nHost: g\r\n"
                                   b"Connection: Upgrade, HTTP2-Settings, close\r\n"
                                   b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")
                status, _, body = split(answer)
                assert status == 200
                seen = json.loads(body)["headers"]
                assert not {"upgrade", "http2-settings"} & {k.lower() for k in seen}
                assert not gateway.tunnels.counts().opened
        finally:
            await backend.stop()
    run(main())


def test_a_handshake_with_a_body_is_refused() -> None:
    async def main() -> None:
        async with ws_cluster() as (gateway, _):
            answer = await raw(gateway.url, b"GET /room HTTP/1.1\r\nHost: g\r\n"
                               b"Connection: Upgrade\r\nUpgrade: websocket\r\n"
                               b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                               b"Sec-WebSocket-Version: 13\r\nContent-Length: 3\r\n\r\nabc")
            assert split(answer)[0] == 400
    run(main())


def test_half_closes_are_passed_on() -> None:
    async def main() -> None:
        # A raw backend: answers 101, then reads until the client's EOF,
        # then sends its last bytes and closes.
        got = bytearray()

        async def backend(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                         b"Upgrade: websocket\r\nSec-WebSocket-Accept: x\r\n\r\n")
            got.extend(await reader.read())  # until the half-close reaches here
            writer.write(b"after-eof")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(backend, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with Gateway([f"127.0.0.1:{port}"], GatewayConfig(health=False)) as gateway:
                host, gport = gateway.url.removeprefix("http://").rsplit(":", 1)
                reader, writer = await asyncio.open_connection(host, int(gport))
                writer.write(b"GET / HTTP/1.1\r\nHost: g\r\nConnection: Upgrade\r\n"
                             b"Upgrade: websocket\r\nSec-WebSocket-Key: a\r\n"
                             b"Sec-WebSocket-Version: 13\r\n\r\n")
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                assert head.startswith(b"HTTP/1.1 101 ")
                writer.write(b"before-eof")
                writer.write_eof()
                rest = await asyncio.wait_for(reader.read(), 10)
                assert rest == b"after-eof" and bytes(got) == b"before-eof"
                writer.close()
                await writer.wait_closed()
        finally:
            server.close()
            await server.wait_closed()
    run(main())


# -- the gateway closing tunnels, and faults ---------------------------------

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _accept(key: bytes) -> bytes:
    import base64
    import hashlib

    return base64.b64encode(hashlib.sha1(key + _GUID).digest())


async def _raw_101(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read a handshake and answer it 101, as a server would."""
    head = await reader.readuntil(b"\r\n\r\n")
    key = next(line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
               if line.lower().startswith(b"sec-websocket-key:"))
    writer.write(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                 b"Upgrade: websocket\r\nSec-WebSocket-Accept: " + _accept(key) + b"\r\n\r\n")


async def _users_on(gateway: Gateway, count: int) -> dict[str, Any]:
    """``count`` users with a tunnel each, their hello read."""
    tunnels = {}
    for i in range(count):
        user = f"user-{i}"
        ws = await connect(ws_url(gateway), additional_headers={"X-User-Id": user},
                           ping_interval=None, compression=None)
        assert (await hello(ws))["backend"] == gateway.router.get_target_node(user)
        tunnels[user] = ws
    return tunnels


@pytest.mark.parametrize("mode", ["close", "keep"])
def test_a_ring_change_closes_only_the_moved_keys_tunnels_with_1012(mode: str) -> None:
    async def main() -> None:
        async with ws_cluster("abcd", on_ring_change=mode) as (gateway, _):
            gateway.router.remove_service_node("d")
            tunnels = await _users_on(gateway, 40)
            before = {user: gateway.router.get_target_node(user) for user in tunnels}
            gateway.router.add_service_node("d")  # some keys move to d
            gateway.ring_changed()  # a change made behind the gateway's back: told
            moved = {user for user in tunnels if gateway.router.get_target_node(user) == "d"}
            assert moved and moved != set(tunnels)
            if mode == "close":
                for user in moved:
                    with pytest.raises(ConnectionClosed) as closed:
                        await asyncio.wait_for(tunnels[user].recv(), 20)
                    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
                    # The client comes back to the key's new owner.
                    async with connect(ws_url(gateway),
                                       additional_headers={"X-User-Id": user}) as again:
                        assert (await hello(again))["backend"] == "d"
            else:
                await asyncio.sleep(1.0)  # nothing closes
            for user, ws in tunnels.items():
                if mode == "close" and user in moved:
                    continue
                await ws.send(f"still {user}")  # untouched, on the same node
                assert await asyncio.wait_for(ws.recv(), 10) == f"still {user}"
            nodes = {t.key.decode(): t.node for t in gateway.tunnels.live}
            for user in tunnels:
                if mode == "keep" or user not in moved:
                    assert nodes[user] == before[user]
            closed_counts = gateway.tunnels.counts().closed
            ring_closed = sum(n for (_, r), n in closed_counts.items() if r == "ring_change")
            assert ring_closed == (len(moved) if mode == "close" else 0)
            for ws in tunnels.values():
                await ws.close()
    run(main(), timeout=120)


def test_a_node_leaving_the_ring_ends_its_tunnels_even_with_keep() -> None:
    async def main() -> None:
        async with ws_cluster() as (gateway, _):
            tunnels = await _users_on(gateway, 20)
            gone = gateway.router.get_target_node("user-0")
            assert gone is not None
            on_gone = {user for user in tunnels if gateway.router.get_target_node(user) == gone}
            gateway.router.remove_service_node(gone)  # what health checks do to a dead node
            gateway.ring_changed()
            for user in on_gone:
                with pytest.raises(ConnectionClosed) as closed:
                    await asyncio.wait_for(tunnels[user].recv(), 20)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
            for user in set(tunnels) - on_gone:
                await tunnels[user].send("here")
                assert await asyncio.wait_for(tunnels[user].recv(), 10) == "here"
            await eventually(lambda: all(t.node != gone for t in gateway.tunnels.live),
                             "no tunnel left on the node that left")
            assert any(t.node != gone for t in gateway.tunnels.live)
            for ws in tunnels.values():
                await ws.close()
    run(main(), timeout=120)


def test_a_stop_sends_every_client_1001() -> None:
    async def main() -> None:
        async with ws_cluster() as (gateway, _):
            tunnels = await _users_on(gateway, 10)
            stopping = asyncio.ensure_future(gateway.stop())
            for ws in tunnels.values():
                with pytest.raises(ConnectionClosed) as closed:
                    await asyncio.wait_for(ws.recv(), 20)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
            await asyncio.wait_for(stopping, 30)
            closed_counts = gateway.tunnels.counts().closed
            assert sum(n for (_, r), n in closed_counts.items() if r == "stop") == 10
    run(main())


@pytest.mark.parametrize("finish", [True, False])
def test_the_close_frame_waits_for_a_frame_boundary(finish: bool) -> None:
    """A backend mid-frame when the gateway stops: the close frame follows
    the frame's last byte; with no boundary in the grace, no frame at all."""
    async def main() -> None:
        released = asyncio.Event()

        async def backend(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _raw_101(reader, writer)
            payload = b"z" * 1000
            frame = bytes([0x82, 126]) + len(payload).to_bytes(2, "big") + payload
            writer.write(frame[:300])  # the frame begun
            await writer.drain()
            await released.wait()
            if finish:
                writer.write(frame[300:])
                await writer.drain()
            await reader.read()
            writer.close()

        server = await asyncio.start_server(backend, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            gateway = Gateway([f"127.0.0.1:{port}"],
                              GatewayConfig(health=False, tunnel_close_grace=1.0))
            await gateway.start()
            host, gport = gateway.url.removeprefix("http://").rsplit(":", 1)
            reader, writer = await asyncio.open_connection(host, int(gport))
            writer.write(b"GET / HTTP/1.1\r\nHost: g\r\nConnection: Upgrade\r\n"
                         b"Upgrade: websocket\r\nSec-WebSocket-Key: a2V5a2V5a2V5a2V5a2V5aw==\r\n"
                         b"Sec-WebSocket-Version: 13\r\n\r\n")
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            await eventually(lambda: gateway.tunnels.live and next(
                iter(gateway.tunnels.live)).boundaries.at_boundary is False, "mid-frame")
            stopping = asyncio.ensure_future(gateway.stop())
            await asyncio.sleep(0.2)
            released.set()
            rest = await asyncio.wait_for(reader.read(), 20)
            await asyncio.wait_for(stopping, 30)
            if finish:
                assert len(rest) == 1004 + 4 and rest[1004:] == b"\x88\x02\x03\xe9"
            else:
                # What came, and nothing of the gateway's.
                assert rest == bytes([0x82, 126, 3, 232]) + b"z" * 296
            writer.close()
            await writer.wait_closed()
        finally:
            server.close()
            await server.wait_closed()
    run(main())


_KILLED_BACKEND = r"""
import asyncio, base64, hashlib, sys

async def serve(reader, writer):
    head = await reader.readuntil(b"\r\n\r\n")
    key = [l.split(b":", 1)[1].strip() for l in head.split(b"\r\n")
           if l.lower().startswith(b"sec-websocket-key:")][0]
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    writer.write(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                 b"Upgrade: websocket\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    # A 1 MiB message begun: its header and the first 64 KiB, then nothing.
    writer.write(bytes([0x82, 127]) + (1 << 20).to_bytes(8, "big") + b"m" * 65536)
    await writer.drain()
    print("mid-message", flush=True)
    await asyncio.sleep(3600)

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_a_backend_killed_mid_message_ends_its_tunnel() -> None:
    import subprocess
    import sys

    async def main() -> None:
        proc = subprocess.Popen([sys.executable, "-c", _KILLED_BACKEND], stdout=subprocess.PIPE)
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            async with Gateway([f"127.0.0.1:{port}"], GatewayConfig(health=False)) as gateway:
                ws = await connect(ws_url(gateway), max_size=None, ping_interval=None)
                receiving = asyncio.ensure_future(ws.recv())
                assert await asyncio.to_thread(proc.stdout.readline) == b"mid-message\n"
                await eventually(lambda: gateway.tunnels.counts().bytes[
                    "backend_to_client"] >= 65536, "the message begun reached the client")
                proc.kill()
                with pytest.raises(ConnectionClosed):
                    await asyncio.wait_for(receiving, 20)  # never a hang
                await eventually(lambda: not gateway.tunnels.live, "the tunnel ended")
                closed = gateway.tunnels.counts().closed
                assert closed == {(f"127.0.0.1:{port}", "backend"): 1}
                await ws.close()
        finally:
            proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
    run(main())


def test_a_client_gone_mid_message_ends_its_tunnel() -> None:
    async def main() -> None:
        ended = asyncio.Event()

        async def handler(ws: ServerConnection) -> None:
            with contextlib.suppress(ConnectionClosed):
                async for _ in ws:
                    pass
            ended.set()

        async with serve(handler, "127.0.0.1", 0) as server:
            host, port = server.sockets[0].getsockname()[:2]
            async with Gateway([f"{host}:{port}"], GatewayConfig(health=False)) as gateway:
                ghost, gport = gateway.url.removeprefix("http://").rsplit(":", 1)
                reader, writer = await asyncio.open_connection(ghost, int(gport))
                writer.write(b"GET / HTTP/1.1\r\nHost: g\r\nConnection: Upgrade\r\n"
                             b"Upgrade: websocket\r\nSec-WebSocket-Key: a2V5a2V5a2V5a2V5a2V5aw==\r\n"
                             b"Sec-WebSocket-Version: 13\r\n\r\n")
                assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                        ).startswith(b"HTTP/1.1 101")
                # A masked binary frame of 100 000 bytes begun, then the client is gone.
                writer.write(bytes([0x82, 0xFF]) + (100000).to_bytes(8, "big") + b"mask"
                             + b"q" * 5000)
                await writer.drain()
                await eventually(lambda: gateway.tunnels.counts().bytes[
                    "client_to_backend"] >= 5000, "the message begun reached the backend")
                writer.transport.abort()
                await writer.wait_closed()
                await asyncio.wait_for(ended.wait(), 20)
                await eventually(lambda: not gateway.tunnels.live, "the tunnel ended")
                assert gateway.tunnels.counts().closed == {(f"{host}:{port}", "client"): 1}
    run(main())


def test_a_slow_client_holds_the_backend_back_and_memory_flat() -> None:
    async def main() -> None:
        sent = [0]

        async def handler(ws: ServerConnection) -> None:
            chunk = b"s" * 65536
            with contextlib.suppress(ConnectionClosed):
                while sent[0] < 256 << 20:
                    await ws.send(chunk)
                    sent[0] += len(chunk)

        async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
            host, port = server.sockets[0].getsockname()[:2]
            async with Gateway([f"{host}:{port}"], GatewayConfig(health=False)) as gateway:
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.setblocking(False)
                ghost, gport = gateway.url.removeprefix("http://").rsplit(":", 1)
                await asyncio.get_running_loop().sock_connect(sock, (ghost, int(gport)))
                reader, writer = await asyncio.open_connection(sock=sock)
                writer.transport.pause_reading()  # a client that reads nothing more
                writer.write(b"GET / HTTP/1.1\r\nHost: g\r\nConnection: Upgrade\r\n"
                             b"Upgrade: websocket\r\nSec-WebSocket-Key: a2V5a2V5a2V5a2V5a2V5aw==\r\n"
                             b"Sec-WebSocket-Version: 13\r\n\r\n")
                await eventually(lambda: gateway.tunnels.live, "the tunnel is open")
                tunnel = next(iter(gateway.tunnels.live))
                samples = []
                for _ in range(6):
                    await asyncio.sleep(0.5)
                    assert tunnel.client.transport is not None
                    samples.append((sent[0], tunnel.client.transport.get_write_buffer_size(),
                                    tunnel.backend.buffered))
                # The backend is held back: what it sent stops growing,
                # far below what it would send, and the gateway holds at
                # most a read's worth plus the transport's high-water mark.
                assert samples[-1][0] == samples[-3][0] < 32 << 20, samples
                assert all(out <= 4 * 65536 and held <= 2 * 65536 for _, out, held in samples), \
                    samples
                writer.transport.abort()
                await writer.wait_closed()
                await eventually(lambda: not gateway.tunnels.live, "the tunnel ended")
    run(main())


def test_sigterm_sends_1001_through_the_command(chash_env: dict[str, str]) -> None:
    import subprocess
    import sys

    async def main() -> None:
        async with ws_cluster("a") as (_, backends):
            proc = subprocess.Popen(
                [sys.executable, "-m", "chash", "gateway", "--listen", "127.0.0.1:0",
                 "--backend", backends["a"].address, "--no-health", "--log-level", "warning"],
                stdout=subprocess.PIPE, env=chash_env, text=True)
            try:
                assert proc.stdout is not None
                line = await asyncio.to_thread(proc.stdout.readline)
                url = line.split(" on ", 1)[1].split()[0].replace("http://", "ws://")
                async with connect(url + "/room", ping_interval=None) as ws:
                    assert (await hello(ws))["backend"] == "a"
                    proc.terminate()
                    with pytest.raises(ConnectionClosed) as closed:
                        await asyncio.wait_for(ws.recv(), 20)
                    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
                assert await asyncio.to_thread(proc.wait, 30) == 0
            finally:
                proc.kill()
                proc.wait()
                if proc.stdout is not None:
                    proc.stdout.close()
    run(main())


# -- seen from outside ---------------------------------------------------------

def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of metric ``name`` in a Prometheus text page, by labels."""
    from prometheus_client.parser import text_string_to_metric_families

    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


async def _metrics(admin: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(f"{admin}/metrics") as resp:
        assert resp.status == 200
        return await resp.text()


def test_metrics_and_status_count_the_tunnels() -> None:
    pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
    from _support.gateway_processes import status

    async def main() -> None:
        async with ws_cluster(admin_listen=("127.0.0.1", 0)) as (gateway, _):
            admin = gateway.admin_url
            assert admin is not None
            tunnels = await _users_on(gateway, 12)
            owners = {user: gateway.router.get_target_node(user) for user in tunnels}
            page = await status(admin)
            by_node = {entry["node"]: entry["tunnels"] for entry in page["nodes"]}
            assert by_node == {n: list(owners.values()).count(n) for n in "abc"}
            assert page["tunnels"]["open"] == 12
            text = await _metrics(admin)
            assert _samples(text, "chash_tunnels_open") == {
                (("node", n),): float(list(owners.values()).count(n)) for n in "abc"}
            first = next(iter(tunnels))
            await tunnels[first].send("x" * 1000)
            assert await tunnels[first].recv() == "x" * 1000
            await tunnels[first].close()
            await eventually(lambda: len(gateway.tunnels.live) == 11, "one tunnel closed")
            text = await _metrics(admin)
            assert sum(_samples(text, "chash_tunnels_opened_total").values()) == 12
            assert _samples(text, "chash_tunnels_closed_total") == {
                (("node", owners[first]), ("reason", "closed")): 1.0}
            moved = _samples(text, "chash_tunnel_bytes_total")
            # A masked 1000-byte frame up (8 bytes of header), the hellos and
            # the echo down; the close frames both ways.
            assert moved[(("direction", "client_to_backend"),)] >= 1008
            assert moved[(("direction", "backend_to_client"),)] >= 1004 + 12 * 40
            for ws in list(tunnels.values())[1:]:
                await ws.close()
    run(main())


def test_metrics_cover_every_worker() -> None:
    pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
    from _support.gateway_processes import gateway_process, status

    async def main() -> None:
        async with ws_cluster("ab") as (_, backends):
            spec = ",".join(f"{n}={b.address}" for n, b in backends.items())
            async with gateway_process("--backend", spec, "--workers", "2", "--no-health",
                                       "--admin-listen", "127.0.0.1:0") as (url, admin, _):
                assert admin is not None
                wsurl = url.replace("http://", "ws://") + "/room"
                # Each on a new connection: the kernel spreads them over both workers.
                tunnels = [await connect(wsurl, additional_headers={"X-User-Id": f"u{i}"},
                                         ping_interval=None) for i in range(30)]
                for ws in tunnels:
                    await hello(ws)

                async def counted() -> bool:
                    page = await status(admin)
                    return page["tunnels"]["open"] == 30 and all(
                        w["tunnels"] > 0 for w in page["workers"])

                for _ in range(100):
                    if await counted():
                        break
                    await asyncio.sleep(0.1)
                page = await status(admin)
                assert page["tunnels"]["open"] == 30, page["tunnels"]
                assert sum(w["tunnels"] for w in page["workers"]) == 30
                assert all(w["tunnels"] > 0 for w in page["workers"]), page["workers"]
                text = await _metrics(admin)
                assert sum(_samples(text, "chash_tunnels_open").values()) == 30
                assert sum(_samples(text, "chash_tunnels_opened_total").values()) == 30
                for ws in tunnels:
                    await ws.close()
    run(main(), timeout=120)


def test_a_handshake_the_owner_never_answers_fails_over_and_is_reported() -> None:
    async def main() -> None:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # reads the handshake, answers nothing
            writer.close()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        second = await WsBackend("second").start()
        try:
            backends = {"silent": f"127.0.0.1:{port}", "second": second.address}
            async with Gateway(backends, GatewayConfig(health=False, read_timeout=0.5)) \
                    as gateway:
                user = next(u for u in (f"u{i}" for i in range(100))
                            if gateway.router.get_target_node(u) == "silent")
                async with connect(ws_url(gateway), additional_headers={"X-User-Id": user}
                                   ) as ws:
                    assert (await hello(ws))["backend"] == "second"
                snap = gateway.counters.snapshot()
                assert snap.upstream_errors.get("silent") == 1 and snap.retries == 1
        finally:
            server.close()
            await second.stop()
            await server.wait_closed()
    run(main())


def test_handshakes_at_once_never_pass_the_cap() -> None:
    async def main() -> None:
        async with ws_cluster(max_tunnels=3) as (gateway, _):
            async def one(i: int) -> int:
                try:
                    ws = await connect(ws_url(gateway), additional_headers={"X-User-Id": f"u{i}"})
                except InvalidStatus as exc:
                    return int(exc.response.status_code)
                await hello(ws)
                await opened.wait()
                await ws.close()
                return 101

            opened = asyncio.Event()
            tasks = [asyncio.ensure_future(one(i)) for i in range(12)]
            # Three tunnels open and nine handshakes refused; none of the
            # nine waits for a place.
            await eventually(lambda: len(gateway.tunnels.live) == 3 and sum(
                t.done() for t in tasks) == 9, "3 open, 9 refused", timeout=30)
            assert gateway.tunnels.pending == 0
            opened.set()
            assert sorted(await asyncio.gather(*tasks)) == [101] * 3 + [503] * 9
    run(main())
