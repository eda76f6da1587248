"""The Redis store's Lua scripts, called through ``RedisStore`` on a real
redis-server.

Every operation of the store contract has its script, and every script
must load (``SCRIPT LOAD``).  What each operation sends is pinned: the
script and its ``ARGV``, exactly as earlier versions sent them, so that
gateways of either version can share a ring.  Then each operation answers
a few calls with known records: seeding, reading, writing, refusing,
voting, sweeping, stamping, starting an epoch, and finding the store
damaged; with replies as str or as bytes alike.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from _support.redis_server import RedisServer
from chash.membership.redis.codec import script_call
from chash.membership.redis.scripts import SCRIPTS
from chash.membership.redis.store import KEY_PARTS, RedisStore, ring_channel, ring_keys
from chash.membership.settings import MembershipSettings
from chash.membership.state import (
    Change,
    HealthVerdict,
    NoRing,
    NoSuchNode,
    OtherConfig,
    Outcome,
    Refused,
    RingHead,
    StoredRing,
)
from chash.membership.store import (
    HISTORY_LENGTH,
    History,
    Operation,
    ReadConfig,
    ReadHead,
    ReadRing,
    Reepoch,
    Seed,
    Stamp,
    Sweep,
    Vote,
    Write,
    WriteStamp,
)

pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")

SETTINGS = MembershipSettings(name="known")
CHANNEL = "chash:{known}:events"
META = "chash:{known}:meta"


@pytest.fixture
def store(text_client: Any) -> RedisStore:
    """The ring ``known`` in the emptied shared server, replies as str."""
    return RedisStore(text_client, SETTINGS)


def seed(store: RedisStore, *nodes: tuple[str, float]) -> Any:
    """Seed epoch e1 at version 1 with ``nodes``, none disabled or down."""
    return store.run(Seed("e1", 1, "cfg", False,
                          nodes={node: repr(weight) for node, weight in nodes}))


def write(action: Any, node: str, value: str = "", force: bool = False,
          config: str = "cfg") -> Write:
    return Write(action, node, config, value, force)


def vote(reporter: str, **votes: tuple[bool, str]) -> Vote:
    return Vote(reporter, 30_000, "majority", votes)


def position(version: int, epoch: str = "e1") -> tuple[str, int]:
    return (epoch, version)


class Example:
    """An operation's arguments, and the script and ARGV that perform it."""

    def __init__(self, *args: Any, script: str, argv: list[str | int]) -> None:
        self.args = args
        self.script = script
        self.argv = argv


#: Each operation's script and ARGV, as gateways of every version send them.
EXAMPLES: dict[type[Operation[Any]], Example] = {
    ReadRing: Example(script="SNAPSHOT", argv=[]),
    ReadConfig: Example(script="SNAPSHOT", argv=[]),
    ReadHead: Example(script="HEAD", argv=[]),
    Stamp: Example("e1", 4, "d1", script="STAMP", argv=["e1", 4, "d1"]),
    Reepoch: Example("e1", 3, "e2", 7, script="REEPOCH", argv=[CHANNEL, "e1", 3, "e2", 7]),
    Seed: Example("e2", 5, "cfg", True, {"b": "2.0", "a": "1.0"}, {"b": "maintenance"},
                  {"a": HealthVerdict("refused", 2, 3, 1.5)}, {"a": "east"}, script="SEED",
                  argv=[CHANNEL, "e2", 5, "cfg", 1, 2, "b", "2.0", "a", "1.0", 1, "b",
                        "maintenance", 1, "a", "east", "a",
                        '{"r": "refused", "n": 2, "l": 3}']),
    Write: Example("disable", "a", "cfg", "maintenance", True, script="WRITE",
                   argv=[CHANNEL, "disable", "a", "maintenance", "1", "cfg"]),
    Vote: Example("r1", 30_000, "majority", {"a": (True, "boom"), "b": (False, "")},
                  script="VOTE",
                  argv=[CHANNEL, "r1", 30_000, "majority", "a", 1, "boom", "b", 0, ""]),
    Sweep: Example(30_000, "2", "r1", script="SWEEP", argv=[CHANNEL, 30_000, "2", "r1"]),
    History: Example(script="HISTORY", argv=[]),
}


def test_the_store_has_a_script_for_every_operation_of_the_contract() -> None:
    assert set(Operation.__subclasses__()) == set(EXAMPLES)
    # ReadConfig is SNAPSHOT read for the settings alone.
    assert sorted({example.script for example in EXAMPLES.values()}) == sorted(SCRIPTS)
    assert ring_keys(SETTINGS) == [f"chash:{{known}}:{part}" for part in KEY_PARTS]
    assert ring_channel(SETTINGS) == CHANNEL


