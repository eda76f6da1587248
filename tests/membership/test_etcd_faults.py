"""EtcdMembership through the faults of a real 3-member etcd cluster.

One cluster serves the module (tests/_support/etcd_server.py); each test
puts back what it broke (a killed member restarted, a paused one resumed)
before it ends, and ends with every instance on one ring and no
acknowledged write lost.  Both drivers run every test, against etcd 3.4;
the leader killed, a member restarted and the compaction run against etcd
3.5 too (a cluster of each version serves the module).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import chash
from _support.etcd_server import VERSIONS, EtcdCluster, _post, running_cluster
from _support.membership_async import BlockingMembership
from _support.waiting import wait_until
from chash import ConsistentHashRouter

pytest.importorskip("httpx", reason="httpx not installed: pip install 'chash-router[etcd]'")

from chash.membership import AsyncEtcdMembership, EtcdMembership
from chash.membership.etcd.wire import EtcdUnavailable

#: The folder holding the chash under test (installed, or this checkout).
CHASH_ROOT = Path(chash.__file__).resolve().parent.parent
FAST = {"resync_interval": 0.3, "vote_ttl": 1.0, "timeout": 0.5, "quorum": "any"}


#: The faults run against every etcd version; the others against 3.4 only
#: (what they exercise is the same client over the same gateway).
EVERY_VERSION = pytest.mark.parametrize("etcd3", VERSIONS, indirect=True, scope="module",
                                        ids=lambda v: f"etcd{v}")
ETCD_3_4 = pytest.mark.parametrize("etcd3", ["3.4"], indirect=True, scope="module",
                                   ids=lambda v: f"etcd{v}")


@pytest.fixture(scope="module")
def etcd3(request: pytest.FixtureRequest) -> Iterator[EtcdCluster]:
    """A 3-member cluster of the version the test names, for the module."""
    yield from running_cluster(3, request.param)


@pytest.fixture
def cluster(etcd3: EtcdCluster) -> Iterator[EtcdCluster]:
    """The cluster, emptied; every member running again at teardown."""
    etcd3.wipe()
    yield etcd3
    for member in etcd3.members:
        if not member.running:
            etcd3.restart(member)
        else:
            member.resume()
    etcd3.wait_healthy()


@pytest.fixture(params=["sync", "async"])
def make(request: pytest.FixtureRequest, cluster: EtcdCluster) -> Iterator[Callable[..., Any]]:
    made: list[Any] = []

    def build(router: ConsistentHashRouter | None = None, urls: list[str] | None = None,
              **kwargs: Any) -> Any:
        router = router if router is not None else ConsistentHashRouter()
        options = {**FAST, **kwargs}
        endpoints = urls if urls is not None else cluster.urls
        if request.param == "sync":
            membership: Any = EtcdMembership(router, endpoints, "t", **options)
        else:
            membership = BlockingMembership(
                lambda: AsyncEtcdMembership(router, endpoints, "t", **options))
        made.append(membership)
        membership.start()
        return membership

    yield build
    for membership in made:
        membership.close()


def seeded(*nodes: str) -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    for node in nodes:
        router.add_service_node(node, 1.0)
    return router


def agree(*members: Any, weights: dict[str, float] | None = None) -> None:
    def same() -> bool:
        if weights is not None and any(m.router.weights != weights for m in members):
            return False
        return len({m.router.fingerprint() for m in members}) == 1 \
            and len({m.version for m in members}) == 1
    wait_until(same, "every instance holds one ring", timeout=20)


def write_until_acknowledged(call: Callable[[], None], deadline: float = 20.0) -> None:
    """Retry ``call`` through an outage (a write is idempotent)."""
    end = time.monotonic() + deadline
    while True:
        try:
            call()
            return
        except (EtcdUnavailable, OSError):
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


@EVERY_VERSION
def test_the_leader_killed_during_writes(make: Callable[..., Any], cluster: EtcdCluster) -> None:
    a = make(seeded("n0"), bootstrap=True)
    b = make()
    acked: list[str] = []

    def writes() -> None:
        for i in range(12):
            node = f"w{i}"
            write_until_acknowledged(lambda node=node: a.add_node(node))  # type: ignore[misc]
            acked.append(node)

    writer = threading.Thread(target=writes)
    writer.start()
    wait_until(lambda: len(acked) >= 3, "some writes went in")
    leader = cluster.leader()
    leader.kill()
    writer.join(60)
    assert not writer.is_alive()
    cluster.restart(leader)
    agree(a, b, weights={"n0": 1.0, **{node: 1.0 for node in acked}})
    assert len(acked) == 12


@ETCD_3_4
def test_a_paused_member(make: Callable[..., Any], cluster: EtcdCluster) -> None:
    a = make(seeded("n0", "n1"), bootstrap=True)
    b = make()
    agree(a, b)
    client = a.client
    used = cluster.members[client._cluster.current]
    used.pause()
    try:
        write_until_acknowledged(lambda: a.add_node("during"))
        b.disable_node("n0", "paused member")
        agree(a, b, weights={"n1": 1.0, "during": 1.0})
    finally:
        used.resume()
    a.enable_node("n0")
    agree(a, b, weights={"n0": 1.0, "n1": 1.0, "during": 1.0})


@EVERY_VERSION
def test_a_member_restarted(make: Callable[..., Any], cluster: EtcdCluster) -> None:
    a = make(seeded("n0"), bootstrap=True)
    b = make()
    agree(a, b)
    for member in cluster.members[:2]:
        member.kill()
        write_until_acknowledged(lambda m=member: a.add_node(f"while-{m.name}-down"))  # type: ignore[misc]
        cluster.restart(member)
    agree(a, b, weights={"n0": 1.0, "while-m0-down": 1.0, "while-m1-down": 1.0})


@EVERY_VERSION
def test_a_watcher_away_past_a_compaction(make: Callable[..., Any], cluster: EtcdCluster) -> None:
    # b reaches etcd through one member only; that member is paused while
    # the ring moves on and the history is compacted past b's revision.
    leader = cluster.leader()
    away = next(m for m in cluster.members if m is not leader)
    a = make(seeded("n0"), urls=[leader.url], bootstrap=True)
    b = make(urls=[away.url])
    agree(a, b)
    away.pause()
    try:
        for i in range(3):
            a.add_node(f"later{i}")
        revision = int(_post(leader.url + "/v3/kv/range", {"key": "AA=="})["header"]["revision"])
        _post(leader.url + "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    finally:
        away.resume()
    agree(a, b, weights={"n0": 1.0, **{f"later{i}": 1.0 for i in range(3)}})


DOOMED = """
import sys, time
from chash import ConsistentHashRouter
from chash.membership import EtcdMembership
m = EtcdMembership(ConsistentHashRouter(), sys.argv[1].split(","), "t", quorum="any",
                   vote_ttl=1.0, resync_interval=0.3, timeout=0.5, reporter="doomed")
m.start()
m.mark_down("x", "seen dead by the doomed instance")
m.flush()
print("voted", flush=True)
time.sleep(600)
"""


@ETCD_3_4
def test_a_killed_instances_votes_lapse_with_its_lease(make: Callable[..., Any],
                                                       cluster: EtcdCluster, tmp_path: Path) -> None:
    a = make(seeded("x", "y", "z"), bootstrap=True)
    b = make()
    agree(a, b)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CHASH_ROOT), os.environ.get(
        "PYTHONPATH", "")])}
    doomed = subprocess.Popen([sys.executable, "-c", DOOMED, cluster.url], env=env,
                              stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert doomed.stdout is not None
        assert doomed.stdout.readline().strip() == "voted"
        wait_until(lambda: "x" not in a.router and "x" not in b.router, "x taken out")
        assert a.state.down["x"].reason == "seen dead by the doomed instance"
        doomed.send_signal(signal.SIGKILL)  # no withdraw: only the lease ends its vote
        doomed.wait(10)
        agree(a, b, weights={"x": 1.0, "y": 1.0, "z": 1.0})
    finally:
        doomed.kill()
        doomed.wait(10)
        if doomed.stdout is not None:
            doomed.stdout.close()
