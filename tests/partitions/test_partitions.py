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

import json
import time
from typing import Any

import pytest

from _support.membership_worker import VOTE_TTL
from _support.netns import Network
from _support.partitions import EtcdMembers, History, Operator, RealGateway, start_http_backend
from _support.partitions import EtcdSetup as Setup
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
    # The majority goes on, once it has elected a leader of its own (e3
    # may have led: the election after the cut takes its time on a loaded
    # machine, and until then both answer "no leader").
    wait_until(lambda: setup.etcd.leader(setup.op) in (e1, e2), "e1 or e2 leads",
               timeout=30, interval=0.2)
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
    assert setup.etcd.leader(setup.op) in (e1, e2)  # elected (the operator reaches only them)
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
    """Promise 4 with real gateways: three ``chash gateway`` processes, each
    in its host, sharing the ring through etcd, in front of three HTTP
    backends, each gateway health-checking every backend over the network
    and voting.  The gateway cut off from b1 alone fails b1's keys over to
    the next backends locally while the others keep sending them to b1,
    and its down vote takes nothing out of the shared ring; once a second
    gateway loses b1, a majority of the live reporters has voted and b1
    leaves every ring; healed, it comes back everywhere."""
    e1, e2, e3 = (network.host(f"e{i}") for i in (1, 2, 3))
    etcd = EtcdMembers(network, [e1, e2, e3])
    backends = {name: network.host(name) for name in ("b1", "b2", "b3")}
    addresses = {name: start_http_backend(host, name) for name, host in backends.items()}
    history = History()
    operator = Operator(network.host("op"), etcd.endpoints(), history)
    hosts = {name: network.host(name) for name in ("g1", "g2", "g3")}
    gateways = {name: RealGateway(network, host, etcd.endpoints(), addresses,
                                  bootstrap=name == "g1", vote_ttl=VOTE_TTL)
                for name, host in hosts.items()}
    keys = [f"user-{i}" for i in range(40)]

    def routes() -> dict[str, tuple[dict[str, str], dict[str, Any]]]:
        return {name: gateway.routes(keys) for name, gateway in gateways.items()}

    def in_step() -> bool:
        try:
            seen = routes()
        except AssertionError:
            return False  # not listening yet
        shown = operator.run("show", "--json")
        if shown[0] != 0:
            return False
        fingerprint = json.loads(shown[1])["fingerprint"]
        return all(set(r.values()) <= set(addresses) and status["ring"]["fingerprint"]
                   == fingerprint and status["ring"]["nodes"] == 3
                   for r, status in seen.values()) \
            and len({json.dumps(r, sort_keys=True) for r, _ in seen.values()}) == 1
    wait_until(in_step, "every gateway routes every key, all alike", timeout=60, interval=0.5)
    owners = routes()["g1"][0]
    of_b1 = [key for key, backend in owners.items() if backend == "b1"]
    assert of_b1 and len(set(owners.values())) == 3, owners

    def b1_state() -> str:
        shown = operator.read("show")
        return {n["node"]: n["state"] for n in shown["nodes"]}["b1"]

    network.cut(hosts["g3"], backends["b1"])

    def g3_holds_b1_down() -> bool:
        nodes = {n["node"]: n for n in gateways["g3"].routes([])[1]["nodes"]}
        return (nodes["b1"]["health"] or {}).get("state") == "down"
    wait_until(g3_holds_b1_down, "g3's own checks find b1 gone", timeout=30, interval=0.2)
    # Longer than a vote lives: the other two keep voting b1 up, so the
    # quorum counts three live reporters and g3's vote alone decides nothing.
    until = time.monotonic() + VOTE_TTL + 2
    rounds = 0
    while time.monotonic() < until or rounds < 2:
        seen = routes()
        via_g3 = seen["g3"][0]
        assert all(via_g3[key] in ("b2", "b3") for key in of_b1), via_g3  # failed over here
        assert all(via_g3[key] == owners[key] for key in keys if key not in of_b1), via_g3
        for name in ("g1", "g2"):
            assert seen[name][0] == owners, (name, seen[name][0])  # b1 serves its keys there
            assert seen[name][1]["ring"]["nodes"] == 3
        rounds += 1
    assert b1_state() == "in service"
    assert not [c for c in operator.read("history") if c["action"] == "down"]
    # A second gateway loses b1: a majority of the live reporters votes it down.
    network.cut(hosts["g2"], backends["b1"])
    wait_until(lambda: b1_state() == "down", "b1 leaves the shared ring", timeout=30,
               interval=0.5)
    verdict = {n["node"]: n for n in operator.read("show")["nodes"]}["b1"]
    assert verdict["votes"] * 2 > verdict["reporters"] == 3, verdict  # a majority, not g3 alone
    wait_until(lambda: all(status["ring"]["nodes"] == 2 for _, status in routes().values()),
               "every gateway's ring drops b1", timeout=30, interval=0.5)
    via_g1 = routes()["g1"][0]
    assert all(via_g1[key] in ("b2", "b3") for key in keys), via_g1
    assert [c["node"] for c in operator.read("history") if c["action"] == "down"] == ["b1"]
    network.heal()
    wait_until(lambda: b1_state() == "in service", "b1 back in the shared ring", timeout=30,
               interval=0.5)
    wait_until(lambda: all(r == owners for r, _ in routes().values()),
               "every gateway sends b1's keys to b1 again", timeout=30, interval=0.5)
    wait_until(in_step, "one ring after heal, the store's", timeout=30, interval=0.5)
    for _, status in routes().values():
        assert (status["membership"]["stale_seconds"], status["membership"]["stale_since"]) \
            == (0.0, None), status["membership"]
    for gateway in gateways.values():
        assert gateway.process.poll() is None, gateway.log()


def test_changes_over_slow_and_lossy_links(network: Network) -> None:
    """200 ms each way and 5 % of chunks late by a retransmission timeout on
    every link: between the gateways (and the operator) and the members, and
    between the members: every change reported committed is kept, one ring
    at the end."""
    setup = Setup(network, slow=(0.2, 0.05))
    for argv in (("add", "a:1"), ("add", "b:1"), ("weight", "a:1", "3"), ("remove", "b:1")):
        setup.change(*argv)
    committed = setup.history.committed()
    assert len(committed) >= 3, setup.history.attempts  # slow, not stopped
    assert [a.version for a in committed] == sorted(a.version for a in committed)
    took = setup.agree("the gateways agree over the slow links")
    print(f"agreed {took:.1f}s after the last change")
    setup.finish()
