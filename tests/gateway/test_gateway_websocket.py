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

    def __init__(self, name: str) -> None:
        self.name = name
        self.server: Any = None
        self.handshakes: list[Any] = []  # the handshakes' header fields
        self.statuses: list[int] = []  # answer these statuses to the next handshakes

    async def handler(self, ws: ServerConnection) -> None:
        request = ws.request
        assert request is not None
        await ws.send(json.dumps({"backend": self.name, "key": request.headers.get("X-User-Id"),
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
                                  process_request=self.process_request)
        return self

    @property
    def address(self) -> str:
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

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
        finally:
            server.close()
            await server.wait_closed()
    run(main())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
