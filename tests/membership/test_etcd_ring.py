"""The etcd store's operations as etcd requests, without etcd.

``chash.membership.etcd.ring`` is driven with etcd's replies by hand, as
the store drives it: what each operation writes is pinned to the bytes
earlier versions wrote (the ring document, the vote keys and values), so
that gateways of either version can share a ring, and each reply is the
record of the store contract (``chash.membership.state``).
"""

from __future__ import annotations

import json
from typing import Any

from chash.membership.etcd.ring import RingKeys, perform
from chash.membership.etcd.wire import Request, b64, unb64
from chash.membership.state import (
    Change,
    HealthVerdict,
    NoRing,
    OtherConfig,
    Outcome,
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
    Seed,
    Vote,
    Write,
    WriteStamp,
)

KEYS = RingKeys("chash", "t")
NOW = 1_000


def read(doc: dict[str, Any] | str | None, votes: dict[str, str] | None = None,
         revision: int = 9, mod: int = 4, history: str | None = None) -> dict[str, Any]:
    """etcd's reply to the read transaction: the ring key (absent if None),
    the vote keys if ``votes`` is given, and the history key if
    ``history`` is."""
    ring = [] if doc is None else [{
        "key": b64(KEYS.ring), "mod_revision": str(mod),
        "value": b64(doc if isinstance(doc, str) else json.dumps(doc))}]
    responses = [{"response_range": {"kvs": ring}}]
    if votes is not None:
        responses.append({"response_range": {"kvs": [
            {"key": b64(key), "value": b64(value), "mod_revision": "3"}
            for key, value in votes.items()]}})
    if history is not None:
        responses.append({"response_range": {"kvs": [
            {"key": b64(KEYS.history), "value": b64(history), "mod_revision": "5"}]}})
    return {"header": {"revision": str(revision)}, "responses": responses}


def drive(operation: Operation[Any], *replies: dict[str, Any]) -> tuple[list[Request], Any]:
    """The requests ``operation`` made, answered by ``replies``, and its record."""
    ops = perform(KEYS, operation, NOW)
    answers = list(replies)
    requests: list[Request] = []
    try:
        request = next(ops)
        while True:
            requests.append(request)
            request = ops.send(answers.pop(0))
    except StopIteration as stop:
        return requests, stop.value


def puts(request: Request) -> list[tuple[str, str, str | None]]:
    """The (key, value, lease) of every put in a transaction."""
    return [(unb64(op["request_put"]["key"]), unb64(op["request_put"]["value"]),
             op["request_put"].get("lease"))
            for op in request.body["success"] if "request_put" in op]


RING = {"epoch": "e1", "version": 3, "config": "cfg", "seq": 2,
        "nodes": {"a": "1.0", "b": "2.0"}, "order": {"a": 1, "b": 2}, "disabled": {},
        "down": {}, "digest": "d1"}
COMMITTED = {"succeeded": True}


def test_seed_writes_the_ring_document_earlier_versions_wrote() -> None:
    seed = Seed("e2", 5, "cfg", False, nodes={"b": "2.0", "a": "1.0"},
                disabled={"b": "maintenance"}, down={"a": HealthVerdict("refused", 2, 3, 1.5)})
    requests, outcome = drive(seed, read(None), COMMITTED)
    assert outcome == Outcome(True, ("e2", 5))
    assert requests[1].body["compare"][0]["target"] == "VERSION"  # only if still absent
    assert puts(requests[1]) == [(KEYS.ring, (
        '{"epoch":"e2","version":5,"config":"cfg","seq":2,"nodes":{"b":"2.0","a":"1.0"},'
        '"order":{"b":1,"a":2},"disabled":{"b":"maintenance"},'
        '"down":{"a":{"r":"refused","n":2,"l":3,"t":1000,"s":1}}}'), None),
        (KEYS.history, '[{"e":"e2","v":5,"a":"seed","n":"","w":"2","t":1000}]', None)]
    # A sound ring is left alone; a damaged one replaced only to restore it.
    assert drive(seed, read(RING))[1] == Outcome(False, ("e1", 3))
    assert drive(seed, read("{broken"))[1] == NoRing("the ring key is not JSON")


def test_a_write_bumps_the_version_and_forgets_the_digest() -> None:
    requests, outcome = drive(Write("add", "c", "cfg", "3.0"), read(RING), COMMITTED)
    assert outcome == Outcome(True, ("e1", 4))
    assert puts(requests[1]) == [(KEYS.ring, (
        '{"epoch":"e1","version":4,"config":"cfg","seq":3,"nodes":{"a":"1.0","b":"2.0",'
        '"c":"3.0"},"order":{"a":1,"b":2,"c":3},"disabled":{},"down":{}}'), None),
        (KEYS.history, '[{"e":"e1","v":4,"a":"add","n":"c","w":"3.0","t":1000}]', None)]
    assert drive(Write("add", "c", "other", "3.0"), read(RING))[1] == OtherConfig("cfg")
    assert drive(Write("add", "a", "cfg", "1.0"), read(RING))[1] == Outcome(False, ("e1", 3))


