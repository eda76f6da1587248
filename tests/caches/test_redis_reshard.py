"""chash.redis.reshard against four real redis-servers: 100,000 keys move
3 -> 4 and back 4 -> 3 while reader and writer threads use both clients.

Expected: no read misses or returns a value older than the last write
acknowledged before it began (0 stale reads), every acknowledged write is
there at the end (0 lost writes), exactly the moving keys are copied and
then live only on their new shard, TTLs are kept; the new shard serves
nothing until warm; a resharding stops and resumes, in the same process
or from its saved state."""
from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import pytest

from _support.redis_server import RedisServer, redis_server_path

pytest.importorskip("redis", reason="redis-py is in the test extra")

from chash.redis import Resharding, ShardedRedis, reshard

KEYS = [f"user:{i}" for i in range(100_000)]
TTL = 3600
CHUNK = 5_000


@pytest.fixture(scope="module")
def quartet() -> Iterator[list[RedisServer]]:
    redis_server_path()
    servers = [RedisServer() for _ in range(4)]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.close()


@pytest.fixture
def four(quartet: list[RedisServer]) -> list[RedisServer]:
    for server in quartet:
        client = server.connect()
        client.flushall()
        client.close()
    return quartet


def client_of(servers: list[RedisServer]) -> ShardedRedis:
    return ShardedRedis([f"127.0.0.1:{s.port}:1" for s in servers], socket_timeout=30)


def load(client: ShardedRedis, keys: list[str]) -> None:
    for start in range(0, len(keys), CHUNK):
        with client.pipeline() as pipe:
            for i, key in enumerate(keys[start:start + CHUNK], start):
                if i % 10 == 0:
                    pipe.set(key, f"0:{key}", ex=TTL)
                else:
                    pipe.set(key, f"0:{key}")
            pipe.execute()


class Traffic:
    """Writer and reader threads over both clients, checking every read."""

    def __init__(self, clients: list[ShardedRedis], keys: list[str], seed: int,
                 acked: dict[str, int]) -> None:
        self.clients = clients
        self.keys = keys
        self.acked = acked                        # key -> last version acknowledged, kept across moves
        self.fresh: list[str] = []                # keys first written during the move
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.reads = self.writes = 0
        self.lock = threading.Lock()
        self.threads = ([threading.Thread(target=self.writer, args=(seed + n, n)) for n in range(2)]
                        + [threading.Thread(target=self.reader, args=(seed + 10 + n,)) for n in range(2)])

    def __enter__(self) -> Traffic:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(120)
        assert not any(t.is_alive() for t in self.threads)

    def writer(self, seed: int, number: int) -> None:
        rng = random.Random(seed)
        mine = self.keys[number::2]               # each writer its own keys: versions well defined
        with self.lock:
            version = {k: self.acked[k] for k in mine if k in self.acked}
        count = 0
        try:
            while not self.stop.is_set() and count < 200_000:
                client = self.clients[rng.randrange(2)]
                if count % 50 == 0:
                    key = f"fresh:{seed}:{count}"
                    client.set(key, f"1:{key}")
                    with self.lock:
                        self.fresh.append(key)
                        self.acked[key] = 1
                else:
                    key = mine[rng.randrange(len(mine))]
                    v = version.get(key, 0) + 1
                    if rng.random() < 0.5:
                        client.set(key, f"{v}:{key}", keepttl=True)
                    else:
                        with client.pipeline() as pipe:
                            pipe.set(key, f"{v}:{key}", keepttl=True).get(key)
                            assert pipe.execute()[1] == f"{v}:{key}".encode()
                    version[key] = v
                    with self.lock:
                        self.acked[key] = v
                count += 1
        except Exception as exc:  # pragma: no cover - reported by the test
            self.errors.append(f"writer: {exc!r}")
        with self.lock:
            self.writes += count

    def reader(self, seed: int) -> None:
        rng = random.Random(seed)
        count = 0
        try:
            while not self.stop.is_set() and count < 400_000:
                client = self.clients[rng.randrange(2)]
                with self.lock:
                    fresh = self.fresh[rng.randrange(len(self.fresh))] if self.fresh and rng.random() < 0.1 \
                        else None
                key = fresh or self.keys[rng.randrange(len(self.keys))]
                with self.lock:
                    before = self.acked.get(key, 0)
                if rng.random() < 0.2:
                    got = client.mget([key, self.keys[rng.randrange(len(self.keys))]])[0]
                else:
                    got = client.get(key)
                count += 1
                if got is None:
                    self.errors.append(f"miss {key}")
                    continue
                version, _, rest = got.decode().partition(":")
                if rest != key or int(version) < before:
                    self.errors.append(f"stale {key}: {got!r}, {before} acknowledged before")
        except Exception as exc:  # pragma: no cover
            self.errors.append(f"reader: {exc!r}")
        with self.lock:
            self.reads += count