@pytest.mark.parametrize("operation", sorted(EXAMPLES, key=lambda op: op.__name__),
                         ids=lambda op: op.__name__)
def test_each_operation_sends_the_argv_its_script_takes(operation: type[Any]) -> None:
    example = EXAMPLES[operation]
    script, argv = script_call(operation(*example.args), CHANNEL)
    assert (script, argv) == (example.script, example.argv)
    assert [type(item) for item in argv] == [type(item) for item in example.argv]


def test_the_defaults_send_what_they_always_did() -> None:
    assert script_call(Sweep(1000, "any"), CHANNEL) == ("SWEEP", [CHANNEL, 1000, "any", ""])
    assert script_call(Write("enable", "a", "cfg"), CHANNEL) \
        == ("WRITE", [CHANNEL, "enable", "a", "", "0", "cfg"])
    # A zone is sent only when given: a write without one sends what it did.
    assert script_call(Write("add", "a", "cfg", "1.0", zone="east"), CHANNEL) \
        == ("WRITE", [CHANNEL, "add", "a", "1.0", "0", "cfg", "1", "east"])
    # A stamp takes the three places after the zone's, with or without one.
    assert script_call(Write("remove", "a", "cfg", stamp=WriteStamp("e1", 4, "d")), CHANNEL) \
        == ("WRITE", [CHANNEL, "remove", "a", "", "0", "cfg", "0", "", "e1", 4, "d"])
    assert script_call(Write("add", "a", "cfg", "1.0", zone="east",
                             stamp=WriteStamp("e1", 4, "d")), CHANNEL) \
        == ("WRITE", [CHANNEL, "add", "a", "1.0", "0", "cfg", "1", "east", "e1", 4, "d"])
    # The seed's ARGV has a count of zoned nodes since zones are stored.
    assert script_call(Seed("e", 1, "cfg", False), CHANNEL) \
        == ("SEED", [CHANNEL, "e", 1, "cfg", 0, 0, 0, 0])


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_script_loads(name: str, text_client: Any, server: RedisServer) -> None:
    source = SCRIPTS[name]
    sha = text_client.script_load(source)
    assert sha == hashlib.sha1(source.encode()).hexdigest()
    assert text_client.script_exists(sha) == [True]


def test_reads_of_a_ring_that_does_not_exist(store: RedisStore) -> None:
    assert store.run(ReadRing()) == NoRing()
    assert store.run(ReadHead()) == NoRing()
    assert store.run(write("add", "a", "1.0")) == NoRing()
    assert store.run(Stamp("e1", 1, "digest")) is False


def test_seed_then_read(store: RedisStore, text_client: Any) -> None:
    assert seed(store, ("a", 1.0), ("b", 2.0)) == Outcome(True, position(1))
    assert seed(store, ("z", 1.0)) == Outcome(False, position(1))  # a sound ring exists: kept
    # Sharded announcements on Redis 7 and newer (the suite needs 7).
    assert store.run(ReadRing()) == StoredRing("e1", 1, "cfg", nodes={"a": "1.0", "b": "2.0"},
                                               order={"a": "1", "b": "2"}, sharded=True)
    assert text_client.hgetall(META) == {"epoch": "e1", "version": "1", "config": "cfg",
                                         "count": "2", "ndisabled": "0", "norder": "2",
                                         "seq": "2"}


def test_replies_as_bytes_read_as_str(store: RedisStore, client: Any) -> None:
    seed(store, ("é", 1.0))
    store.run(vote("r1", **{"é": (True, "boom")}))
    raw = RedisStore(client, SETTINGS)  # a client that does not decode responses
    stored = raw.run(ReadRing())
    assert stored == store.run(ReadRing())
    assert isinstance(stored, StoredRing) and list(stored.down) == ["é"]
    assert raw.run(ReadHead()) == RingHead("e1", 2)


def test_writes_and_their_refusals(store: RedisStore) -> None:
    seed(store, ("a", 1.0))
    assert store.run(write("add", "b", "2.0")) == Outcome(True, position(2))
    assert store.run(write("add", "b", "2.0")) == Outcome(False, position(2))
    assert store.run(write("add", "b", "2.0", config="other")) == OtherConfig("cfg")
    assert store.run(write("remove", "zz")) == NoSuchNode()
    assert store.run(write("disable", "a", "maintenance")) \
        == Outcome(True, position(3), in_service=2, removed=1)
    # b is the last node in service: taking it out is refused unless forced.
    assert store.run(write("remove", "b")) == Refused(1, 1)
    assert store.run(write("remove", "b", force=True)) \
        == Outcome(True, position(4), in_service=1, removed=1)
    assert store.run(write("enable", "a")) == Outcome(True, position(5))
    stored = store.run(ReadRing())
    assert isinstance(stored, StoredRing)
    assert (stored.nodes, stored.disabled, stored.order) == ({"a": "1.0"}, {}, {"a": "1"})