def test_a_write_stamps_the_new_version_in_its_transaction_from_the_position_read() -> None:
    stamped = Write("remove", "b", "cfg", force=True, stamp=WriteStamp("e1", 3, "d4"))
    requests, outcome = drive(stamped, read(RING), COMMITTED)
    assert outcome == Outcome(True, ("e1", 4), in_service=2, removed=1)
    assert requests[1].body["compare"][0]["target"] == "MOD"  # only over the ring read
    assert puts(requests[1])[0] == (KEYS.ring, (
        '{"epoch":"e1","version":4,"config":"cfg","seq":2,"nodes":{"a":"1.0"},'
        '"order":{"a":1},"disabled":{},"down":{},"digest":"d4"}'), None)
    # computed at another position: written as without it
    for at in (WriteStamp("e1", 2, "late"), WriteStamp("e0", 3, "elsewhere")):
        requests, _ = drive(Write("remove", "b", "cfg", force=True, stamp=at), read(RING),
                            COMMITTED)
        assert "digest" not in json.loads(puts(requests[1])[0][1])
    # a write that lost the race reads again and stamps only if still there
    moved = {**RING, "version": 4, "digest": "theirs"}
    requests, outcome = drive(stamped, read(RING), {"succeeded": False}, read(moved, mod=6),
                              COMMITTED)
    assert outcome == Outcome(True, ("e1", 5), in_service=2, removed=1)
    assert "digest" not in json.loads(puts(requests[3])[0][1])
    # nothing changed: nothing written, nothing stamped
    unchanged = Write("add", "a", "cfg", "1.0", stamp=WriteStamp("e1", 3, "x"))
    requests, outcome = drive(unchanged, read(RING))
    assert outcome == Outcome(False, ("e1", 3)) and len(requests) == 1  # the read alone


def test_a_vote_is_a_leased_key_and_a_verdict_in_the_ring() -> None:
    me = b"r1".hex()
    votes = {f"{KEYS.votes}{b'r2'.hex()}/b": "[[["}
    requests, outcome = drive(Vote("r1", 30_000, "majority", {"a": (True, "boom"),
                                                              "b": (False, "")}),
                              read(RING, votes), {"ID": "77"}, COMMITTED)
    assert outcome == Outcome(True, ("e1", 4), skipped=(("votes", "b", "[[["),))
    assert requests[1] == Request("/v3/lease/grant", {"TTL": "30"})
    assert puts(requests[2]) == [
        (f"{KEYS.votes}{me}/a", '[1, 1000, "boom"]', "77"),
        (f"{KEYS.votes}{me}/b", '[0, 1000, ""]', "77"),
        (KEYS.ring, '{"epoch":"e1","version":4,"config":"cfg","seq":2,'
                    '"nodes":{"a":"1.0","b":"2.0"},"order":{"a":1,"b":2},"disabled":{},'
                    '"down":{"a":{"r":"boom","n":1,"l":1,"t":1000}}}', None),
        (KEYS.history, '[{"e":"e1","v":4,"a":"down","n":"a","w":"boom","t":1000}]', None)]


def test_reads_give_every_entry_as_its_stored_text() -> None:
    doc = {**RING, "nodes": {"a": "1.0", "b": 2.5}, "order": {"a": 1, "b": True},
           "down": {"b": {"r": "x", "n": 1, "l": 1, "t": 5}}}
    assert drive(ReadRing(), read(doc))[1] == StoredRing(
        "e1", 3, "cfg", nodes={"a": "1.0", "b": "2.5"}, disabled={},
        down={"b": '{"r": "x", "n": 1, "l": 1, "t": 5}'}, order={"a": "1", "b": "true"},
        digest="d1", sharded=False)
    assert drive(ReadHead(), read(doc))[1] == RingHead("e1", 3, "d1")
    assert drive(ReadHead(), read({**RING, "digest": 0}))[1] == RingHead("e1", 3, None)
    assert drive(ReadRing(), read(None))[1] == NoRing()
    assert drive(ReadHead(), read({**RING, "version": -1}))[1] \
        == NoRing("ring.version is not a count: -1")


