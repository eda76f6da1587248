"""chash.redis.asyncio.ShardedRedis against the same three redis-servers:
the sync client's routing and answers, awaited."""
from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

from _support.compat_programs import varied_keys
from _support.ports import free_port
from _support.redis_pools import pool_yaml, proxy_client_kwargs
from _support.redis_server import RedisServer
from chash.compat import twemproxy_servers

redis = pytest.importorskip("redis", reason="redis-py is in the test extra")

from chash.redis import RoutingError, ShardError  # noqa: E402
from chash.redis import ShardedRedis as SyncShardedRedis  # noqa: E402
from chash.redis.asyncio import ShardedRedis  # noqa: E402


def nodes_of(servers: list[RedisServer]) -> list[str]:
    return [f"127.0.0.1:{s.port}:{w}" for s, w in zip(servers, (1, 2, 1), strict=True)]


def test_the_same_shards_and_answers_as_the_sync_client(servers: list[RedisServer]) -> None:
    keys = varied_keys(1000, 91)

    async def main() -> None:
        async with ShardedRedis(nodes_of(servers), socket_timeout=5) as sharded:
            for key in keys[:500]:
                assert await sharded.set(key, f"v-{key}")
            assert await sharded.mset({k: f"v-{k}" for k in keys[500:]})
            assert await sharded.mget(keys) == [f"v-{k}".encode() for k in keys]
            assert await sharded.exists(*keys, "nope") == len(keys)
            assert await sharded.delete(*keys[:100]) == 100
            found = [k async for k in sharded.scan_iter(count=200)]
            assert len(found) == 900
            a, b = next((a, b) for a, b in itertools.pairwise(keys[200:])
                        if sharded.shard_for(a) != sharded.shard_for(b))
            with pytest.raises(RoutingError, match="share a hash tag"):
                await sharded.rename(a, b)
            with pytest.raises(RoutingError, match="no key"):
                await sharded.execute_command("PING")
            async with sharded.pipeline() as pipe:
                for key in keys[100:400]:
                    pipe.get(key)
                pipe.mget(keys[400:450]).incr("counter")
                out = await pipe.execute()
            assert out[:300] == [f"v-{k}".encode() for k in keys[100:400]]
            assert out[300] == [f"v-{k}".encode() for k in keys[400:450]] and out[301] == 1

    asyncio.run(main())
    with SyncShardedRedis(nodes_of(servers)) as sync:
        assert sync.mget(keys[100:]) == [f"v-{k}".encode() for k in keys[100:]]
        for name, client in sync.clients.items():
            for key in keys[100:300]:
                assert bool(client.exists(key)) == (sync.shard_for(key) == name)


def test_registered_scripts(servers: list[RedisServer]) -> None:
    async def main() -> None:
        async with ShardedRedis(nodes_of(servers)) as sharded:
            double = sharded.register_script("return 2 * redis.call('INCR', KEYS[1])")
            assert [await double(keys=[f"s{i}"]) for i in range(20)] == [2] * 20

    asyncio.run(main())


def test_hash_tags_and_transactions(servers: list[RedisServer]) -> None:
    async def main() -> None:
        async with ShardedRedis(nodes_of(servers), hash_tag="{}") as tagged:
            await tagged.set("{u1}a", 1)
            assert await tagged.rename("{u1}a", "{u1}b")
            pipe = tagged.pipeline(transaction=True)
            assert await pipe.incr("{u1}b").get("{u1}b").execute() == [2, b"2"]
            pipe.incr("{u1}b").incr("{u2}b")
            with pytest.raises(RoutingError, match="transaction"):
                await pipe.execute()

    asyncio.run(main())


def test_agrees_with_nutcracker(servers: list[RedisServer], proxy: Any, tmp_path: Path) -> None:
    listen = free_port()
    yaml = pool_yaml(servers, listen, weights=[3, 1, 2], hash_tag="{}")
    proxy(yaml, listen)
    keys = varied_keys(800, 92) + [f"s:{{{i % 13}}}:{i}" for i in range(200)]

    async def main() -> None:
        sharded = ShardedRedis(twemproxy_servers(yaml, "pool"), hash_tag="{}")
        async with sharded, sharded.pipeline() as pipe:
            for key in keys:
                pipe.set(key, key)
            assert all(await pipe.execute())
        through = redis.asyncio.Redis(port=listen, **proxy_client_kwargs())
        assert await through.mget(keys) == [k.encode() for k in keys]
        await through.aclose()

    asyncio.run(main())


def test_a_stopped_shard_is_named(servers: list[RedisServer]) -> None:
    async def main() -> None:
        async with ShardedRedis(nodes_of(servers), socket_connect_timeout=2, auto_eject_hosts=True,
                                server_failure_limit=1, server_retry_timeout=600_000) as sharded:
            victim = f"127.0.0.1:{servers[2].port}"
            key = next(f"k{i}" for i in range(1000) if sharded.shard_for(f"k{i}") == victim)
            servers[2].stop()
            with pytest.raises(ShardError, match=victim) as info:
                await sharded.get(key)
            assert info.value.shard == victim and isinstance(info.value, redis.ConnectionError)
            assert sharded.ejected == [victim] and sharded.shard_for(key) != victim
            assert await sharded.set(key, 1)

    asyncio.run(main())
