"""The Lua scripts of the Redis store, called directly on a real redis-server.

Every script must load (``SCRIPT LOAD``) and answer a few calls with known
replies, in the shapes ``chash.membership.redis.scripts`` documents and the
protocol parses: seeding, reading, writing, refusing, voting, sweeping,
stamping, starting an epoch, and finding the store damaged.  The calls go
through ``RedisStore``, as the drivers make them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from _support.redis_server import RedisServer
from chash.membership.protocol import SCRIPTS as CALLS
from chash.membership.protocol import Call
from chash.membership.redis.scripts import SCRIPTS
from chash.membership.redis.store import KEY_PARTS, RedisStore, ring_keys
from chash.membership.settings import MembershipSettings

pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")

SETTINGS = MembershipSettings(name="known")
CHANNEL = "chash:{known}:events"
META = "chash:{known}:meta"


@pytest.fixture
def store(text_client: Any) -> RedisStore:
    """The ring ``known`` in the emptied shared server, replies as str."""
    return RedisStore(text_client, SETTINGS)


def run(store: RedisStore, script: str, *args: str | int) -> Any:
    return store.run(Call(script, args))


def seed(store: RedisStore, *nodes: tuple[str, float]) -> Any:
    """SEED epoch e1 at version 1 with ``nodes``, none disabled or down."""
    args: list[str | int] = [CHANNEL, "e1", 1, "cfg", 0, len(nodes)]
    for node, weight in nodes:
        args += [node, repr(weight)]
    return run(store, "SEED", *args, 0)


def test_the_store_has_a_script_for_every_call_of_the_protocol() -> None:
    assert sorted(SCRIPTS) == sorted(CALLS)
    assert ring_keys(SETTINGS) == [f"chash:{{known}}:{part}" for part in KEY_PARTS]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_script_loads(name: str, text_client: Any, server: RedisServer) -> None:
    source = SCRIPTS[name]
    sha = text_client.script_load(source)
    assert sha == hashlib.sha1(source.encode()).hexdigest()
    assert text_client.script_exists(sha) == [True]


def test_reads_of_a_ring_that_does_not_exist(store: RedisStore) -> None:
    assert run(store, "SNAPSHOT") == [-1]
    assert run(store, "HEAD") == [-1]
    assert run(store, "WRITE", CHANNEL, "add", "a", "1.0", 0, "cfg") == [-1]
    assert run(store, "STAMP", "e1", 1, "digest") == 0


def test_seed_then_snapshot(store: RedisStore, text_client: Any) -> None:
    assert seed(store, ("a", 1.0), ("b", 2.0)) == [1, "e1", 1, []]
    assert seed(store, ("z", 1.0)) == [0, "e1", 1, []]  # a sound ring exists: kept
    # Sharded announcements on Redis 7 and newer (the suite needs 7).
    assert run(store, "SNAPSHOT") == [1, "e1", 1, "cfg", ["a", "1.0", "b", "2.0"], [], [],
                                      None, 1, ["a", "1", "b", "2"]]
    assert text_client.hgetall(META) == {"epoch": "e1", "version": "1", "config": "cfg",
                                         "count": "2", "ndisabled": "0", "norder": "2",
                                         "seq": "2"}


def test_writes_and_their_refusals(store: RedisStore) -> None:
    seed(store, ("a", 1.0))
    assert run(store, "WRITE", CHANNEL, "add", "b", "2.0", 0, "cfg") == [1, "e1", 2, [], 0, 0]
    assert run(store, "WRITE", CHANNEL, "add", "b", "2.0", 0, "cfg") == [0, "e1", 2, []]
    assert run(store, "WRITE", CHANNEL, "add", "b", "2.0", 0, "other") == [-5, "cfg"]
    assert run(store, "WRITE", CHANNEL, "remove", "zz", "", 0, "cfg") == [-2]
    assert run(store, "WRITE", CHANNEL, "disable", "a", "maintenance", 0, "cfg") \
        == [1, "e1", 3, [], 2, 1]
    # b is the last node in service: taking it out is refused unless forced.
    assert run(store, "WRITE", CHANNEL, "remove", "b", "", 0, "cfg") == [-4, 1, 1]
    assert run(store, "WRITE", CHANNEL, "remove", "b", "", 1, "cfg") == [1, "e1", 4, [], 1, 1]
    assert run(store, "WRITE", CHANNEL, "enable", "a", "", 0, "cfg") == [1, "e1", 5, [], 0, 0]
    snapshot = run(store, "SNAPSHOT")
    assert snapshot[4] == ["a", "1.0"] and snapshot[5] == [] and snapshot[9] == ["a", "1"]


def test_head_and_stamp(store: RedisStore) -> None:
    seed(store, ("a", 1.0))
    assert run(store, "HEAD") == [1, "e1", 1, None]
    assert run(store, "STAMP", "e1", 1, "d1") == 1
    assert run(store, "STAMP", "e1", 1, "d2") == 0  # stamped already
    assert run(store, "STAMP", "e1", 9, "d3") == 0  # another version
    assert run(store, "HEAD") == [1, "e1", 1, "d1"]
    run(store, "WRITE", CHANNEL, "add", "b", "1.0", 0, "cfg")
    assert run(store, "HEAD") == [1, "e1", 2, None]  # a change clears the digest


def test_votes_take_a_node_out_and_a_withdrawal_brings_it_back(store: RedisStore) -> None:
    seed(store, ("a", 1.0), ("b", 1.0))
    # One live reporter of one votes a down: a majority.  Votes on a node
    # the ring does not hold are ignored.
    assert run(store, "VOTE", CHANNEL, "r1", 30_000, "majority", "a", 1, "boom",
               "ghost", 1, "boom") == [1, "e1", 2, []]
    verdict = json.loads(dict(zip(*[iter(run(store, "SNAPSHOT")[6])] * 2, strict=True))["a"])
    assert (verdict["r"], verdict["n"], verdict["l"]) == ("boom", 1, 1)
    # A second reporter voting it up leaves one down vote of two: no majority.
    assert run(store, "VOTE", CHANNEL, "r2", 30_000, "majority", "a", 0, "") \
        == [1, "e1", 3, []]
    assert run(store, "VOTE", CHANNEL, "r2", 30_000, "majority", "a", 1, "boom too") \
        == [1, "e1", 4, []]
    assert run(store, "SWEEP", CHANNEL, 30_000, "majority", "") == [0, "e1", 4, []]
    assert run(store, "SWEEP", CHANNEL, 30_000, "majority", "r1") == [0, "e1", 4, []]
    assert run(store, "SWEEP", CHANNEL, 30_000, "majority", "r2") == [1, "e1", 5, []]
    assert run(store, "SNAPSHOT")[6] == []


def test_reepoch_only_where_the_ring_was_seen(store: RedisStore) -> None:
    seed(store, ("a", 1.0))
    assert run(store, "REEPOCH", CHANNEL, "e1", 7, "e2", 8) == [0, "e1", 1, []]
    assert run(store, "REEPOCH", CHANNEL, "e1", 1, "e2", 8) == [1, "e2", 8, []]
    assert run(store, "HEAD") == [1, "e2", 8, None]


def test_a_damaged_store_is_reported_before_any_write(store: RedisStore,
                                                      text_client: Any) -> None:
    seed(store, ("a", 1.0), ("b", 1.0))
    text_client.hset(META, "version", "x")
    damaged = [-3, "meta.version is not a count: x"]
    assert run(store, "SNAPSHOT") == damaged
    assert run(store, "WRITE", CHANNEL, "add", "c", "1.0", 0, "cfg") == damaged
    assert run(store, "VOTE", CHANNEL, "r1", 30_000, "majority", "a", 1, "boom") == damaged
    assert text_client.hlen("chash:{known}:nodes") == 2
    text_client.hset(META, "version", 1)
    text_client.delete("chash:{known}:nodes")
    assert run(store, "HEAD") == [-3, "meta.count is 2 but 0 entries are stored"]
    # SEED replaces a damaged ring only when told to restore it.
    assert seed(store, ("z", 1.0)) == [-3, "meta.count is 2 but 0 entries are stored"]
    restore = [CHANNEL, "e9", 2, "cfg", 1, 1, "z", "1.0", 0]
    assert run(store, "SEED", *restore) == [1, "e9", 2, []]


def test_changes_are_announced(store: RedisStore, text_client: Any) -> None:
    seed(store, ("a", 1.0))
    pubsub = text_client.pubsub()
    try:
        pubsub.ssubscribe(CHANNEL)
        assert pubsub.get_sharded_message(timeout=2.0)["type"] == "ssubscribe"
        run(store, "WRITE", CHANNEL, "add", "b", "1.0", 0, "cfg")
        message = pubsub.get_sharded_message(timeout=2.0)
        assert (message["type"], message["data"]) == ("smessage", "e1:2")
        run(store, "WRITE", CHANNEL, "add", "b", "1.0", 0, "cfg")  # no change: silent
        assert pubsub.get_sharded_message(timeout=0.3) is None
    finally:
        pubsub.close()