def keys_of(server: RedisServer) -> set[str]:
    client = server.connect()
    try:
        return {k.decode() for k in client.scan_iter(count=10_000)}
    finally:
        client.close()


def move(old: ShardedRedis, new: ShardedRedis, servers: list[RedisServer], seed: int,
         acked: dict[str, int]) -> None:
    """One resharding under traffic, and every check on its outcome."""
    stored = sorted(k.decode() for k in old.scan_iter(count=10_000))
    owners = dict(zip(stored, [old.shard_for(k) for k in stored], strict=True))
    targets = dict(zip(stored, [new.router.get_target_node(k) for k in stored], strict=True))
    moving = [k for k in stored if owners[k] != targets[k]]
    with_ttl = {k for k in KEYS[::10]}
    ttls_before = {k: old.ttl(k) for k in moving[::50] if k in with_ttl}
    warming = [n for n in new.shards if n not in old.shards]
    seen: list[tuple[int, int | None]] = []
    checked_warm: list[bool] = []

    def progress(resharding: Resharding) -> None:
        seen.append(tuple(resharding.progress))  # type: ignore[arg-type]
        if warming and len(seen) == 20:    # mid-way: the new shard serves nothing yet
            sample = [k for k in moving[:2000] if targets[k] in warming][:50]
            checked_warm.append(all(old.shard_for(k) == owners[k] == new.shard_for(k) for k in sample))

    # The new client serves once the resharding routes it (made, before it runs).
    resharding = Resharding(old, new, batch_size=200)
    with Traffic([old, new], KEYS, seed, acked) as traffic:
        assert resharding.run(progress)
    assert traffic.errors == [], traffic.errors[:5]
    assert traffic.reads > 0 and traffic.writes > 0
    assert resharding.committed and resharding.progress.done == resharding.progress.total
    assert seen and all(total is not None and done <= total for done, total in seen)
    if warming:
        assert checked_warm == [True]
    # Only the moving keys were copied (with the moving keys first written
    # while the keys were listed), and each now lives on its new shard only.
    fresh_moving = [k for k in traffic.fresh if old.core.router.get_target_node(k) != new.router.get_target_node(k)]
    assert len(moving) <= resharding.copied <= len(moving) + len(fresh_moving)
    assert resharding.deleted == resharding.copied
    by_port = {f"127.0.0.1:{s.port}": s for s in servers}
    all_keys = set(stored) | set(traffic.fresh)
    for name in set(old.shards) | set(new.shards):
        want = {k for k in all_keys if new.router.get_target_node(k) == name}
        assert keys_of(by_port[name]) == want, name
    # No write lost: every key holds its last acknowledged version, through both clients.
    expected = [f"{traffic.acked.get(k, 0)}:{k}".encode() for k in KEYS]
    assert new.mget(KEYS) == expected
    assert old.mget(KEYS[::97]) == expected[::97]
    fresh = sorted(set(acked) - set(KEYS))
    assert new.mget(fresh) == [f"1:{k}".encode() for k in fresh]
    # TTLs kept.
    for key, before in ttls_before.items():
        assert 0 < new.ttl(key) <= before, key
    assert all(new.ttl(k) == -1 for k in moving[1::50] if k not in with_ttl)


def test_reshard_three_to_four_and_back_under_traffic(four: list[RedisServer]) -> None:
    three, grown = client_of(four[:3]), client_of(four)
    load(three, KEYS)
    acked: dict[str, int] = {}
    move(three, grown, four, 100, acked)
    shrunk = client_of(four[1:])               # 4 -> 3: the first shard leaves
    move(grown, shrunk, four, 200, acked)
    for client in (three, grown, shrunk):
        client.close()


