"""chash.redis.ShardedRedis against three real redis-servers: every key on
its shard, multi-key commands split and merged in order, hash tags,
pipelines, scan_iter, and the commands that cannot be routed."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from _support.compat_programs import varied_keys
from _support.redis_server import RedisServer

redis = pytest.importorskip("redis", reason="redis-py is in the test extra")

from chash.redis import RoutingError, ShardedRedis  # noqa: E402


def nodes_of(servers: list[RedisServer], weights: tuple[int, ...] = (1, 1, 1)) -> list[str]:
    return [f"127.0.0.1:{s.port}:{w}" for s, w in zip(servers, weights, strict=True)]


@pytest.fixture
def sharded(servers: list[RedisServer]) -> Iterator[ShardedRedis]:
    client = ShardedRedis(nodes_of(servers, (1, 2, 1)), socket_timeout=5)
    try:
        yield client
    finally:
        client.close()


def holder(servers: list[RedisServer], sharded: ShardedRedis, keys: list[str]) -> dict[str, str]:
    """{key: the shard whose server holds it}, asked of each server directly."""
    found: dict[str, str] = {}
    for name, client in sharded.clients.items():
        for key, there in zip(keys, exists_each(client, keys), strict=True):
            if there:
                assert key not in found, f"{key!r} on two shards"
                found[key] = name
    return found


def exists_each(client: Any, keys: list[str]) -> list[int]:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.exists(key)
    answers: list[int] = pipe.execute()
    return answers


def test_every_key_on_its_shard(servers: list[RedisServer], sharded: ShardedRedis) -> None:
    keys = varied_keys(2000, 61)
    for key in keys:
        assert sharded.set(key, f"v-{key}")
    where = holder(servers, sharded, keys)
    assert [where[k] for k in keys] == [sharded.shard_for(k) for k in keys]
    assert set(where.values()) == set(sharded.shards)
    assert [sharded.get(k) for k in keys[:200]] == [f"v-{k}".encode() for k in keys[:200]]
    assert sharded.incr("counter", 5) == 5 and sharded.client_for("counter").get("counter") == b"5"


def test_multi_key_commands_split_and_merge(sharded: ShardedRedis) -> None:
    keys = [f"user:{i}" for i in range(300)]
    assert sharded.mset({k: f"v{i}" for i, k in enumerate(keys)}) is True
    assert len({sharded.shard_for(k) for k in keys}) == 3
    missing = ["nope:1", "nope:2"]
    asked = keys[::-1] + missing + keys[:5]
    assert sharded.mget(asked) == [f"v{keys.index(k)}".encode() if k in keys else None for k in asked]
    assert sharded.exists(*keys[:50], *missing, keys[0]) == 51
    assert sharded.touch(*keys[:10]) == 10
    assert sharded.unlink(*keys[:20]) == 20
    assert sharded.delete(*keys[20:120], *missing) == 100
    assert sharded.exists(*keys) == 180


def test_commands_that_cannot_be_routed(sharded: ShardedRedis) -> None:
    a, b = next((f"a{i}", f"b{i}") for i in range(100)
                if sharded.shard_for(f"a{i}") != sharded.shard_for(f"b{i}"))
    sharded.set(a, 1)
    with pytest.raises(RoutingError, match="RENAME: its keys lie on shards"):
        sharded.rename(a, b)
    with pytest.raises(RoutingError, match="share a hash tag"):
        sharded.eval("return 1", 2, a, b)
    with pytest.raises(RoutingError, match="KEYS: no key"):
        sharded.keys("*")
    with pytest.raises(RoutingError, match="PING: no key"):
        sharded.execute_command("PING")
    pipe = sharded.pipeline(transaction=True)
    with pytest.raises(RoutingError, match="transaction's keys must share a hash tag"):
        pipe.set(a, 1).set(b, 2).execute()
    assert sharded.eval("return redis.call('GET', KEYS[1])", 1, a) == b"1"


def test_hash_tags_keep_related_keys_together(servers: list[RedisServer]) -> None:
    with ShardedRedis(nodes_of(servers), hash_tag="{}") as tagged:
        keys = [f"user:{{{i}}}:{field}" for i in range(50) for field in ("name", "mail")]
        for key in keys:
            tagged.set(key, key)
        for i in range(50):
            assert tagged.shard_for(f"user:{{{i}}}:name") == tagged.shard_for(f"user:{{{i}}}:mail") \
                == tagged.shard_for(str(i))
        assert len({tagged.shard_for(str(i)) for i in range(50)}) == 3
        assert tagged.rename("user:{7}:name", "user:{7}:alias")
        assert tagged.get("user:{7}:alias") == b"user:{7}:name"
        assert tagged.eval("return redis.call('MGET', KEYS[1], KEYS[2])", 2,
                           "user:{8}:name", "user:{8}:mail") == [b"user:{8}:name", b"user:{8}:mail"]
        with tagged.pipeline(transaction=True) as pipe:
            assert pipe.incr("{t}a").incr("{t}b").get("{t}a").execute() == [1, 1, b"1"]


def test_pipelines_answer_in_order(sharded: ShardedRedis) -> None:
    keys = [f"p:{i}" for i in range(400)]
    with sharded.pipeline() as pipe:
        for i, key in enumerate(keys):
            pipe.set(key, i)
        pipe.mget(keys[:100])
        pipe.delete(*keys[:10])
        pipe.incr(keys[399])
        results = pipe.execute()
    assert results[:400] == [True] * 400
    assert results[400] == [str(i).encode() for i in range(100)]
    assert results[401:] == [10, 400]
    pipe = sharded.pipeline()
    pipe.get(keys[50]).hset(keys[51], "f", "v").get(keys[52])
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        pipe.execute()
    pipe.get(keys[50]).hset(keys[51], "f", "v").get(keys[52])
    out = pipe.execute(raise_on_error=False)
    assert out[0] == b"50" and isinstance(out[1], Exception) and out[2] == b"52"
    assert sharded.pipeline().execute() == []


def test_scan_iter_over_every_shard(sharded: ShardedRedis) -> None:
    keys = {f"s:{i}" for i in range(500)}
    sharded.mset({k: 1 for k in keys})
    sharded.mset({f"other:{i}": 1 for i in range(20)})
    assert set(k.decode() for k in sharded.scan_iter(match="s:*", count=100)) == keys
    assert sum(1 for _ in sharded.scan_iter()) == 520


def test_options_reach_every_shard_and_bad_ones_are_refused(servers: list[RedisServer]) -> None:
    with ShardedRedis(nodes_of(servers), decode_responses=True) as text:
        text.set("é", "ü")
        assert text.get("é") == "ü"
        assert text.clients[text.shard_for("é")].get("é") == "ü"
    with pytest.raises(TypeError, match="comes from the nodes"):
        ShardedRedis(nodes_of(servers), host="127.0.0.1")
    with pytest.raises(TypeError, match="shard_hint"):
        ShardedRedis(nodes_of(servers)).pipeline(shard_hint="x")  # type: ignore[arg-type]


def test_registered_scripts_load_themselves_on_every_shard(sharded: ShardedRedis) -> None:
    incr_by = sharded.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    keys = [f"script:{i}" for i in range(30)]
    assert len({sharded.shard_for(k) for k in keys}) == 3
    assert [incr_by(keys=[k], args=[i]) for i, k in enumerate(keys)] == list(range(30))
    assert sharded.script_load("return 1") == sharded.script_load("return 1")
