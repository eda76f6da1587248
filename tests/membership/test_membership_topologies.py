"""Shared membership on a Redis Cluster and behind Sentinel.

A real 3-primary cluster (each primary with a replica) and a real Sentinel
setup (a primary, a replica, three sentinels) run on loopback
(tests/_support/redis_topologies.py); gateway processes (tests/_support/membership_worker.py)
with either driver keep one ring through a slot migration, the death of
the slot's primary, and a Sentinel failover.  Announcements use sharded
pub/sub: Redis 7 offers it, and the test checks the gateways subscribed
to the shard channel.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from _support.membership_procs import Gateways, Worker, add_all, converge
from _support.redis_topologies import LocalCluster, LocalSentinel, _command
from _support.waiting import wait_until

pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")

CHANNEL = "chash:{default}:events"


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    """A 3-primary cluster with replicas; stopped after the gateways."""
    topology = LocalCluster()
    yield topology
    topology.close()


@pytest.fixture
def sentinel() -> Iterator[LocalSentinel]:
    """A primary, a replica, three sentinels; stopped after the gateways."""
    topology = LocalSentinel()
    yield topology
    topology.close()


def write_until_it_works(gateway: Worker, op: str, **kwargs: Any) -> None:
    """Retry a write while the client finds the new primary."""
    answers: list[dict[str, Any]] = []

    def done() -> bool:
        gateway.send(op, **kwargs)
        answers.append(gateway.answer())
        return "error" not in answers[-1]

    wait_until(done, f"{op} {kwargs} succeeds after the failover", timeout=30)


def test_cluster_slot_migration_and_failover(cluster: LocalCluster,
                                             gateways: Gateways) -> None:
    gw = gateways(cluster.port, 3, options=("--cluster",))
    ring = {"a": 1.0, "b": 2.0, "c": 1.0}
    add_all(gw, ring)
    converge(gw, ring, "the ring on a cluster")
    slot = int(_command(cluster.port, "CLUSTER", "KEYSLOT", CHANNEL))
    owner = cluster.owner(slot)
    wait_until(lambda: _command(owner, "PUBSUB", "SHARDNUMSUB", CHANNEL)[1] == 3,
               "the three gateways subscribe to the shard channel")

    target = next(port for port in cluster.primaries() if port != owner)
    cluster.move_slot(slot, target)
    gw[1].call("add", node="d")
    ring["d"] = 1.0
    converge(gw, ring, "a change after the slot moved")
    wait_until(lambda: _command(target, "PUBSUB", "SHARDNUMSUB", CHANNEL)[1] == 3,
               "the gateways follow the shard channel to its new primary")

    promoted = cluster.kill_primary(target)
    write_until_it_works(gw[2], "add", node="e")
    ring["e"] = 1.0
    converge(gw, ring, "a change after the slot's primary died")
    gw[0].call("remove", node="a")
    del ring["a"]
    converge(gw, ring, "and another")
    assert cluster.owner(slot) == promoted


def test_sentinel_failover(sentinel: LocalSentinel, gateways: Gateways) -> None:
    setup = sentinel
    sentinels = ",".join(map(str, setup.sentinels))
    gw = gateways(0, 3, options=("--sentinel", sentinels, "--service", setup.service))
    ring = {"a": 1.0, "b": 2.0}
    add_all(gw, ring)
    converge(gw, ring, "the ring behind Sentinel")
    new_primary = setup.fail_over()
    write_until_it_works(gw[0], "add", node="c")
    ring["c"] = 1.0
    converge(gw, ring, "a change after the failover")
    wait_until(lambda: _command(new_primary, "PUBSUB", "SHARDNUMSUB", CHANNEL)[1] == 3,
               "the gateways listen on the new primary")
    gw[1].call("remove", node="a")
    del ring["a"]
    converge(gw, ring, "and another")
