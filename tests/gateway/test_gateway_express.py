"""The one-pass path (chash.gateway.express) against real sockets: plain
requests are served from the connections' callbacks, everything else is
handed to the connection's task as it stands, and a stop lets requests in
flight finish.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

from _support.gateways import cluster, get, owner_of, raw, split  # noqa: E402
from _support.waiting import eventually, run  # noqa: E402
from chash.gateway.proxy import Proxy  # noqa: E402


@pytest.fixture
def general_path_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The requests the general path served (by method and target)."""
    calls: list[str] = []
    serve = Proxy.serve_request

    async def counted(self: Proxy, client: Any, request: Any, remote: str) -> bool:
        calls.append(f"{request.method} {request.target.decode()}")
        return await serve(self, client, request, remote)

    monkeypatch.setattr(Proxy, "serve_request", counted)
    return calls


def test_plain_requests_never_reach_the_general_path(general_path_calls: list[str]) -> None:
    async def main() -> None:
        async with cluster(health=False) as (gateway, backends, session):
            # The first request per backend opens its connection (general
            # path); the rest reuse them, one pass each.
            users = [f"u{i}" for i in range(60)]
            for user in users:
                status, body = await get(session, gateway, user)
                assert (status, body["backend"]) == (200, owner_of(gateway, user))
            assert len(general_path_calls) <= len(backends), general_path_calls
            general_path_calls.clear()
            status, body = await get(session, gateway, "u1", method="POST", data=b"abc")
            assert (status, body["body"]) == (200, "abc")
            assert general_path_calls == ["POST /page"]
            assert set(gateway.loads.values()) == {0}
    run(main())


def test_pipelined_plain_requests_are_answered_in_order() -> None:
    async def main() -> None:
        async with cluster(health=False) as (gateway, backends, session):
            for user in ("u1", "u2", "u3"):  # pooled connections to every backend
                await get(session, gateway, user)
            heads = b"".join(
                f"GET /n{i} HTTP/1.1\r\nHost: g\r\nX-User-Id: u{i}\r\n\r\n".encode()
                for i in range(20))
            last = b"GET /end HTTP/1.1\r\nHost: g\r\nX-User-Id: u1\r\nConnection: close\r\n\r\n"
            answer = await raw(gateway.url, heads + last)
            paths = [part.split(b'"path": "', 1)[1].split(b'"', 1)[0].decode()
                     for part in answer.split(b"HTTP/1.1 ")[1:]]
            assert paths == [f"/n{i}" for i in range(20)] + ["/end"]
    run(main())


def test_a_stop_lets_a_plain_request_in_flight_finish() -> None:
    async def main() -> None:
        async with cluster(health=False) as (gateway, backends, session):
            owner = owner_of(gateway, "u1")
            await get(session, gateway, "u1")  # a pooled connection to the owner
            backends[owner].delay = 1.0
            request = asyncio.ensure_future(get(session, gateway, "u1"))
            await eventually(lambda: gateway.loads[owner] == 1, timeout=10)
            await gateway.stop()
            status, body = await request
            assert (status, body["backend"]) == (200, owner)
    run(main())


def test_a_client_gone_mid_request_leaves_the_pool_sound() -> None:
    async def main() -> None:
        async with cluster(health=False) as (gateway, backends, session):
            owner = owner_of(gateway, "u1")
            await get(session, gateway, "u1")
            backends[owner].delay = 0.5
            host, port = gateway.url.removeprefix("http://").rsplit(":", 1)
            for _ in range(3):
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(b"GET /gone HTTP/1.1\r\nHost: g\r\nX-User-Id: u1\r\n\r\n")
                await writer.drain()
                writer.close()
                await writer.wait_closed()
            await eventually(lambda: gateway.loads[owner] == 0, timeout=10)
            backends[owner].delay = 0.0
            for _ in range(5):
                status, body = await get(session, gateway, "u1")
                assert (status, body["backend"]) == (200, owner)
    run(main())


def test_a_late_answer_goes_to_the_general_path_and_times_out() -> None:
    async def main() -> None:
        async with cluster(health=False, read_timeout=0.5) as (gateway, backends, session):
            owner, second = gateway.router.get_preference_list("u1", 2)
            await get(session, gateway, "u1")
            backends[owner].delay = 3.0
            status, body = await get(session, gateway, "u1")
            # GET is idempotent: the next node answers after the owner's timeout.
            assert (status, body["backend"]) == (200, second)
            assert set(gateway.loads.values()) == {0}
    run(main())


def test_a_refused_head_on_a_kept_connection_is_answered_and_closes_it() -> None:
    async def main() -> None:
        async with cluster(health=False) as (gateway, backends, session):
            await get(session, gateway, "u1")
            answer = await raw(gateway.url, b"GET /ok HTTP/1.1\r\nHost: g\r\nX-User-Id: u1\r\n\r\n"
                               b"GET /\xff HTTP/1.1\r\nHost: g\r\n\r\n")
            first, rest = answer.split(b"HTTP/1.1 400", 1)
            assert split(first)[0] == 200
            assert b"malformed request target" in rest
    run(main())


def test_a_websocket_handshake_is_handed_to_the_general_path(
        general_path_calls: list[str]) -> None:
    async def main() -> None:
        async with cluster(health=False) as (gateway, backends, session):
            for user in ("u1", "u2", "u3"):  # pooled connections: plain requests go one pass
                await get(session, gateway, user)
            general_path_calls.clear()
            # A keep-alive connection: a plain request, then the handshake.
            answer = await raw(gateway.url,
                               b"GET /first HTTP/1.1\r\nHost: g\r\nX-User-Id: u1\r\n\r\n"
                               b"GET /room HTTP/1.1\r\nHost: g\r\nX-User-Id: u1\r\n"
                               b"Connection: Upgrade, close\r\nUpgrade: websocket\r\n"
                               b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                               b"Sec-WebSocket-Version: 13\r\n\r\n")
            # The echo backends speak no WebSocket: their plain answer to the
            # handshake is passed on, and the handshake went the general way.
            assert answer.count(b"HTTP/1.1 200 ") == 2
            assert general_path_calls == ["GET /room"]
    run(main())
