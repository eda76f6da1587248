"""chash.aiohttp's StickyMiddleware against real backends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

import chash
from _support.threaded_backends import EchoFarm
from _support.waiting import run
from chash.aiohttp import StickyMiddleware
from chash.health import LocalMembership

KEYS = [f"user-{i}" for i in range(24)]


def session(middleware: StickyMiddleware, **kwargs: object) -> aiohttp.ClientSession:
    return aiohttp.ClientSession("http://users", middlewares=[middleware], **kwargs)  # type: ignore[arg-type]


def test_every_key_reaches_its_owner(echo: EchoFarm, ring: chash.ConsistentHashRouter) -> None:
    name = {b.address: b.name for b in echo.backends}

    async def main() -> None:
        async with session(StickyMiddleware(ring, key="header:X-User-Id")) as http:
            for key in KEYS:
                async with http.get("/a/b?c=1", headers={"X-User-Id": key}) as response:
                    seen = await response.json()
                assert seen["backend"] == name[ring.get_target_node(key)]
                assert seen["raw_path"] == "/a/b?c=1" and seen["headers"]["Host"] == "users"
                assert str(response.url) == "http://users/a/b?c=1"
            # One pooled connection to each backend served every request.
            assert [len(b.peers) for b in echo.backends] == [1, 1, 1]
            cookie = StickyMiddleware(ring, key="cookie:session")
            async with session(cookie) as other, \
                    other.get("/", headers={"Cookie": "session=s-1"}) as response:
                assert response.headers["X-Backend"] == name[ring.get_target_node("s-1")]
            with pytest.raises(ValueError, match="header:X-User-Id is absent"):
                await http.get("/")

    run(main())


def test_a_killed_owner_fails_over_reports_and_nobody_else_moves(
        echo: EchoFarm, ring: chash.ConsistentHashRouter) -> None:
    name = {b.address: b.name for b in echo.backends}
    dead = ring.get_target_node(KEYS[0])
    assert dead is not None
    echo.stop(dead)
    before = {key: ring.get_preference_list(key, 2) for key in KEYS}
    membership = LocalMembership(ring)

    async def main() -> None:
        async with session(StickyMiddleware(ring, key="header:X-User-Id",
                                            health=membership)) as http:
            for key in KEYS:
                owner, following = before[key]
                async with http.post("/x", headers={"X-User-Id": key}, data=b"b") as response:
                    assert response.headers["X-Backend"] == \
                        name[following if owner == dead else owner]

    run(main())
    assert dead not in ring and dead in membership.taken_out()


def test_sent_posts_and_streamed_bodies_are_not_retried(
        echo: EchoFarm, ring: chash.ConsistentHashRouter) -> None:
    key = KEYS[1]
    owner, following = ring.get_preference_list(key, 2)
    echo.by_address(owner).delay = 1.0

    async def body() -> AsyncIterator[bytes]:
        yield b"streamed"

    async def main() -> None:
        timeout = aiohttp.ClientTimeout(sock_read=0.3)
        async with session(StickyMiddleware(ring, key="header:X-User-Id"), timeout=timeout) as http:
            with pytest.raises(aiohttp.SocketTimeoutError):
                await http.post("/order", headers={"X-User-Id": key}, data=b"once")
            with pytest.raises(aiohttp.SocketTimeoutError):
                await http.put("/doc", headers={"X-User-Id": key}, data=body())
            assert echo.by_address(following).hits == 0
            async with http.put("/doc", headers={"X-User-Id": key}, data=b"again") as response:
                assert response.headers["X-Backend"] == echo.by_address(following).name

    run(main())
    assert echo.by_address(owner).hits == 3