def test_stop_and_resume(four: list[RedisServer]) -> None:
    keys = KEYS[:6000]
    old, new = client_of(four[:3]), client_of(four)
    load(old, keys)
    stops = {"after": 3}

    def stop_early(resharding: Resharding) -> None:
        stops["after"] -= 1
        if stops["after"] == 0:
            resharding.stop()

    first = reshard(old, new, batch_size=100, on_progress=stop_early)
    done, total = first.progress
    assert not first.committed and done == 300 and total is not None and total > done
    assert old.mget(keys) == new.mget(keys) == [f"0:{k}".encode() for k in keys]
    saved = first.state()
    # Another process picks it up from the saved state, with clients of its own.
    old2, new2 = client_of(four[:3]), client_of(four)
    second = Resharding(old2, new2, batch_size=100, saved=saved)
    assert second.run()
    assert second.progress == (total, total)
    moving = [k for k in keys if old2.core.router.get_target_node(k) != new2.router.get_target_node(k)]
    assert second.copied == len(moving) - done and second.deleted == len(moving)
    assert new2.mget(keys) == [f"0:{k}".encode() for k in keys]
    for client in (old, new, old2, new2):
        client.close()


def test_reshard_refuses_what_it_cannot_do(four: list[RedisServer]) -> None:
    a, b = client_of(four[:3]), client_of(four)
    with pytest.raises(ValueError, match="same client"):
        Resharding(a, a)
    with pytest.raises(ValueError, match="batch_size"):
        Resharding(a, b, batch_size=0)
    tagged = ShardedRedis([f"127.0.0.1:{s.port}:1" for s in four], hash_tag="{}")
    with pytest.raises(ValueError, match="hash_tag"):
        Resharding(a, tagged)
    with pytest.raises(TypeError, match="ShardedRedis"):
        Resharding(a, object())  # type: ignore[arg-type]
    other = ShardedRedis([f"127.0.0.1:{four[3].port}:1 {a.shards[0]}"])
    with pytest.raises(ValueError, match=r"is 127\.0\.0\.1"):
        Resharding(a, other)
    Resharding(a, b)
    with pytest.raises(RuntimeError, match="already in a resharding"):
        Resharding(a, b)
    for client in (a, b, tagged, other):
        client.close()


def test_hash_tags_move_together(four: list[RedisServer]) -> None:
    nodes = [f"127.0.0.1:{s.port}:1" for s in four]
    old, new = ShardedRedis(nodes[:3], hash_tag="{}"), ShardedRedis(nodes, hash_tag="{}")
    keys = [f"u:{{{i}}}:{f}" for i in range(500) for f in ("a", "b", "c")]
    old.mset({k: k for k in keys})
    added: list[str] = []

    def write_new_keys_of_old_tags(resharding: Resharding) -> None:
        # A key first written during the move under a tag that moves (before
        # or after the tag's batch): it moves with the tag.
        step = len(added)
        for i in range(step * 10, step * 10 + 10):
            key = f"u:{{{i}}}:new"
            (old if i % 2 else new).set(key, key)
            added.append(key)

    # Batches of 20 tags: the fourth shard takes a quarter of the 500 tags
    # give or take (its ports, so its ring, are new each run); at 50 a tag
    # a batch, a share under a fifth left only two batches once.
    resharding = reshard(old, new, batch_size=20, on_progress=write_new_keys_of_old_tags)
    assert resharding.committed and len(added) > 20
    assert new.mget(keys) == [k.encode() for k in keys]
    assert new.mget(added) == [k.encode() for k in added]
    assert old.mget(added) == [k.encode() for k in added]
    for i in range(500):
        assert len({new.clients[new.shard_for(str(i))].exists(f"u:{{{i}}}:{f}") for f in "abc"}) == 1
    for key in added:   # only on the tag's new shard
        tag = key.split("{")[1].split("}")[0]
        assert [n for n, c in new.clients.items() if c.exists(key)] == [new.shard_for(tag)]
    assert new.rename("u:{7}:a", "u:{7}:z")
    for client in (old, new):
        client.close()


def test_stopped_then_run_again(four: list[RedisServer]) -> None:
    keys = KEYS[:3000]
    old, new = client_of(four[1:]), client_of(four)
    load(old, keys)
    resharding = Resharding(old, new, batch_size=50)
    assert not resharding.run(lambda r: r.stop())            # one batch, then stopped
    assert resharding.progress.done == 50 and not resharding.committed
    new.set(keys[0], "changed")                               # served meanwhile
    assert resharding.run()
    assert resharding.committed and resharding.progress.done == resharding.progress.total
    assert new.mget(keys) == [b"changed"] + [f"0:{k}".encode() for k in keys[1:]]
    for client in (old, new):
        client.close()