def test_the_history_grows_in_the_transaction_of_the_change_and_is_capped() -> None:
    old = [{"e": "e1", "v": v, "a": "add", "n": "x", "w": "1.0", "t": 5}
           for v in range(1, HISTORY_LENGTH + 1)]
    requests, outcome = drive(Write("remove", "b", "cfg", force=True),
                              read(RING, history=json.dumps(old)), COMMITTED)
    assert outcome == Outcome(True, ("e1", 4), in_service=2, removed=1)
    assert requests[1].body["compare"] == [
        {"key": b64(KEYS.ring), "target": "MOD", "result": "EQUAL", "mod_revision": "4"}]
    kept = json.loads(dict((key, value) for key, value, _ in puts(requests[1]))[KEYS.history])
    assert len(kept) == HISTORY_LENGTH and kept[0]["v"] == 2
    assert kept[-1] == {"e": "e1", "v": 4, "a": "remove", "n": "b", "w": "", "t": NOW}
    # Read back oldest first; an unreadable entry is skipped, an unreadable
    # key holds none.
    text = json.dumps([old[0], "junk", {"e": "e1", "v": True, "a": "add"}, kept[-1]])
    assert drive(History(), read(RING, history=text))[1] == (
        Change("e1", 1, "add", "x", "1.0", 0.005), Change("e1", 4, "remove", "b", "", 1.0))
    assert drive(History(), read(RING, history="{"))[1] == ()
    assert drive(History(), read(RING))[1] == ()
    assert drive(History(), read(None))[1] == NoRing()


def test_a_ring_without_zones_reads_as_it_always_did() -> None:
    """The known answer: the document earlier versions wrote reads with no
    zone, and a write that gives none keeps its bytes (no ``zones`` key)."""
    stored = drive(ReadRing(), read(RING))[1]
    assert stored == StoredRing("e1", 3, "cfg", nodes={"a": "1.0", "b": "2.0"}, disabled={},
                                down={}, order={"a": "1", "b": "2"}, digest="d1")
    assert stored.zones == {}
    assert drive(ReadConfig(), read(RING))[1] == "cfg"
    assert drive(ReadConfig(), read(None))[1] == NoRing()
    assert drive(ReadRing(), read({**RING, "zones": []}))[1] \
        == NoRing("ring.zones is not a JSON object")


def test_a_zone_is_written_with_the_add_and_goes_with_the_node() -> None:
    requests, outcome = drive(Write("add", "c", "cfg", "3.0", zone="east"), read(RING), COMMITTED)
    assert outcome == Outcome(True, ("e1", 4))
    assert puts(requests[1]) == [(KEYS.ring, (
        '{"epoch":"e1","version":4,"config":"cfg","seq":3,"nodes":{"a":"1.0","b":"2.0",'
        '"c":"3.0"},"order":{"a":1,"b":2,"c":3},"disabled":{},"down":{},'
        '"zones":{"c":"east"}}'), None),
        (KEYS.history, '[{"e":"e1","v":4,"a":"add","n":"c","w":"3.0","t":1000},'
                       '{"e":"e1","v":4,"a":"zone","n":"c","w":"east","t":1000}]', None)]
    zoned = {**RING, "zones": {"a": "west"}}
    assert drive(ReadRing(), read(zoned))[1].zones == {"a": "west"}
    # a reweigh keeps the zone; the same zone and weight change nothing
    assert drive(Write("add", "a", "cfg", "1.0", zone="west"), read(zoned))[1] \
        == Outcome(False, ("e1", 3))
    requests, _ = drive(Write("add", "a", "cfg", "5.0"), read(zoned), COMMITTED)
    assert json.loads(puts(requests[1])[0][1])["zones"] == {"a": "west"}
    # clearing the last zone drops the key; a removal takes the node's zone
    for change in (Write("add", "a", "cfg", "1.0", zone=""), Write("remove", "a", "cfg")):
        requests, outcome = drive(change, read(zoned), COMMITTED)
        assert outcome.changed and "zones" not in json.loads(puts(requests[1])[0][1])
    # a zone a removed node left behind (an earlier version's removal) is
    # replaced by its next add, without a history entry of its own
    requests, _ = drive(Write("add", "c", "cfg", "1.0"), read({**RING, "zones": {"c": "old"}}),
                        COMMITTED)
    assert "zones" not in json.loads(puts(requests[1])[0][1])
    assert [e["a"] for e in json.loads(puts(requests[1])[1][1])] == ["add"]


def test_a_seed_keeps_the_zones_given() -> None:
    seed = Seed("e2", 5, "cfg", False, nodes={"a": "1.0"}, zones={"a": "east"})
    requests, _ = drive(seed, read(None), COMMITTED)
    assert json.loads(puts(requests[1])[0][1])["zones"] == {"a": "east"}
