"""A real resharding: three redis-server cache nodes hold 100,000 keys; a
fourth joins and one leaves, the data moves with chash.migration.Migration
in batches while reader threads read every key through ``route()``.

Expected: no read misses or returns another value, exactly the moving keys
are copied (each to its new owner), and at the end, after commit and the
old copies' removal, every key lives on its owner only.
"""
from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from _support.compat_programs import require
from _support.redis_server import RedisServer
from chash import ConsistentHashRouter
from chash.migration import Migration

pytest.importorskip("redis", reason="the redis extra is not installed")

KEYS = [f"user:{i}" for i in range(100_000)]
OLD = ("cache-a", "cache-b", "cache-c")
NEW = ("cache-b", "cache-c", "cache-d")
CHUNK = 5_000  # keys per pipelined command


def value_of(key: str) -> bytes:
    return f"v1:{key}".encode()


@pytest.fixture(scope="module")
def caches() -> Iterator[dict[str, Any]]:
    """name -> a redis.Redis of its own redis-server, the four of them."""
    require("redis-server")
    servers = {name: RedisServer() for name in ("cache-a", "cache-b", "cache-c", "cache-d")}
    try:
        for server in servers.values():
            server.start()
        clients = {name: s.connect(socket_timeout=10.0) for name, s in servers.items()}
        yield clients
        for client in clients.values():
            client.close()
    finally:
        for server in servers.values():
            server.close()


def ring(names: tuple[str, ...]) -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    router.add_service_nodes(list(names))
    return router


def group(triples: list[tuple[str, str]]) -> dict[str, list[str]]:
    """(key, node) pairs as node -> keys."""
    out: dict[str, list[str]] = {}
    for key, node in triples:
        out.setdefault(node, []).append(key)
    return out


def keys_on(client: Any) -> set[str]:
    return {k.decode() for k in client.scan_iter(count=10_000)}


def test_reshard_under_readers(caches: dict[str, Any]) -> None:
    old, new = ring(OLD), ring(NEW)
    for client in caches.values():
        client.flushall()
    owners = old.get_target_nodes(KEYS)
    for node, keys in group(list(zip(KEYS, owners, strict=True))).items():
        pipe = caches[node].pipeline(transaction=False)
        for i in range(0, len(keys), CHUNK):
            pipe.mset({k: value_of(k) for k in keys[i:i + CHUNK]})
        pipe.execute()

    migration = Migration(old, new, KEYS, batch_size=200, warming=["cache-d"])
    stop = threading.Event()
    reads = [0, 0]  # reads, and those answered by a key's new owner before commit
    misses: list[str] = []
    stale: list[str] = []
    lock = threading.Lock()

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        client_for = {name: caches[name] for name in caches}
        count = switched = 0
        while not stop.is_set():
            i = rng.randrange(len(KEYS))
            key = KEYS[i]
            node = str(migration.route(key))
            got = client_for[node].get(key)
            count += 1
            switched += node != owners[i] and not migration.committed
            if got is None:
                misses.append(key)
            elif got != value_of(key):
                stale.append(key)
        with lock:
            reads[0] += count
            reads[1] += switched

    readers = [threading.Thread(target=reader, args=(seed,)) for seed in range(3)]
    for t in readers:
        t.start()
    copied: list[tuple[str, str, str]] = []
    sizes = set()
    try:
        for batch in migration.batches():
            sizes.add(len(batch))
            by_source: dict[str, list[tuple[str, str, str]]] = {}
            for triple in batch:
                by_source.setdefault(triple[1], []).append(triple)
            for source, triples in by_source.items():
                values = caches[source].mget([k for k, _, _ in triples])
                by_target: dict[str, dict[str, bytes]] = {}
                for (key, _, target), value in zip(triples, values, strict=True):
                    assert value is not None, key
                    by_target.setdefault(target, {})[key] = value
                for target, items in by_target.items():
                    caches[target].mset(items)
            copied.extend(batch)
            migration.mark_done(batch)
        migration.commit()
    finally:
        stop.set()
        for t in readers:
            t.join(30)

    assert reads[0] > 0 and reads[1] > 0 and misses == [] and stale == []
    assert max(sizes) <= 200
    new_owners = new.get_target_nodes(KEYS)
    expected = {(k, s, t) for k, s, t in zip(KEYS, owners, new_owners, strict=True) if s != t}
    assert sorted(copied) == sorted(expected) and len(copied) == len(expected)
    assert migration.progress == (len(expected), len(expected))

    # Drop the old copies (no read that began before commit is in flight).
    for node, keys in group([(k, s) for k, s, _ in copied]).items():
        pipe = caches[node].pipeline(transaction=False)
        for i in range(0, len(keys), CHUNK):
            pipe.delete(*keys[i:i + CHUNK])
        pipe.execute()
    want = group(list(zip(KEYS, new_owners, strict=True)))
    for name, client in caches.items():
        assert keys_on(client) == set(want.get(name, ())), name
    assert all(migration.route(k) == n for k, n in zip(KEYS[:1000], new_owners[:1000], strict=True))
