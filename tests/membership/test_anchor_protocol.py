"""The protocol with an AnchorRouter, driven with scripted replies (as
test_membership_protocol.py does for rings): the digest stamped for a
version is the router's record (chash.membership.anchor); an instance
adopts a stamped record, stamps the one change it made from the previous
version's record, does not stamp a version it reached over several
changes until its periodic check finds it still unstamped, and adopts the
winner's record when its stamp lost.  An operator's write from the stamped
record carries the record of the version it makes (``Write.stamp``), for
the store to stamp with the change."""

from __future__ import annotations

from typing import Any

import pytest
from test_membership_protocol import Driver

from chash import AnchorRouter
from chash.membership.anchor import advance, converge, read_record, record
from chash.membership.core import MembershipCore
from chash.membership.protocol import check, pull, write
from chash.membership.settings import MembershipSettings
from chash.membership.state import NoSuchNode, Outcome, RingHead, StoredRing
from chash.membership.store import ReadHead, ReadRing, Stamp, Write, WriteStamp

NODES = [f"n{i}" for i in range(8)]


def core() -> MembershipCore:
    settings = MembershipSettings(name="a", prefix="chash", quorum="majority", vote_ttl=30.0,
                                  resync_interval=1.0, reporter="me")
    return MembershipCore(AnchorRouter(), settings, outage_errors=(ConnectionError,),
                          store_name="Redis")


def stored(c: MembershipCore, version: int, nodes: list[str], digest: str | None = None,
           order: list[str] | None = None) -> StoredRing:
    order = order if order is not None else nodes
    return StoredRing("e1", version, c.config, nodes={n: "1.0" for n in nodes},
                      order={n: str(order.index(n) + 1) for n in nodes}, digest=digest)


def anchor_of(history: list[tuple[str, str]]) -> AnchorRouter:
    r = AnchorRouter()
    for op, node in history:
        (r.add_service_node if op == "add" else r.remove_service_node)(node)
    return r


def test_the_config_names_the_anchor_layout() -> None:
    assert core().config == "layout=anchor hash=xxh64 quorum=majority vote_ttl=30"


def test_a_stamped_record_is_adopted_whatever_the_router_held() -> None:
    c = core()
    shared = anchor_of([("add", n) for n in NODES] + [("remove", "n2"), ("remove", "n5")])
    live = shared.nodes
    d = Driver([stored(c, 7, live, digest=record(shared), order=NODES)])
    d.run(pull(c))
    assert c.router == shared and c.canonical
    assert d.kinds == [ReadRing]  # the stamp held ours: nothing to stamp


def test_one_change_from_the_stamped_record_is_stamped_at_once() -> None:
    c = core()
    shared = anchor_of([("add", n) for n in NODES])
    Driver([stored(c, 3, NODES, digest=record(shared))]).run(pull(c))
    keys = [f"k{i}" for i in range(500)]
    before = c.router.get_target_nodes(keys)
    rest = [n for n in NODES if n != "n3"]
    d = Driver([stored(c, 4, rest, order=NODES), True])
    d.run(pull(c))
    assert d.kinds == [ReadRing, Stamp] and c.stepped
    stamp = d.calls[1]
    assert isinstance(stamp, Stamp) and stamp.digest == record(c.router)
    after = c.router.get_target_nodes(keys)
    assert all(a == b for a, b in zip(before, after, strict=True) if a != "n3")
    assert read_record(stamp.digest, dict.fromkeys(rest, 1.0)) is not None


def test_several_changes_at_once_are_not_stamped_until_the_check() -> None:
    c = core()
    Driver([stored(c, 3, NODES, digest=record(anchor_of([("add", n) for n in NODES])))]).run(
        pull(c))
    rest = [n for n in NODES if n not in ("n1", "n6")]
    d = Driver([stored(c, 5, rest, order=NODES)])
    d.run(pull(c))
    assert d.kinds == [ReadRing] and not c.stepped  # 3 -> 5: nothing stamped
    # still unstamped at the periodic check: stamped then
    d = Driver([RingHead("e1", 5, None), stored(c, 5, rest, order=NODES), True])
    d.run(check(c))
    assert d.kinds == [ReadHead, ReadRing, Stamp]


