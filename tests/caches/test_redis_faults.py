"""Faults against real redis-servers: a shard killed in the middle of a
pipeline (the error names it, the other shards' answers are kept), a shard
stalled (timeouts as configured), and a shard ejected then tried again."""
from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from _support.redis_server import RedisServer

redis = pytest.importorskip("redis", reason="redis-py is in the test extra")

from redis.backoff import NoBackoff  # noqa: E402
from redis.retry import Retry  # noqa: E402

from chash.redis import ShardedRedis, ShardError, ShardTimeoutError  # noqa: E402

#: A script that keeps its shard busy for about three seconds (it is killed long before).
BUSY = ("local t = redis.call('TIME') "
        "while true do local n = redis.call('TIME') "
        "if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 3000000 then break end end "
        "return redis.call('SET', KEYS[1], 'done')")


def sharded_of(servers: list[RedisServer], **kwargs: Any) -> ShardedRedis:
    options = {"socket_connect_timeout": 2, "socket_timeout": 10, "retry": Retry(NoBackoff(), 0), **kwargs}
    return ShardedRedis([f"127.0.0.1:{s.port}:1" for s in servers], **options)


def key_on(sharded: ShardedRedis, shard: str, prefix: str = "k") -> str:
    return next(f"{prefix}{i}" for i in range(10_000) if sharded.shard_for(f"{prefix}{i}") == shard)


def test_a_shard_killed_mid_pipeline(servers: list[RedisServer]) -> None:
    sharded = sharded_of(servers)
    victim = sharded.shards[1]
    server = next(s for s in servers if f"127.0.0.1:{s.port}" == victim)
    others = [key_on(sharded, s, f"o{n}-") for n, s in enumerate(sharded.shards) if s != victim]
    busy = key_on(sharded, victim, "busy")
    for key in (*others, busy):
        sharded.set(key, "before")               # every shard connected before the pipeline
    pipe = sharded.pipeline()
    pipe.set(others[0], "after").eval(BUSY, 1, busy).get(others[1]).incr(key_on(sharded, victim, "n"))
    killer = threading.Timer(0.3, server._process.kill)  # type: ignore[union-attr]
    killer.start()
    with pytest.raises(ShardError) as info:
        pipe.execute()
    killer.join()
    error = info.value
    assert error.shard == victim and victim in str(error) and isinstance(error, redis.ConnectionError)
    assert error.results is not None and len(error.results) == 4
    assert error.results[0] is True and error.results[2] == b"before"
    assert isinstance(error.results[1], ShardError) and isinstance(error.results[3], ShardError)
    assert sharded.get(others[0]) == b"after"   # the other shards' writes are in
    with pytest.raises(ShardError, match=victim):
        sharded.get(busy)
    out = sharded.pipeline().get(others[0]).get(busy).execute(raise_on_error=False)
    assert out[0] == b"after" and isinstance(out[1], ShardError)
    sharded.close()
    server.stop()


def test_a_stalled_shard_times_out_as_configured(servers: list[RedisServer]) -> None:
    sharded = sharded_of(servers, socket_timeout=0.5)
    victim = sharded.shards[0]
    server = next(s for s in servers if f"127.0.0.1:{s.port}" == victim)
    stalled, fine = key_on(sharded, victim), key_on(sharded, sharded.shards[2])
    sharded.set(stalled, 1)
    sharded.set(fine, 2)
    server.pause()
    try:
        began = time.monotonic()
        with pytest.raises(ShardTimeoutError, match=victim) as info:
            sharded.get(stalled)
        assert time.monotonic() - began >= 0.45   # not before the configured timeout
        assert isinstance(info.value, redis.TimeoutError) and info.value.shard == victim
        assert sharded.get(fine) == b"2"
        with pytest.raises(ShardTimeoutError) as pipeline_info:
            sharded.pipeline().get(fine).get(stalled).execute()
        assert pipeline_info.value.results is not None and pipeline_info.value.results[0] == b"2"
        assert sharded.mget([fine, fine]) == [b"2", b"2"]
    finally:
        server.resume()
    sharded.close()


def test_an_ejected_shard_is_tried_again_after_its_retry_timeout(servers: list[RedisServer]) -> None:
    now = [1000.0]
    sharded = sharded_of(servers, auto_eject_hosts=True, server_failure_limit=2, server_retry_timeout=5000)
    sharded.clock = lambda: now[0]
    victim = sharded.shards[2]
    server = next(s for s in servers if f"127.0.0.1:{s.port}" == victim)
    key = key_on(sharded, victim)
    server.stop()
    for _ in range(2):
        with pytest.raises(ShardError):
            sharded.set(key, "x")
    assert sharded.ejected == [victim]
    elsewhere = sharded.shard_for(key)
    assert elsewhere != victim and sharded.set(key, "while-out")
    server.start()
    now[0] += 4.9
    assert sharded.shard_for(key) == elsewhere      # still out
    now[0] += 0.2
    assert sharded.ejected == [] and sharded.shard_for(key) == victim
    assert sharded.set(key, "back") and sharded.clients[victim].get(key) == b"back"
    sharded.close()
