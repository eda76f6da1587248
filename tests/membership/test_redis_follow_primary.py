"""A Sentinel client's periodic check follows the primary the sentinels
name (``RedisStore.follow_primary``), with the real redis-py Sentinel
connection pool over two real redis-servers; the sentinels are a stand-in
that names one server or the other, or none."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from _support.redis_server import RedisServer, running_server
from chash.membership.redis.store import AsyncRedisStore, RedisStore, sentinel_pool
from chash.membership.settings import MembershipSettings
from chash.membership.state import RingHead
from chash.membership.store import ReadHead, Seed

pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")
import redis
import redis.asyncio.sentinel
import redis.sentinel

SETTINGS = MembershipSettings(name="followed")


class Sentinels:
    """What a ``Sentinel`` answers ``discover_master`` with: ``primary``'s
    address, or MasterNotFoundError while it is None."""

    def __init__(self, primary: RedisServer) -> None:
        self.primary: RedisServer | None = primary
        self.asked = 0

    def discover_master(self, service: str) -> tuple[str, int]:
        self.asked += 1
        if self.primary is None:
            raise redis.sentinel.MasterNotFoundError(f"no sentinel names {service}")
        return ("127.0.0.1", self.primary.port)


class AsyncSentinels(Sentinels):
    async def discover_master(self, service: str) -> tuple[str, int]:  # type: ignore[override]
        return super().discover_master(service)


@pytest.fixture
def servers() -> Iterator[tuple[RedisServer, RedisServer]]:
    """Two redis-servers, each holding the ring at its own epoch."""
    first, second = running_server(), running_server()
    old, new = next(first), next(second)
    for server, epoch in ((old, "old"), (new, "new")):
        client = server.connect()
        client.flushall()
        RedisStore(client, SETTINGS).run(Seed(epoch, 1, "cfg", False, nodes={"a": "1.0"}))
        client.close()
    yield old, new
    for started in (first, second):
        for _ in started:
            pass


def test_a_check_moves_to_the_primary_the_sentinels_name(
        servers: tuple[RedisServer, RedisServer]) -> None:
    old, new = servers
    sentinels = Sentinels(old)
    pool = redis.sentinel.SentinelConnectionPool("mymaster", sentinels, socket_timeout=2.0)
    client = redis.Redis(connection_pool=pool)
    store = RedisStore(client, SETTINGS)
    plain = old.connect()
    assert sentinel_pool(client) is pool and sentinel_pool(plain) is None
    plain.close()
    assert store.run(ReadHead()) == RingHead("old", 1)
    sentinels.primary = new  # a failover: the sentinels name the other server
    assert store.run(ReadHead()) == RingHead("new", 1)
    sentinels.primary = None  # no sentinel answers: the primary held stays
    assert store.run(ReadHead()) == RingHead("new", 1)
    asked = sentinels.asked
    store.run(Seed("x", 1, "cfg", False))  # only the periodic check asks
    assert sentinels.asked == asked
    client.close()
    pool.disconnect()


def test_the_asyncio_store_follows_too(servers: tuple[RedisServer, RedisServer]) -> None:
    old, new = servers

    async def main() -> None:
        sentinels = AsyncSentinels(old)
        pool = redis.asyncio.sentinel.SentinelConnectionPool("mymaster", sentinels,
                                                             socket_timeout=2.0)
        client: Any = redis.asyncio.Redis(connection_pool=pool)
        store = AsyncRedisStore(client, SETTINGS)
        assert await store.run(ReadHead()) == RingHead("old", 1)
        sentinels.primary = new
        assert await store.run(ReadHead()) == RingHead("new", 1)
        sentinels.primary = None
        assert await store.run(ReadHead()) == RingHead("new", 1)
        await client.aclose()
        await pool.disconnect()
    asyncio.run(main())