def test_a_lost_stamp_gives_way_to_the_winners_record() -> None:
    c = core()
    Driver([stored(c, 3, NODES, digest=record(anchor_of([("add", n) for n in NODES])))]).run(
        pull(c))
    rest = [n for n in NODES if n != "n4"]
    # another instance stamped version 4 first with another history's record
    theirs = anchor_of([("add", n) for n in NODES] + [("remove", "n0"), ("remove", "n4"),
                                                      ("add", "n0")])
    assert set(theirs.nodes) == set(rest)
    d = Driver([stored(c, 4, rest, order=NODES), False,
                stored(c, 4, rest, digest=record(theirs), order=NODES)])
    d.run(pull(c))
    assert d.kinds == [ReadRing, Stamp, ReadRing]
    assert c.router == theirs and c.canonical


def test_a_record_of_other_nodes_is_not_adopted() -> None:
    c = core()
    other = anchor_of([("add", n) for n in NODES])
    d = Driver([stored(c, 2, NODES[:5], digest=record(other), order=NODES)])
    d.run(pull(c))
    assert sorted(c.router.nodes) == sorted(NODES[:5]) and not c.canonical


def test_converge_removes_the_highest_ids_first_then_adds_in_order() -> None:
    r = anchor_of([("add", n) for n in NODES])
    added, removed, rejected = converge(r, {"n0": 1.0, "n2": 1.0, "n4": 1.0, "x": 1.0,
                                            "y": 2.0})
    assert removed == ["n7", "n6", "n5", "n3", "n1"] and added == ["x"]
    assert [(n, w) for n, w, _ in rejected] == [("y", 2.0)]
    assert r.bucket_of("x") == 1  # the id removed last comes back first
    # the top ids went first, so they only lowered the count: 5, then 3 removed
    assert r.state() == bytes([5, 0, 0, 0, 3, 0, 0, 0])


def test_records_read_back_and_refuse_damage() -> None:
    r = anchor_of([("add", n) for n in NODES] + [("remove", "n3")])
    wanted = dict.fromkeys(r.nodes, 1.0)
    text = record(r)
    state, nodes = read_record(text, wanted) or (b"", [])
    assert AnchorRouter.from_state(state, nodes) == r
    bad: list[Any] = [None, "", "0123456789abcdef", text.replace("anchor1 ", "anchor2 "),
                      text[:-3], text.rsplit(" ", 1)[0] + " [1,2]", text + "x"]
    for damaged in bad:
        assert read_record(damaged, wanted) is None, damaged
    assert read_record(text, {**wanted, "extra": 1.0}) is None


def in_step(history: list[tuple[str, str]], version: int = 3) -> MembershipCore:
    """A core that applied ``version`` of ring e1 with the record of
    ``history`` stamped (so it holds the stamped record)."""
    c = core()
    shared = anchor_of(history)
    Driver([stored(c, version, shared.nodes, digest=record(shared), order=NODES)]).run(pull(c))
    assert c.canonical
    return c


@pytest.mark.parametrize(("op", "node", "value", "then"), [
    ("remove", "n3", "", [("remove", "n3")]),
    ("disable", "n6", "maintenance", [("remove", "n6")]),
    ("add", "x", "1.0", [("add", "x")]),
], ids=["remove", "disable", "add"])
def test_a_write_carries_the_record_of_the_version_it_makes(
        op: str, node: str, value: str, then: list[tuple[str, str]]) -> None:
    adds = [("add", n) for n in NODES]
    c = in_step(adds)
    keys = [f"k{i}" for i in range(500)]
    before = c.router.get_target_nodes(keys)
    after = anchor_of(adds + then)  # the one change, made from the stamped record
    live = after.nodes
    # the store stamped it with the change: reading it back adopts it, no Stamp
    disabled = {"n6": "maintenance"} if op == "disable" else {}
    back = StoredRing("e1", 4, c.config, nodes={n: "1.0" for n in [*live, *disabled]},
                      order={n: str(i) for i, n in enumerate([*NODES, "x"], 1)},
                      disabled=disabled, digest=record(after))
    d = Driver([Outcome(True, ("e1", 4)), back])
    assert d.run(write(c, op, node, value)) == 4
    assert d.calls[0] == Write(op, node, c.config, value,
                               stamp=WriteStamp("e1", 3, record(after)))
    assert d.kinds == [Write, ReadRing]
    assert c.router == after and c.canonical
    moved = [(b, a) for b, a in zip(before, c.router.get_target_nodes(keys), strict=True)
             if b != a]
    assert moved and all(b == node or a == node for b, a in moved)