def test_head_and_stamp(store: RedisStore) -> None:
    seed(store, ("a", 1.0))
    assert store.run(ReadHead()) == RingHead("e1", 1, None)
    assert store.run(Stamp("e1", 1, "d1")) is True
    assert store.run(Stamp("e1", 1, "d2")) is False  # stamped already
    assert store.run(Stamp("e1", 9, "d3")) is False  # another version
    assert store.run(ReadHead()) == RingHead("e1", 1, "d1")
    store.run(write("add", "b", "1.0"))
    assert store.run(ReadHead()) == RingHead("e1", 2, None)  # a change clears the digest


def test_a_write_stamps_the_new_version_only_from_the_position_it_was_computed_at(
        store: RedisStore) -> None:
    seed(store, ("a", 1.0), ("b", 1.0))

    def stamped(at: int, digest: str) -> Write:
        return Write("add", "c", "cfg", "1.0", stamp=WriteStamp("e1", at, digest))

    # computed at version 1, the ring at 1: the new version carries it
    assert store.run(stamped(1, "d2")) == Outcome(True, position(2))
    assert store.run(ReadHead()) == RingHead("e1", 2, "d2")
    # a change that changes nothing stamps nothing (the digest stays)
    assert store.run(stamped(2, "other")) == Outcome(False, position(2))
    assert store.run(ReadHead()) == RingHead("e1", 2, "d2")
    # computed at an older version, or in another epoch: written without it
    remove = Write("remove", "c", "cfg", stamp=WriteStamp("e1", 1, "late"))
    assert store.run(remove) == Outcome(True, position(3), in_service=3, removed=1)
    assert store.run(ReadHead()) == RingHead("e1", 3, None)
    disable = Write("disable", "b", "cfg", "m", stamp=WriteStamp("e0", 3, "elsewhere"))
    assert store.run(disable) == Outcome(True, position(4), in_service=2, removed=1)
    assert store.run(ReadHead()) == RingHead("e1", 4, None)
    # with a zone too; a refused change stamps nothing
    zoned = Write("add", "z", "cfg", "1.0", zone="east", stamp=WriteStamp("e1", 4, "d5"))
    assert store.run(zoned) == Outcome(True, position(5))
    assert store.run(ReadHead()) == RingHead("e1", 5, "d5")
    assert store.run(Write("remove", "zz", "cfg", stamp=WriteStamp("e1", 5, "x"))) \
        == NoSuchNode()
    assert store.run(ReadHead()) == RingHead("e1", 5, "d5")
    stored = store.run(ReadRing())
    assert isinstance(stored, StoredRing) and stored.zones == {"z": "east"}


def test_votes_take_a_node_out_and_a_withdrawal_brings_it_back(store: RedisStore) -> None:
    seed(store, ("a", 1.0), ("b", 1.0))
    # One live reporter of one votes a down: a majority.  Votes on a node
    # the ring does not hold are ignored.
    assert store.run(vote("r1", a=(True, "boom"), ghost=(True, "boom"))) \
        == Outcome(True, position(2))
    stored = store.run(ReadRing())
    assert isinstance(stored, StoredRing)
    verdict = json.loads(stored.down["a"])
    assert (verdict["r"], verdict["n"], verdict["l"]) == ("boom", 1, 1)
    # A second reporter voting it up leaves one down vote of two: no majority.
    assert store.run(vote("r2", a=(False, ""))) == Outcome(True, position(3))
    assert store.run(vote("r2", a=(True, "boom too"))) == Outcome(True, position(4))
    assert store.run(Sweep(30_000, "majority")) == Outcome(False, position(4))
    assert store.run(Sweep(30_000, "majority", "r1")) == Outcome(False, position(4))
    assert store.run(Sweep(30_000, "majority", "r2")) == Outcome(True, position(5))
    stored = store.run(ReadRing())
    assert isinstance(stored, StoredRing) and stored.down == {}


def test_unreadable_votes_are_named_in_the_reply(store: RedisStore, text_client: Any) -> None:
    seed(store, ("a", 1.0), ("b", 1.0))
    text_client.hset("chash:{known}:votes", "b", "[[[")
    assert store.run(vote("r1", b=(True, "boom"))) \
        == Outcome(True, position(2), skipped=(("votes", "b", "[[["),))


