"""Gateways and their shared ring across real network splits.

Each scenario builds its own network of namespaces (tests/_support/netns.py):
three etcd members, three gateway processes routing without pause, and an
operator's host running ``chash ring``; it partitions and heals links,
makes changes meanwhile, and ends with the promises of docs/reliability.md
checked by the history checker (tests/_support/partitions.py): no
committed change lost, no ring ever empty, one ring after heal; and, where
the scenario is about them, a stale gateway saying so and a minority etcd
member refusing writes with a message naming the cause.
"""
from __future__ import annotations

import time

import pytest

from _support.membership_worker import VOTE_TTL
from _support.netns import Network
from _support.partitions import EtcdSetup as Setup
from _support.partitions import start_backend
from _support.waiting import wait_until

pytest.importorskip("httpx", reason="httpx not installed: pip install 'chash-router[etcd]'")

def test_a_gateway_isolated_longer_than_every_ttl_then_healed(network: Network) -> None:
    setup = Setup(network)
    for node in ("a:1", "b:1", "c:1"):
        assert setup.change("add", node).committed
    setup.agree("the three gateways hold a, b, c")
    g3 = setup.gateways["g3"]
    before = g3.status()
    network.isolate(setup.hosts["g3"])
    cut_at = time.monotonic()
    wait_until(lambda: not g3.status()["connected"], "g3 notices it is cut off", timeout=20)
    # Changes on the connected side while g3 is away, for longer than the
    # vote TTL, etcd's lease and the outage watchdog.
    for argv in (("add", "d:1"), ("weight", "a:1", "2"), ("remove", "b:1")):
        attempt = setup.change(*argv)
        assert attempt.committed, attempt
    wait_until(lambda: time.monotonic() - cut_at > VOTE_TTL + 2, "every TTL passed",
               timeout=VOTE_TTL + 10, interval=0.2)
    away = setup.history.sample({"g3": g3})["g3"]
    assert away["weights"] == before["weights"]  # routing on its last ring, not empty
    assert away["stale_seconds"] > VOTE_TTL and away["stale_since"] is not None
    assert away["stale_since"] <= time.time() - VOTE_TTL
    network.rejoin(setup.hosts["g3"])
    took = setup.agree("g3 holds the ring again after heal")
    print(f"g3 in step {took:.1f}s after heal")
    setup.finish()


def test_an_etcd_member_on_the_minority_side(network: Network) -> None:
    # g3 knows only e3; e3 is cut off from the other two members.
    setup = Setup(network, {"g3": "http://10.213.0.3:2379"})
    e1, e2, e3 = setup.members
    assert setup.change("add", "a:1").committed and setup.change("add", "b:1").committed
    setup.agree("the three gateways hold a, b")
    g3 = setup.gateways["g3"]
    before = g3.status()
    network.cut(e3, e1)
    network.cut(e3, e2)
    # Its gateway keeps routing on the last ring.
    wait_until(lambda: not g3.status()["connected"], "g3 finds its member without quorum",
               timeout=30)
    assert g3.status()["weights"] == before["weights"]
    # The minority member refuses writes: with a timeout until it knows it
    # has no leader (an election timeout after the cut), then naming the
    # cause.  Never is one reported committed.
    refusals = []

    def names_the_cause() -> bool:
        refused = setup.change("add", "x:1", endpoints=setup.etcd.endpoints(e3))
        refusals.append(refused)
        return "etcdserver: no leader" in refused.err
    wait_until(names_the_cause, "e3 says it has no leader", timeout=30, interval=0.5)
    for refused in refusals:
        assert refused.code == 1 and refused.version is None, refused
        assert len(refused.err.strip().splitlines()) == 1, refused.err
    # The majority goes on.
    majority = setup.etcd.endpoints(e1, e2)
    for argv in (("add", "c:1"), ("weight", "b:1", "3")):
        attempt = setup.change(*argv, endpoints=majority)
        assert attempt.committed, attempt
    network.heal()
    took = setup.agree("g3 follows the ring again once e3 rejoined")
    print(f"g3 in step {took:.1f}s after heal")
    setup.finish()


def test_a_two_one_split_of_gateways_and_members(network: Network) -> None:
    """e3 and g3 on one side, e1, e2, g1, g2 and the operator on the other:
    the majority side commits, g3 (given every member, reaching only e3)
    routes on its last ring and says so, one ring after heal."""
    setup = Setup(network)
    e1, e2, e3 = setup.members
    assert setup.change("add", "a:1").committed and setup.change("add", "b:1").committed
    setup.agree("the three gateways hold a, b")
    g3 = setup.gateways["g3"]
    before = g3.status()
    network.split([e3, setup.hosts["g3"]])
    wait_until(lambda: not g3.status()["connected"], "g3 finds no quorum on its side",
               timeout=30)
    for argv in (("add", "c:1"), ("remove", "a:1")):
        attempt = setup.change(*argv)
        assert attempt.committed, attempt
    away = setup.history.sample({"g3": g3})["g3"]
    assert away["weights"] == before["weights"] and away["stale_seconds"] > 0
    network.heal()
    took = setup.agree("one ring after the split heals")
    print(f"one ring {took:.1f}s after heal")
    setup.finish()


