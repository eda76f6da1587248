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
from typing import Any

import pytest

from _support.membership_procs import Worker
from _support.membership_worker import RESYNC_INTERVAL, VOTE_TTL
from _support.netns import Network
from _support.partitions import EtcdMembers, History, Operator, start_gateway
from _support.waiting import wait_until

pytest.importorskip("httpx", reason="httpx not installed: pip install 'chash-router[etcd]'")

#: How long a healed gateway gets to hold the stored ring again: two resync
#: intervals, as promised, plus room for TCP to reconnect on a loaded
#: machine (the test reports how long it took).
HEAL_DEADLINE = 2 * RESYNC_INTERVAL + 15.0


class Setup:
    """Three etcd members, three gateways, an operator, a history."""

    def __init__(self, network: Network, gateway_endpoints: dict[str, str] | None = None,
                 ) -> None:
        self.network = network
        self.members = [network.host(f"e{i}") for i in (1, 2, 3)]
        self.hosts = {name: network.host(name) for name in ("g1", "g2", "g3")}
        self.op = network.host("op")
        self.etcd = EtcdMembers(network, self.members)
        self.history = History()
        self.operator = Operator(self.op, self.etcd.endpoints(), self.history)
        endpoints = gateway_endpoints or {}
        self.gateways: dict[str, Worker] = {}
        for name, host in self.hosts.items():
            self.gateways[name] = start_gateway(
                network, host, endpoints.get(name, self.etcd.endpoints()), name,
                bootstrap=name == "g1")
        wait_until(lambda: self.operator.run("show")[0] == 0,
                   "etcd elected a leader and g1 created the ring", timeout=60)

    def change(self, *argv: str, endpoints: str | None = None) -> Any:
        attempt = self.operator.change(*argv, endpoints=endpoints)
        return attempt

    def agree(self, what: str, deadline: float = HEAL_DEADLINE) -> float:
        """Wait until every gateway holds the stored ring; seconds it took."""
        started = time.monotonic()
        shown = self.operator.read("show")

        def same() -> bool:
            statuses = self.history.sample(self.gateways)
            return {s["fingerprint"] for s in statuses.values()} == {shown["fingerprint"]}
        wait_until(same, what, timeout=deadline, interval=0.1)
        return time.monotonic() - started

    def finish(self) -> None:
        """Every promise, judged on the whole run."""
        final = self.history.sample(self.gateways)
        self.history.check(final, self.operator.read("history"), self.operator.read("show"))
        for status in final.values():
            assert (status["stale_seconds"], status["stale_since"]) == (0.0, None)
        for gateway in self.gateways.values():
            assert gateway.close() == [], f"{gateway.reporter} failed lookups"


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
    # The minority member refuses writes, with a message naming the cause
    # (once it knows it has no leader: an election timeout after the cut).
    refused = setup.change("add", "x:1", endpoints=setup.etcd.endpoints(e3))
    assert refused.code == 1 and refused.version is None, refused
    assert len(refused.err.strip().splitlines()) == 1
    assert "etcdserver: no leader" in refused.err, refused.err
    # The majority goes on.
    majority = setup.etcd.endpoints(e1, e2)
    for argv in (("add", "c:1"), ("weight", "b:1", "3")):
        attempt = setup.change(*argv, endpoints=majority)
        assert attempt.committed, attempt
    network.heal()
    took = setup.agree("g3 follows the ring again once e3 rejoined")
    print(f"g3 in step {took:.1f}s after heal")
    setup.finish()