def test_reepoch_only_where_the_ring_was_seen(store: RedisStore) -> None:
    seed(store, ("a", 1.0))
    assert store.run(Reepoch("e1", 7, "e2", 8)) == Outcome(False, position(1))
    assert store.run(Reepoch("e1", 1, "e2", 8)) == Outcome(True, position(8, "e2"))
    assert store.run(ReadHead()) == RingHead("e2", 8, None)


def test_a_damaged_store_is_reported_before_any_write(store: RedisStore,
                                                      text_client: Any) -> None:
    seed(store, ("a", 1.0), ("b", 1.0))
    text_client.hset(META, "version", "x")
    damaged = NoRing("meta.version is not a count: x")
    assert store.run(ReadRing()) == damaged
    assert store.run(write("add", "c", "1.0")) == damaged
    assert store.run(vote("r1", a=(True, "boom"))) == damaged
    assert text_client.hlen("chash:{known}:nodes") == 2
    text_client.hset(META, "version", 1)
    text_client.delete("chash:{known}:nodes")
    assert store.run(ReadHead()) == NoRing("meta.count is 2 but 0 entries are stored")
    # Seed replaces a damaged ring only when told to restore it.
    assert seed(store, ("z", 1.0)) == NoRing("meta.count is 2 but 0 entries are stored")
    restore = Seed("e9", 2, "cfg", True, nodes={"z": "1.0"},
                   down={"z": HealthVerdict("refused", 1, 1, 0.0)})
    assert store.run(restore) == Outcome(True, position(2, "e9"))
    stored = store.run(ReadRing())
    assert isinstance(stored, StoredRing)
    carried = json.loads(stored.down["z"])
    assert (carried["r"], carried["n"], carried["l"], carried["s"]) == ("refused", 1, 1, 1)


def test_changes_are_announced(store: RedisStore, text_client: Any) -> None:
    seed(store, ("a", 1.0))
    pubsub = text_client.pubsub()
    try:
        pubsub.ssubscribe(CHANNEL)
        assert pubsub.get_sharded_message(timeout=2.0)["type"] == "ssubscribe"
        store.run(write("add", "b", "1.0"))
        message = pubsub.get_sharded_message(timeout=2.0)
        assert (message["type"], message["data"]) == ("smessage", "e1:2")
        store.run(write("add", "b", "1.0"))  # no change: silent
        assert pubsub.get_sharded_message(timeout=0.3) is None
    finally:
        pubsub.close()


def _changes(store: RedisStore) -> list[tuple[str, int, str, str, str]]:
    reply = store.run(History())
    assert isinstance(reply, tuple)
    return [(c.epoch, c.version, c.action, c.node, c.value) for c in reply]


def test_the_history_keeps_every_change_with_its_version(store: RedisStore) -> None:
    assert store.run(History()) == NoRing()
    seed(store, ("a", 1.0), ("b", 1.0), ("c", 1.0))
    assert store.run(write("add", "d", "2.0")) == Outcome(True, position(2))
    store.run(write("add", "d", "2.0"))  # changes nothing: no entry
    store.run(write("disable", "a", "maintenance"))
    store.run(write("enable", "a"))
    store.run(write("remove", "d"))
    store.run(vote("r1", b=(True, "boom")))
    store.run(Sweep(30_000, "majority", "r1"))
    store.run(Reepoch("e1", 7, "e2", 9))
    assert _changes(store) == [
        ("e1", 1, "seed", "", "3"), ("e1", 2, "add", "d", "2.0"),
        ("e1", 3, "disable", "a", "maintenance"), ("e1", 4, "enable", "a", ""),
        ("e1", 5, "remove", "d", ""), ("e1", 6, "down", "b", "boom"), ("e1", 7, "up", "b", ""),
        ("e2", 9, "reepoch", "", "")]
    changes = store.run(History())
    assert isinstance(changes, tuple) and all(isinstance(c, Change) and c.at > 1e9 for c in changes)


def test_the_history_keeps_the_last_changes_only(store: RedisStore, text_client: Any) -> None:
    seed(store, ("a", 1.0))
    for weight in range(2, HISTORY_LENGTH + 12):
        store.run(write("add", "a", repr(float(weight))))
    changes = _changes(store)
    assert len(changes) == HISTORY_LENGTH == text_client.llen("chash:{known}:history")
    # the seed at version 1, then versions 2 to 111: the last hundred kept
    assert changes[-1][1] == HISTORY_LENGTH + 11 and changes[0][1] == 12
    assert [c[1] for c in changes] == sorted(c[1] for c in changes)