def test_the_etcd_leader_isolated(network: Network) -> None:
    """The leader cut off from everyone: the other two elect another and
    commit; the gateways (each given every member) move to them; the
    healed old leader follows."""
    setup = Setup(network)
    assert setup.change("add", "a:1").committed and setup.change("add", "b:1").committed
    setup.agree("the three gateways hold a, b")
    leader = setup.etcd.leader(setup.op)
    network.isolate(leader)
    others = [member for member in setup.members if member is not leader]
    assert setup.etcd.leader(setup.op) in others  # a new one, on the majority side
    for argv in (("add", "c:1"), ("weight", "a:1", "2")):
        attempt = setup.change(*argv, endpoints=setup.etcd.endpoints(*others))
        assert attempt.committed, attempt
    setup.agree("the gateways follow the new leader")
    network.rejoin(leader)
    took = setup.agree("one ring once the old leader is back")
    print(f"one ring {took:.1f}s after heal")
    setup.finish()


def test_one_gateway_cut_off_from_one_backend_only(network: Network) -> None:
    """Promise 4: a partial view is not a verdict.  Each gateway checks every
    backend over the real network and votes; one gateway that cannot reach
    a backend does not take it out of the shared ring, a majority does."""
    setup = Setup(network)
    backends = {name: network.host(name) for name in ("b1", "b2", "b3")}
    nodes = {name: start_backend(host) for name, host in backends.items()}
    for node in nodes.values():
        assert setup.change("add", node).committed

    def round_() -> dict[str, dict[str, bool]]:
        """Every gateway checks every backend once; who reached what."""
        return {gw: {name: setup.gateways[gw].call("probe", node=node, address=host.address,
                                                    port=7000)["reachable"]
                     for name, host in backends.items() for node in [nodes[name]]}
                for gw in setup.gateways}

    wait_until(lambda: all(all(seen.values()) for seen in round_().values()),
               "every gateway reaches every backend", timeout=30)
    setup.agree("the gateways hold the three backends")
    b1 = nodes["b1"]
    network.cut(setup.hosts["g3"], backends["b1"])
    # Every gateway keeps checking, as its health checker would, for longer
    # than a vote lives: the quorum counts live reporters, so votes must be
    # renewed for the other two to keep counting.
    until = time.monotonic() + VOTE_TTL + 2
    while time.monotonic() < until:
        seen = round_()
        assert not seen["g3"]["b1"] and seen["g1"]["b1"] and seen["g2"]["b1"], seen
        for name, status in setup.history.sample(setup.gateways).items():
            assert b1 in status["weights"], (name, status)
    round_()
    shown = setup.operator.read("show")
    state = {entry["node"]: entry["state"] for entry in shown["nodes"]}
    assert state[b1] == "in service", shown  # one vote of three: no verdict
    round_()
    assert not [c for c in setup.operator.read("history") if c["action"] == "down"]
    # A second gateway loses it too: now a majority of the live reporters.
    network.cut(setup.hosts["g2"], backends["b1"])
    round_()
    wait_until(lambda: all(b1 not in status["weights"] for status in
                           setup.history.sample(setup.gateways).values()),
               "b1 leaves every gateway's ring", timeout=30)
    downs = [c for c in setup.operator.read("history") if c["action"] == "down"]
    assert [c["node"] for c in downs] == [b1]
    network.heal()
    wait_until(lambda: all(all(seen.values()) for seen in round_().values()),
               "every gateway reaches every backend again", timeout=30)
    setup.agree("b1 is back everywhere")
    assert b1 in setup.gateways["g1"].status()["weights"]
    setup.finish()


def test_changes_over_slow_and_lossy_links(network: Network) -> None:
    """200 ms each way and 5 % of chunks late by a retransmission timeout on
    every link between the gateways (and the operator) and the members:
    every change reported committed is kept, one ring at the end."""
    setup = Setup(network, slow=(0.2, 0.05))
    for argv in (("add", "a:1"), ("add", "b:1"), ("weight", "a:1", "3"), ("remove", "b:1")):
        setup.change(*argv)
    committed = setup.history.committed()
    assert len(committed) >= 3, setup.history.attempts  # slow, not stopped
    assert [a.version for a in committed] == sorted(a.version for a in committed)
    took = setup.agree("the gateways agree over the slow links")
    print(f"agreed {took:.1f}s after the last change")
    setup.finish()
