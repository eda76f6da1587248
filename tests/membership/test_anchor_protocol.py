"""The protocol with an AnchorRouter, driven with scripted replies (as
test_membership_protocol.py does for rings): the digest stamped for a
version is the router's record (chash.membership.anchor); an instance
adopts a stamped record, stamps the one change it made from the previous
version's record, does not stamp a version it reached over several
changes until its periodic check finds it still unstamped, and adopts the
winner's record when its stamp lost."""

from __future__ import annotations

from typing import Any

from test_membership_protocol import Driver

from chash import AnchorRouter
from chash.membership.anchor import converge, read_record, record
from chash.membership.core import MembershipCore
from chash.membership.protocol import check, pull
from chash.membership.settings import MembershipSettings
from chash.membership.state import RingHead, StoredRing
from chash.membership.store import ReadHead, ReadRing, Stamp

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
