"""ShardedRedis beside a real nutcracker (twemproxy) redis pool of the same
three redis-servers (``distribution: ketama``, ``hash: md5``): keys written
through either are found through the other, each on the shard both agree
on, with and without ``hash_tag``, and with a shard stopped and ejected."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from _support.compat_programs import varied_keys
from _support.ports import free_port
from _support.redis_pools import pool_yaml, proxy_client_kwargs
from _support.redis_server import RedisServer
from chash.compat import twemproxy_servers

redis = pytest.importorskip("redis", reason="redis-py is in the test extra")

from chash.redis import ShardedRedis, ShardError  # noqa: E402


def proxy_client(port: int) -> Any:
    """A redis-py client of nutcracker."""
    return redis.Redis(port=port, **proxy_client_kwargs())


def holders(sharded: ShardedRedis, keys: list[str]) -> dict[str, str]:
    """{key: the shard whose server holds it}, asked of every server."""
    found: dict[str, str] = {}
    for name, client in sharded.clients.items():
        try:
            pipe = client.pipeline(transaction=False)
            for key in keys:
                pipe.exists(key)
            answers = pipe.execute()
        except redis.ConnectionError:
            continue   # the stopped shard
        for key, there in zip(keys, answers, strict=True):
            if there:
                assert key not in found, f"{key!r} is on two shards"
                found[key] = name
    return found


def keys_for(tag: str | None, seed: int) -> list[str]:
    keys = varied_keys(1500, seed)
    if tag:
        keys += [f"user:{{{i % 97}}}:{i}" for i in range(500)] + [f"{{}}bare{i}" for i in range(50)]
    return keys


def retried(write: Callable[[], Any], errors: tuple[type[BaseException], ...], tries: int = 5) -> Any:
    """A write retried while the shard it met is being ejected."""
    for attempt in range(tries):
        try:
            return write()
        except errors:
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


@pytest.mark.parametrize("hash_tag", [None, "{}"], ids=["whole-key", "hash_tag"])
def test_nutcracker_and_sharded_redis_agree(servers: list[RedisServer], proxy: Any,
                                            hash_tag: str | None) -> None:
    yaml = pool_yaml(servers, free_port(), weights=[1, 2, 3], names=[None, "cache-b", None],
                     hash_tag=hash_tag)
    listen = int(yaml.split("listen: 127.0.0.1:")[1].split()[0])
    through = proxy_client(proxy(yaml, listen))
    keys = keys_for(hash_tag, 71)
    half = len(keys) // 2
    with ShardedRedis(twemproxy_servers(yaml, "pool"), hash_tag=hash_tag, socket_timeout=10) as sharded:
        pipe = through.pipeline(transaction=False)
        for key in keys[:half]:
            pipe.set(key, f"n-{key}")
        assert all(pipe.execute())
        with sharded.pipeline() as ours:
            for key in keys[half:]:
                ours.set(key, f"c-{key}")
            assert all(ours.execute())
        assert sharded.mget(keys[:half]) == [f"n-{k}".encode() for k in keys[:half]]
        assert through.mget(keys[half:]) == [f"c-{k}".encode() for k in keys[half:]]
        where = holders(sharded, keys)
        assert [where.get(k) for k in keys] == [sharded.shard_for(k) for k in keys]
        assert set(where.values()) == set(sharded.shards) and "cache-b" in sharded.shards
        if hash_tag:
            assert len({where[f"user:{{{i % 97}}}:{i}"] for i in range(0, 500, 97)}) == 1
    through.close()


def test_a_stopped_shard_is_ejected_as_nutcracker_ejects_it(servers: list[RedisServer], proxy: Any) -> None:
    listen = free_port()
    yaml = pool_yaml(servers, listen, eject=True)
    through = proxy_client(proxy(yaml, listen))
    sharded = ShardedRedis(twemproxy_servers(yaml, "pool"), auto_eject_hosts=True, server_failure_limit=1,
                           server_retry_timeout=600_000, socket_timeout=5, socket_connect_timeout=2)
    keys = keys_for(None, 81)
    full = [sharded.shard_for(k) for k in keys]
    victim = f"127.0.0.1:{servers[1].port}"
    assert victim in full
    servers[1].stop()
    half = len(keys) // 2
    for key in keys[:half]:
        retried(lambda key=key: through.set(key, f"n-{key}"), (redis.RedisError,))
    for key in keys[half:]:
        retried(lambda key=key: sharded.set(key, f"c-{key}"), (ShardError,))
    assert sharded.ejected == [victim]
    assert victim not in sharded.router.nodes
    assert sharded.mget(keys[:half]) == [f"n-{k}".encode() for k in keys[:half]]
    assert through.mget(keys[half:]) == [f"c-{k}".encode() for k in keys[half:]]
    where = holders(sharded, keys)
    assert [where.get(k) for k in keys] == [sharded.shard_for(k) for k in keys]
    # Only the stopped shard's keys moved, as on a ring without it.
    assert {before for k, before in zip(keys, full, strict=True) if before != where[k]} == {victim}
    sharded.close()
    through.close()