def test_a_writer_without_history_shares_the_ring(store: RedisStore, text_client: Any) -> None:
    """An instance of a version that passed six keys still changes the
    ring; its change is missing from the history, which the versions show,
    and an unreadable entry is skipped."""
    seed(store, ("a", 1.0))
    _, argv = script_call(write("add", "b", "1.0"), CHANNEL)
    text_client.eval(SCRIPTS["WRITE"], 6, *ring_keys(SETTINGS)[:6], *argv)
    text_client.lpush("chash:{known}:history", "not json")
    store.run(write("add", "c", "1.0"))
    assert _changes(store) == [("e1", 1, "seed", "", "1"), ("e1", 3, "add", "c", "1.0")]
    ring = store.run(ReadRing())
    assert isinstance(ring, StoredRing) and set(ring.nodes) == {"a", "b", "c"}


ZONES = "chash:{known}:zones"


def _zones(store: RedisStore) -> dict[str, str]:
    stored = store.run(ReadRing())
    assert isinstance(stored, StoredRing)
    return dict(stored.zones)


def test_zones_are_written_with_the_add_and_kept_by_a_reweigh(store: RedisStore,
                                                               text_client: Any) -> None:
    seed(store, ("a", 1.0))
    assert store.run(ReadConfig()) == "cfg"
    assert store.run(Write("add", "b", "cfg", "2.0", zone="east")) == Outcome(True, position(2))
    assert text_client.hgetall(ZONES) == {"b": "east"}
    # the same weight and zone: nothing to change; a reweigh keeps the zone
    assert store.run(Write("add", "b", "cfg", "2.0", zone="east")) == Outcome(False, position(2))
    assert store.run(write("add", "b", "3.0")) == Outcome(True, position(3))
    assert _zones(store) == {"b": "east"}
    # a zone alone is a change, with its own history entry
    assert store.run(Write("add", "a", "cfg", "1.0", zone="west")) == Outcome(True, position(4))
    assert store.run(Write("add", "b", "cfg", "3.0", zone="")) == Outcome(True, position(5))
    assert _zones(store) == {"a": "west"}
    assert _changes(store)[1:] == [
        ("e1", 2, "add", "b", "2.0"), ("e1", 2, "zone", "b", "east"),
        ("e1", 3, "add", "b", "3.0"), ("e1", 4, "zone", "a", "west"), ("e1", 5, "zone", "b", "")]
    # a removal takes the zone with it; a re-seed restores the zones given
    store.run(write("remove", "a", force=True))
    assert _zones(store) == {}
    text_client.delete(META)
    assert store.run(Seed("e2", 9, "cfg", True, nodes={"b": "3.0", "c": "1.0"},
                          zones={"c": "north"})) == Outcome(True, ("e2", 9))
    assert _zones(store) == {"c": "north"}


def test_a_ring_stored_without_zones_reads_as_before(store: RedisStore,
                                                      text_client: Any) -> None:
    """A ring written by a version that kept no zones (seven keys): the
    known answer is the record it always read as, with no zone; a zone a
    removal of that version left behind is replaced by the next add."""
    text_client.hset(META, mapping={"epoch": "e1", "version": "1", "config": "cfg",
                                    "count": "2", "ndisabled": "0", "norder": "2", "seq": "2"})
    text_client.hset("chash:{known}:nodes", mapping={"a": "1.0", "b": "2.0"})
    text_client.hset("chash:{known}:order", mapping={"a": "1", "b": "2"})
    assert store.run(ReadRing()) == StoredRing("e1", 1, "cfg", nodes={"a": "1.0", "b": "2.0"},
                                               order={"a": "1", "b": "2"}, sharded=True)
    assert store.run(ReadConfig()) == "cfg"
    assert text_client.exists(ZONES) == 0
    store.run(Write("add", "b", "cfg", "2.0", zone="east"))
    # a removal by that version (seven keys: no zones) leaves the zone
    # behind, which the next add of the node replaces
    _, argv = script_call(write("remove", "b", force=True), CHANNEL)
    text_client.eval(SCRIPTS["WRITE"], 7, *ring_keys(SETTINGS)[:7], *argv)
    assert text_client.hgetall(ZONES) == {"b": "east"}
    assert store.run(write("add", "b", "2.0")) == Outcome(True, position(4))
    assert _zones(store) == {}
    assert _changes(store)[-1] == ("e1", 4, "add", "b", "2.0")