def test_the_write_after_a_re_add_gives_back_the_id_removed_last() -> None:
    adds = [("add", n) for n in NODES]
    c = in_step([*adds, ("remove", "n2"), ("remove", "n5")])
    d = Driver([Outcome(True, ("e1", 4)), RuntimeError("read back later")])
    d.run(write(c, "add", "n2", "1.0"))
    call = d.calls[0]
    assert isinstance(call, Write)
    stamp = call.stamp
    expected = anchor_of([*adds, ("remove", "n2"), ("remove", "n5"), ("add", "n2")])
    assert stamp == WriteStamp("e1", 3, record(expected)) and expected.bucket_of("n2") == 5


def test_a_write_carries_no_stamp_unless_the_router_holds_the_stamped_record() -> None:
    c = core()
    Driver([stored(c, 3, NODES, digest=record(anchor_of([("add", n) for n in NODES])))]).run(
        pull(c))
    rest = [n for n in NODES if n not in ("n1", "n6")]
    Driver([stored(c, 5, rest, order=NODES)]).run(pull(c))  # 3 -> 5, nobody stamped 5
    assert not c.canonical
    d = Driver([NoSuchNode()])
    with pytest.raises(KeyError):
        d.run(write(c, "remove", "n3"))
    assert d.calls == [Write("remove", "n3", c.config)]
    # in step, a change the store would refuse carries none either
    c = in_step([("add", n) for n in NODES])
    d = Driver([NoSuchNode()])
    with pytest.raises(KeyError):
        d.run(write(c, "remove", "nowhere"))
    assert d.calls == [Write("remove", "nowhere", c.config)]


def test_a_weight_the_router_refuses_stamps_the_record_unchanged() -> None:
    c = in_step([("add", n) for n in NODES])
    assert isinstance(c.router, AnchorRouter)
    held = record(c.router)
    assert c.stamp_after("add", "heavy", "2.0") == WriteStamp("e1", 3, held)
    assert advance(held, "xxh64", dict.fromkeys(NODES, 1.0), dict.fromkeys(NODES[:7], 1.0)) \
        == record(anchor_of([("add", n) for n in NODES] + [("remove", "n7")]))
    assert advance("0123456789abcdef", "xxh64", {}, {}) is None


def test_the_state_after_a_write_is_the_one_the_stores_make() -> None:
    c = core()
    ring = StoredRing("e1", 3, c.config, nodes={"a": "1.0", "b": "1.0", "c": "1.0"},
                      order={"a": "1", "b": "2", "c": "3"}, disabled={"b": "m"},
                      down={"c": '{"r": "boom", "n": 1, "l": 1, "t": 0}'}, zones={"a": "east"})
    state = c.read_state(ring)
    assert state.ring() == {"a": 1.0}
    enabled = state.after_write("enable", "b")
    assert enabled is not None and enabled.ring() == {"a": 1.0, "b": 1.0}
    removed = state.after_write("remove", "a")
    assert removed is not None and (dict(removed.weights), dict(removed.zones)) == (
        {"b": 1.0, "c": 1.0}, {})
    added = state.after_write("add", "a", "1.0")  # a re-add keeps its place and zone
    assert added is not None and list(added.weights) == ["a", "b", "c"] and added.zones
    readded = state.after_write("add", "z", "1.0")
    assert readded is not None and list(readded.ring()) == ["a", "z"]  # c stays down
    assert (readded.epoch, readded.version) == ("e1", 3)
    for refused in [("move", "a", ""), ("remove", "zz", ""), ("add", "z", "-1.0"),
                    ("add", "z", "nan"), ("add", "z", "heavy")]:
        assert state.after_write(*refused) is None, refused
