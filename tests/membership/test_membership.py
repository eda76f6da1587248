"""Tests of chash.membership against a real redis-server on 127.0.0.1.

Instances in one process test the protocol step by step (operator calls
return once the local router has changed; ``flush()`` sends health votes
at once; ``refresh()`` reads the ring), and a hypothesis state machine
compares two instances with a model of the ring and of the quorum rule.
Instances in separate processes (tests/_support/membership_worker.py) test what
gateways see: convergence to identical fingerprints, concurrent writers,
and a Redis restart in the middle of the traffic.  Background progress is
only ever waited for by polling with generous deadlines.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import chash
from _support.collisions import shared_point, shared_points
from _support.http_backends import Backend
from _support.membership_async import BlockingMembership
from _support.membership_procs import Worker, converge, fingerprint_of, worker_factory
from _support.redis_server import RedisServer
from _support.waiting import eventually, wait_until
from chash import ConsistentHashRouter

pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")
import redis
import redis.asyncio

from chash.health import HealthChecker
from chash.membership import (
    AsyncRedisMembership,
    HealthVerdict,
    RedisMembership,
)

RESYNC = 0.2
REPO = Path(__file__).resolve().parents[2]
# Where the chash under test comes from (the checkout, or site-packages).
CHASH_ROOT = Path(chash.__file__).resolve().parent.parent


# -- fixtures ---------------------------------------------------------------


Factory = Callable[..., RedisMembership]


def _factory(srv: RedisServer, driver: str = "sync") -> Iterator[Factory]:
    made: list[Any] = []

    def make(router: ConsistentHashRouter | None = None, *, start: bool = True,
             **kwargs: Any) -> RedisMembership:
        kwargs.setdefault("resync_interval", RESYNC)
        kwargs.setdefault("reporter", f"instance-{len(made)}")
        kwargs.setdefault("bootstrap", True)
        router = router if router is not None else ConsistentHashRouter()
        membership: Any
        if driver == "async":
            membership = BlockingMembership(lambda: AsyncRedisMembership(
                router, redis.asyncio.Redis(**srv.client_kwargs(asyncio=True)), **kwargs))
        else:
            membership = RedisMembership(router, redis.Redis(**srv.client_kwargs()), **kwargs)
        made.append(membership)
        if start:
            membership.start()
        result: RedisMembership = membership
        return result

    yield make
    for membership in made:
        if isinstance(membership, BlockingMembership):
            membership.close()
        else:
            membership.stop()
            membership.client.close()


@pytest.fixture(params=["sync", "async"])
def instances(request: pytest.FixtureRequest, client: redis.Redis,
              server: RedisServer) -> Iterator[Factory]:
    """Make memberships on the shared server with the driver of the
    parameter (the asyncio one behind ``BlockingMembership``), each with its
    own client (its own connections, as separate gateways have); stopped
    at teardown."""
    yield from _factory(server, request.param)


@pytest.fixture(params=["sync", "async"])
def own_instances(request: pytest.FixtureRequest, own_server: RedisServer) -> Iterator[Factory]:
    """As ``instances``, on the test's own server."""
    yield from _factory(own_server, request.param)


def same_ring(*memberships: RedisMembership) -> bool:
    """Whether every router has the same fingerprint as the first."""
    prints = {m.router.fingerprint() for m in memberships}
    return len(prints) == 1


# -- without redis-py -------------------------------------------------------


def test_import_without_redis_py() -> None:
    """chash and chash.membership import without redis-py; constructing a
    membership names the extra to install."""
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "redis" or name.startswith("redis."):
            raise ModuleNotFoundError("blocked: " + name, name=name)  # as if not installed
sys.meta_path.insert(0, Block())
import chash, chash.membership
try:
    chash.membership.RedisMembership(chash.ConsistentHashRouter(), None)
except ImportError as exc:
    print(exc)
else:
    print("no error")
"""
    env = dict(os.environ, PYTHONPATH=str(CHASH_ROOT))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "pip install 'chash-router[redis]'" in result.stdout


def test_public_names_are_documented() -> None:
    import chash.membership as module

    assert sorted(module.__all__) == ["AsyncEtcdMembership", "AsyncRedisMembership",
                                      "EtcdMembership", "HealthVerdict",
                                      "MembershipState", "NotReplicatedError",
                                      "RedisMembership", "RingMissingError"]
    for name in module.__all__:
        obj = getattr(module, name)
        assert obj.__doc__, name
        for attr, value in vars(obj).items():
            if not attr.startswith("_") and (callable(value) or isinstance(value, property)):
                assert getattr(value, "__doc__", None), f"{name}.{attr}"


# -- settings ---------------------------------------------------------------


@pytest.mark.parametrize("kwargs, error", [
    ({"quorum": "most"}, ValueError),
    ({"quorum": 0}, ValueError),
    ({"quorum": True}, ValueError),
    ({"vote_ttl": 0}, ValueError),
    ({"vote_ttl": float("nan")}, ValueError),
    ({"resync_interval": -1}, ValueError),
    ({"name": "a{b}"}, ValueError),
    ({"name": ""}, ValueError),
    ({"prefix": "x}"}, ValueError),
    ({"reporter": ""}, ValueError),
])
def test_bad_settings(kwargs: dict[str, Any], error: type[Exception]) -> None:
    c = redis.Redis(port=1)  # never connects: constructing does no I/O
    try:
        with pytest.raises(error):
            RedisMembership(ConsistentHashRouter(), c, **kwargs)
    finally:
        c.close()


def test_wrong_router_or_client_type() -> None:
    c = redis.Redis(port=1)
    ac = redis.asyncio.Redis(port=1)
    try:
        with pytest.raises(TypeError):
            RedisMembership({}, c)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="AsyncRedisMembership"):
            RedisMembership(ConsistentHashRouter(), ac)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="RedisMembership"):
            AsyncRedisMembership(ConsistentHashRouter(), c)  # type: ignore[arg-type]
    finally:
        c.close()
        asyncio.run(ac.aclose())


# -- one process ------------------------------------------------------------


def test_first_instance_seeds_the_ring_and_later_ones_adopt_it(instances: Factory) -> None:
    first = ConsistentHashRouter()
    first.add_service_node("a")
    first.add_service_node("b", 2.0)
    m1 = instances(first)
    assert m1.version == 1
    assert m1.state is not None and dict(m1.state.weights) == {"a": 1.0, "b": 2.0}

    second = ConsistentHashRouter()
    second.add_service_node("stale")
    m2 = instances(second)
    assert second.weights == {"a": 1.0, "b": 2.0}
    assert m2.version == 1 and m2.state is not None and m2.state.epoch == m1.state.epoch
    assert first.fingerprint() == second.fingerprint()


def test_operator_changes(instances: Factory) -> None:
    m1, m2 = instances(), instances()
    assert m1.version == 1 and len(m1.router) == 0

    m1.add_node("a")
    assert m1.router.weights == {"a": 1.0} and m1.version == 2  # local at once
    m1.add_node("a", 1.0)
    assert m1.version == 2  # no change, no version
    m2.add_node("b", 0.5)
    m2.add_node("a", 3.0)  # reweigh
    assert m2.router.weights == {"a": 3.0, "b": 0.5} and m2.version == 4
    wait_until(lambda: m1.version == 4 and same_ring(m1, m2), "m1 follows m2")

    m1.disable_node("a", "maintenance")
    assert "a" not in m1.router and m1.version == 5
    m1.disable_node("a", "again")
    assert m1.version == 5
    state = m1.state
    assert state is not None and dict(state.disabled) == {"a": "maintenance"}
    assert m1.watched_nodes() == {"b": 0.5}  # health checks leave it alone
    m1.add_node("a", 2.0)  # a disabled node keeps being disabled
    assert "a" not in m1.router and m1.version == 6
    m1.enable_node("a")
    assert m1.router.weights == {"a": 2.0, "b": 0.5} and m1.version == 7
    m1.enable_node("a")
    assert m1.version == 7

    m2.remove_node("b")
    assert m2.router.weights == {"a": 2.0} and m2.version == 8
    for call in (m2.remove_node, m2.disable_node, m2.enable_node):
        with pytest.raises(KeyError):
            call("b")
    assert m2.version == 8
    wait_until(lambda: m1.version == 8 and same_ring(m1, m2), "m1 follows m2")


def test_zones_are_shared_with_the_ring(instances: Factory, client: redis.Redis) -> None:
    seeded = ConsistentHashRouter()
    seeded.add_service_node("a", zone="east")  # a bootstrap seeds the router's zones
    m1 = instances(seeded)
    m2 = instances(ConsistentHashRouter())
    assert m2.state is not None and dict(m2.state.zones) == {"a": "east"}
    version = m1.add_node("b", 2.0, zone="west")
    assert m1.add_node("b", 2.0, zone="west") == version  # nothing to change
    assert m1.add_node("b", 3.0) == version + 1  # the zone is kept
    m1.add_node("c")  # a new node in no zone
    wait_until(lambda: m2.version == m1.version, "m2 follows m1")
    assert m2.state is not None and dict(m2.state.zones) == {"a": "east", "b": "west"}
    # A zone of a node the ring no longer holds (left by a version that kept
    # no zones) is no zone.
    assert client.hget("chash:{default}:zones", "b") == b"west"  # where the ring keeps them
    client.hset("chash:{default}:zones", "gone", "north")
    assert "gone" not in m2.refresh().zones
    for bad, error in ((1, TypeError), ("\ud800", ValueError)):
        with pytest.raises(error):
            m1.add_node("d", zone=bad)
    assert "d" not in m1.refresh().weights


@pytest.mark.parametrize("node, weight, error", [
    ("a", 0, ValueError),
    ("a", -1.0, ValueError),
    ("a", float("inf"), ValueError),
    ("a", True, TypeError),
    ("a", "2", TypeError),
    ("a", 1e12, ValueError),
    (b"a", 1.0, TypeError),
    (1, 1.0, TypeError),
    ("\ud800", 1.0, ValueError),
])
def test_bad_operator_input_changes_nothing(instances: Factory, node: Any, weight: Any,
                                            error: type[Exception]) -> None:
    m = instances()
    with pytest.raises(error):
        m.add_node(node, weight)
    assert m.refresh().version == 1 and len(m.router) == 0


def test_odd_node_names_round_trip(instances: Factory) -> None:
    m1, m2 = instances(), instances()
    names = ["", "a:b", "{x}", "é", "tab\there", '"quoted"', "1", "10.0.0.1:8080"]
    for i, node in enumerate(names):
        m1.add_node(node, 1.0 + i / 7)
    expected = {node: 1.0 + i / 7 for i, node in enumerate(names)}
    assert m2.refresh().weights == expected
    assert m2.router.weights == expected
    assert same_ring(m1, m2)


def test_settings_must_match(instances: Factory) -> None:
    instances()
    with pytest.raises(ValueError, match="virtual_node_count=50"):
        instances(ConsistentHashRouter(50))
    with pytest.raises(ValueError, match="quorum=any"):
        instances(quorum="any")
    with pytest.raises(ValueError, match="layout=node"):
        instances(ConsistentHashRouter(layout="node"))
    instances(ConsistentHashRouter(), name="other", quorum="any")  # another ring is fine


def test_lost_announcement_is_caught_by_the_version_check(
        instances: Factory, client: redis.Redis) -> None:
    m = instances()
    m.add_node("a")
    # A change whose announcement never arrives: written without PUBLISH.
    # In one transaction, as a real writer changes the ring: a resync
    # between separate writes would see a count that does not match (a
    # damaged ring) and rightly restore the last known one.
    with client.pipeline(transaction=True) as pipe:
        pipe.hset("chash:{default}:nodes", "b", "1.0")
        pipe.hset("chash:{default}:meta", mapping={"count": 2, "version": 3})
        pipe.hdel("chash:{default}:meta", "digest")
        pipe.execute()
    wait_until(lambda: m.router.weights == {"a": 1.0, "b": 1.0}, "the resync applies it")
    assert m.version == 3


def test_redis_going_back_a_version_is_followed(
        instances: Factory, client: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    m1, m2 = instances(), instances()
    m1.add_node("a")
    at_two = client.hgetall("chash:{default}:meta")
    m1.add_node("b")
    wait_until(lambda: m2.version == 3, "m2 follows")
    epoch = m1.state.epoch if m1.state else None
    # A failover that lost the last acknowledged write: version 2, no b.
    # One transaction, as a replica's state is one snapshot: an instance
    # reading between two separate commands would see version 2 with b.
    rollback = client.pipeline(transaction=True)
    rollback.hset("chash:{default}:meta", mapping=at_two)
    rollback.hdel("chash:{default}:nodes", "b")
    rollback.hdel("chash:{default}:order", "b")
    rollback.execute()
    # Both follow Redis back, under a new epoch (so that an instance that
    # slept through it reads the ring again whatever version it holds).
    wait_until(lambda: m1.router.weights == {"a": 1.0} == m2.router.weights
               and m1.state == m2.state and m1.state is not None
               and m1.state.epoch != epoch and m1.version == 4, "both follow Redis back")
    assert any("went back from version 3 to 2" in r.getMessage() for r in caplog.records)
    m2.add_node("c")
    wait_until(lambda: m1.router.weights == {"a": 1.0, "c": 1.0}, "and move on from there")


def _nginx_ids(count: int = 100_000) -> list[str]:
    return [f"h{i}:80" for i in range(count)]


def test_ordered_layouts_keep_the_add_order_on_every_instance(instances: Factory) -> None:
    # In the nginx layout a shared point goes to the node added first: the
    # instances must hold the nodes in one order, whatever their own.
    first_id, second_id, point = shared_point("nginx", _nginx_ids())
    seeded = ConsistentHashRouter(layout="nginx")
    seeded.add_service_nodes([second_id, first_id])  # second_id first
    m1 = instances(seeded, name="ordered")
    other = ConsistentHashRouter(layout="nginx")
    other.add_service_nodes([first_id, second_id])  # the other order
    m2 = instances(other, name="ordered")
    for m in (m1, m2):
        assert m.router.nodes == [second_id, first_id]
        assert m.router.node_map[point] == second_id
    # A node taken out and put back regains its place in the shared add order.
    m2.disable_node(second_id)
    wait_until(lambda: m1.router.nodes == [first_id], "the disable reaches m1")
    assert m1.router.node_map[point] == first_id
    m2.enable_node(second_id)
    for m in (m1, m2):
        wait_until(lambda m=m: m.router.nodes == [second_id, first_id], "back in its place")
        assert m.router.node_map[point] == second_id
    m1.add_node("h-new:80", 2.0)
    wait_until(lambda: m2.router.nodes == [second_id, first_id, "h-new:80"], "the add reaches m2")
    assert m1.router == m2.router and same_ring(m1, m2)


Shared = dict[int, tuple[str, str]]


def _nginx_nodes_with_ties(total: int, pairs: int) -> tuple[list[str], Shared]:
    """``total`` nginx node ids among which ``pairs`` disjoint pairs share a
    point (searched here, offline), in an add order that is neither id
    order nor Redis's hash order (a seeded shuffle, then in every pair the
    bytewise larger id first); and each shared point with its pair."""
    ids = _nginx_ids()
    shared: Shared = {point: (a, b) for a, b, point
                      in itertools.islice(shared_points("nginx", ids), pairs)}
    assert len(shared) == pairs
    paired = {node for pair in shared.values() for node in pair}
    scanned = ids[:max(ids.index(node) for node in paired) + 1]
    chosen = sorted(paired) + [n for n in scanned if n not in paired][:total - len(paired)]
    assert len(chosen) == total
    order = list(chosen)
    random.Random(1729).shuffle(order)
    for a, b in shared.values():
        small, large = sorted((a, b))
        i, j = order.index(small), order.index(large)
        if i < j:  # the larger first, so that id order would give the tie away
            order[i], order[j] = order[j], order[i]
    assert all(owner == max(shared[point]) for point, owner in _owners(order, shared).items())
    assert order != sorted(order)
    return order, shared


def _owners(order: list[str], shared: Shared) -> dict[int, str]:
    """Each shared point with the node that owns it: the one added first."""
    return {point: min(pair, key=order.index) for point, pair in shared.items()}


def _nginx_router(nodes: list[str] | None = None) -> ConsistentHashRouter:
    router = ConsistentHashRouter(layout="nginx")
    router.add_service_nodes(nodes or [])
    return router


def _holds_add_order(memberships: list[RedisMembership], order: list[str],
                     shared: Shared, what: str) -> None:
    """Every instance holds the nodes in ``order``: the same ring as a
    router given them in that order, each shared point with its owner."""
    expected = _nginx_router(order).fingerprint()
    owners = _owners(order, shared)
    for m in memberships:
        # The order can be right while a later weight change is still on its
        # way: wait for the whole ring, not only the order.
        wait_until(lambda m=m: m.router.nodes == order and m.router.fingerprint() == expected, what)
        for point, owner in owners.items():
            assert m.router.node_map[point] == owner


def test_ordered_ring_past_the_listpack_limit_keeps_the_add_order(
        instances: Factory, client: redis.Redis) -> None:
    # More nodes than hash-max-listpack-entries (512 in Redis 7): Redis
    # keeps the nodes hash as a hashtable, whose fields come back in no
    # particular order; the add order must survive it.
    limit = int(client.config_get("hash-max-listpack-entries")["hash-max-listpack-entries"])
    order, shared = _nginx_nodes_with_ties(limit + 40, 4)
    seeded = order[:limit - 10]  # created from a router, the rest added one by one
    m1 = instances(_nginx_router(seeded), name="big")
    m2 = instances(_nginx_router(), name="big", bootstrap=False)
    for node in order[len(seeded):]:
        m1.add_node(node)
    assert client.object("encoding", "chash:{big}:nodes") == b"hashtable"
    assert [k.decode() for k in client.hkeys("chash:{big}:nodes")] != order
    late = instances(_nginx_router(), name="big", bootstrap=False)  # reads it cold
    _holds_add_order([m1, m2, late], order, shared, "every instance holds the add order")
    assert len({m.router.fingerprint() for m in (m1, m2, late)}) == 1
    wait_until(lambda: client.hget("chash:{big}:meta", "digest")
               == m1.router.fingerprint().encode(), "the version stamped with that ring")


def test_ordered_ring_in_a_hashtable_keeps_the_add_order(
        own_instances: Factory, own_server: RedisServer) -> None:
    # hash-max-listpack-entries 0: even a small hash is a hashtable.
    raw = redis.Redis(**own_server.client_kwargs())
    try:
        raw.config_set("hash-max-listpack-entries", 0)
        order, shared = _nginx_nodes_with_ties(12, 3)
        m = instances_of(own_instances, 2, "small")
        for node in order:
            m[0].add_node(node)
        assert raw.object("encoding", "chash:{small}:nodes") == b"hashtable"
        assert [k.decode() for k in raw.hkeys("chash:{small}:nodes")] != order
        late = own_instances(_nginx_router(), name="small", bootstrap=False)
        _holds_add_order([*m, late], order, shared, "every instance holds the add order")
    finally:
        raw.close()


def instances_of(make: Factory, count: int, name: str) -> list[RedisMembership]:
    """``count`` empty nginx instances of ring ``name``, the first one
    allowed to create it."""
    return [make(_nginx_router(), name=name, bootstrap=i == 0) for i in range(count)]


def test_node_removed_and_added_again_goes_to_the_end_everywhere(
        own_instances: Factory, own_server: RedisServer) -> None:
    raw = redis.Redis(**own_server.client_kwargs())
    try:
        raw.config_set("hash-max-listpack-entries", 0)
        order, shared = _nginx_nodes_with_ties(10, 2)
        m = instances_of(own_instances, 2, "readd")
        for node in order:
            m[0].add_node(node)
        _holds_add_order(m, order, shared, "the add order")
        # Each first owner of a shared point leaves and comes back: it goes
        # to the end of the order, and its partner now owns the point.
        moved = list(_owners(order, shared).values())
        for node in moved:
            m[1].remove_node(node)
            m[0].add_node(node)
            m[1].add_node(node, 2.0)  # reweighed, twice: it keeps its place
            m[0].add_node(node, 1.0)
        order = [n for n in order if n not in moved] + moved
        assert all(_owners(order, shared)[p] not in moved for p in shared)
        late = own_instances(_nginx_router(), name="readd", bootstrap=False)
        _holds_add_order([*m, late], order, shared, "the re-added nodes at the end")
    finally:
        raw.close()


def test_ring_restored_after_a_restart_keeps_the_add_order(
        own_instances: Factory, own_server: RedisServer) -> None:
    raw = redis.Redis(**own_server.client_kwargs())
    limit = int(raw.config_get("hash-max-listpack-entries")["hash-max-listpack-entries"])
    raw.close()
    order, shared = _nginx_nodes_with_ties(limit + 40, 4)  # a hashtable in Redis
    # The first instance creates the ring from its router, in its order.
    m = [own_instances(_nginx_router(order), name="restored"),
         own_instances(_nginx_router(), name="restored", bootstrap=False)]
    _holds_add_order(m, order, shared, "the router's order")
    version = m[0].version
    own_server.restart()  # empty: a running instance restores the ring it holds
    raw = redis.Redis(**own_server.client_kwargs())
    try:
        wait_until(lambda: raw.exists("chash:{restored}:meta") == 1
                   and all(x.version > version for x in m), "the ring is restored")
        assert [k.decode() for k in raw.hkeys("chash:{restored}:nodes")] != order
        late = own_instances(_nginx_router(), name="restored", bootstrap=False)
        _holds_add_order([*m, late], order, shared, "the order survives the restore")
        # The add order itself lost (a key evicted): restored too.
        raw.delete("chash:{restored}:order")
        m[0].add_node("h-after:80")
        _holds_add_order([*m, late], [*order, "h-after:80"], shared, "and after a lost key")
    finally:
        raw.close()


def test_unreadable_add_order_entries(instances: Factory, client: redis.Redis,
                                     caplog: pytest.LogCaptureFixture) -> None:
    order, shared = _nginx_nodes_with_ties(6, 1)
    m = [instances(_nginx_router(order), name="bad"),
         instances(_nginx_router(), name="bad", bootstrap=False)]
    _holds_add_order(m, order, shared, "the add order")
    # A sequence that does not parse: that node has none, so it goes first
    # (by id among such nodes) on every instance alike; logged once each.
    client.hset("chash:{bad}:order", order[-1], "later")
    m[0].add_node("h-x:80")
    order = [order[-1], *order[:-1], "h-x:80"]
    _holds_add_order(m, order, shared, "the unreadable sequence skipped alike")
    assert sum("order[" in r.getMessage() for r in caplog.records) == len(m)
    # A sequence counter that does not parse: the store is damaged, and an
    # instance that holds the ring restores it in the order it holds.
    client.hset("chash:{bad}:meta", "seq", "x")
    m[1].add_node("h-y:80")
    order.append("h-y:80")
    _holds_add_order(m, order, shared, "restored in the order held")
    assert client.hget("chash:{bad}:meta", "seq") == str(len(order)).encode()


def test_router_changed_behind_the_back_is_repaired(instances: Factory) -> None:
    m = instances()
    m.add_node("a")
    m.router.add_service_node("rogue")
    m.router.discard_service_node("a")
    wait_until(lambda: m.router.weights == {"a": 1.0}, "the periodic check repairs it")


def test_context_manager_and_restart(instances: Factory, server: RedisServer) -> None:
    c = redis.Redis(**server.client_kwargs())
    router = ConsistentHashRouter()
    try:
        with RedisMembership(router, c, resync_interval=RESYNC, bootstrap=True) as m:
            assert m.running
            with pytest.raises(RuntimeError):
                m.start()
        assert not m.running
        m.stop()  # twice is fine
        other = instances()
        other.add_node("x")
        m.start()
        assert router.weights == {"x": 1.0}
        m.stop()
    finally:
        c.close()


# -- health verdicts --------------------------------------------------------


def _vote(membership: RedisMembership, node: str, down: bool) -> None:
    if down:
        membership.mark_down(node, f"failing as seen by {membership.reporter}")
    else:
        membership.mark_up(node)
    membership.flush()


# (quorum, number of down votes out of 3) -> whether the node is out
QUORUM_CASES = {
    "majority": [False, False, True, True],
    "any": [False, True, True, True],
    "all": [False, False, False, True],
    2: [False, False, True, True],
}


@pytest.mark.parametrize("quorum", list(QUORUM_CASES))
def test_quorum_of_three_reporters(instances: Factory, quorum: str | int) -> None:
    ms = [instances(quorum=quorum) for _ in range(3)]
    ms[0].add_node("a")
    ms[0].add_node("b")
    for m in ms:
        _vote(m, "a", False)  # all three report: three live reporters
    for downs, out in enumerate(QUORUM_CASES[quorum]):
        for i, m in enumerate(ms):
            _vote(m, "a", i < downs)
        expected = {"b": 1.0} if out else {"a": 1.0, "b": 1.0}
        assert ms[0].refresh().ring() == expected, (quorum, downs)
        wait_until(lambda want=expected: all(m.router.weights == want for m in ms),
                   f"every instance applies {downs} down votes under quorum {quorum}")
    state = ms[1].refresh()
    verdict = state.down["a"]
    assert isinstance(verdict, HealthVerdict) and verdict.reason.startswith("failing as seen")
    assert state.watched() == {"a": 1.0, "b": 1.0}  # still watched while down
    for m in ms:
        _vote(m, "a", False)
    wait_until(lambda: all(m.router.weights == {"a": 1.0, "b": 1.0} for m in ms),
               "the node comes back everywhere")


def test_votes_on_unknown_nodes_are_ignored(instances: Factory) -> None:
    m = instances(quorum="any")
    m.add_node("a")
    _vote(m, "ghost", True)
    state = m.refresh()
    assert state.version == 2 and "ghost" not in state.down


def test_votes_lapse_unless_renewed(instances: Factory) -> None:
    ms = [instances(vote_ttl=1.0) for _ in range(3)]
    ms[0].add_node("a")
    ms[0].add_node("b")
    for m in ms:
        _vote(m, "a", False)
    _vote(ms[0], "a", True)
    assert "a" in ms[0].router  # 1 of 3
    # ms[1] and ms[2] stop reporting (crashed checkers); ms[0] keeps renewing
    # its vote, and once theirs have lapsed it is the only live reporter.
    def renewed_and_out() -> bool:
        _vote(ms[0], "a", True)
        return "a" not in ms[0].refresh().ring()

    wait_until(renewed_and_out, "the only live reporter takes the node out")
    # Then nobody renews the verdict: it lapses and the node comes back.
    wait_until(lambda: all("a" in m.router for m in ms), "an unrenewed verdict lapses")


def test_stop_withdraws_the_votes(instances: Factory) -> None:
    ms = [instances() for _ in range(3)]
    ms[0].add_node("a")
    ms[0].add_node("b")
    _vote(ms[0], "a", False)
    _vote(ms[1], "a", True)
    _vote(ms[2], "a", True)
    assert "a" not in ms[0].refresh().ring()  # 2 of 3
    ms[2].stop()  # 1 of 2: no majority
    wait_until(lambda: all("a" in m.router for m in ms[:2]), "the node comes back")


def test_health_checkers_on_two_instances_share_verdicts(
        instances: Factory, backends: Callable[..., Backend]) -> None:
    servers = {node: backends() for node in ("a", "b", "c")}
    ms = [instances() for _ in range(2)]
    for node in servers:
        ms[0].add_node(node)
    checkers = [HealthChecker(None, membership=m, fall=1, rise=1, timeout=2.0,
                              panic_threshold=0.0,
                              url=lambda node: f"http://127.0.0.1:{servers[node].port}/")
                for m in ms]
    try:
        wait_until(lambda: all(len(m.router) == 3 for m in ms), "both instances hold 3 nodes")
        for checker, m in zip(checkers, ms, strict=True):
            checker.check_now()  # both report: two live reporters
            m.flush()
        servers["b"].answer(503)
        checkers[0].check_now()  # 1 of 2 reporters: no majority yet
        ms[0].flush()
        assert "b" in ms[0].refresh().ring()
        checkers[1].check_now()  # 2 of 2
        wait_until(lambda: all(m.router.weights == {"a": 1.0, "c": 1.0} for m in ms),
                   "both checkers' verdicts take b out everywhere")
        verdict = ms[0].refresh().down["b"]
        assert "HTTP 503" in verdict.reason and (verdict.votes, verdict.reporters) == (2, 2)
        servers["b"].answer(200)
        for checker in checkers:
            checker.check_now()
        wait_until(lambda: all(len(m.router) == 3 for m in ms), "b comes back everywhere")
        assert same_ring(*ms)
    finally:
        for checker in checkers:
            checker.stop()


# -- a model of the shared ring ---------------------------------------------


NODES = st.sampled_from(["a", "b", "c", "d"])
WEIGHTS = st.sampled_from([0.5, 1.0, 2.0])
INSTANCE = st.integers(0, 2)


class SharedRingMachine(RuleBasedStateMachine):
    """Three instances (without their threads) against a model: nodes with
    weights, disabled nodes, each reporter's vote, the majority rule.  The
    second one is an AsyncRedisMembership: both drivers share one ring."""

    server: RedisServer

    def __init__(self) -> None:
        super().__init__()
        self.clients: list[redis.Redis] = []
        self.ms: list[Any] = []
        self.blocking: BlockingMembership | None = None

    @initialize()
    def setup(self) -> None:
        server = self.server
        for i in range(3):
            if i == 1:
                self.blocking = BlockingMembership(lambda: AsyncRedisMembership(
                    ConsistentHashRouter(),
                    redis.asyncio.Redis(**server.client_kwargs(asyncio=True)), reporter="r1"))
                self.ms.append(self.blocking)
                continue
            c = redis.Redis(**self.server.client_kwargs())
            self.clients.append(c)
            if i == 0:
                c.flushall()
            self.ms.append(RedisMembership(ConsistentHashRouter(), c, reporter=f"r{i}",
                                           bootstrap=i == 0))
        self.ms[0].refresh()  # creates the (empty) ring
        self.weights: dict[str, float] = {}
        self.disabled: set[str] = set()
        self.votes: dict[str, dict[int, bool]] = {}
        self.down: set[str] = set()
        self.version = 1

    def teardown(self) -> None:
        for c in self.clients:
            c.close()
        if self.blocking is not None:
            self.blocking.close()

    @rule(i=INSTANCE, node=NODES, weight=WEIGHTS)
    def add(self, i: int, node: str, weight: float) -> None:
        self.ms[i].add_node(node, weight)
        if self.weights.get(node) != weight:
            self.version += 1
        self.weights[node] = weight

    @rule(i=INSTANCE, node=NODES)
    def remove(self, i: int, node: str) -> None:
        if node not in self.weights:
            with pytest.raises(KeyError):
                self.ms[i].remove_node(node)
            return
        self.ms[i].remove_node(node, force=True)  # the guard has its own test
        del self.weights[node]
        self.disabled.discard(node)
        self.down.discard(node)
        self.votes.pop(node, None)
        self.version += 1

    @rule(i=INSTANCE, node=NODES, disable=st.booleans())
    def toggle(self, i: int, node: str, disable: bool) -> None:
        def call(node: str) -> None:
            if disable:
                self.ms[i].disable_node(node, force=True)
            else:
                self.ms[i].enable_node(node)

        if node not in self.weights:
            with pytest.raises(KeyError):
                call(node)
            return
        call(node)
        if disable != (node in self.disabled):
            self.version += 1
            (self.disabled.add if disable else self.disabled.discard)(node)

    @rule(i=INSTANCE, node=NODES, down=st.booleans())
    def vote(self, i: int, node: str, down: bool) -> None:
        _vote(self.ms[i], node, down)
        if node not in self.weights:
            return
        votes = self.votes.setdefault(node, {})
        votes[i] = down
        out = sum(votes.values()) * 2 > len(votes)
        if out != (node in self.down):
            self.version += 1
            (self.down.add if out else self.down.discard)(node)

    @invariant()
    def same_as_model(self) -> None:
        if not self.ms:
            return
        ring = {node: weight for node, weight in self.weights.items()
                if node not in self.disabled and node not in self.down}
        for m in self.ms:
            state = m.refresh()
            assert state.version == self.version
            assert dict(state.weights) == self.weights
            assert set(state.disabled) == self.disabled
            assert set(state.down) == self.down
            assert m.router.weights == ring
            assert m.router.fingerprint() == fingerprint_of(ring)


def test_shared_ring_state_machine(server: RedisServer) -> None:
    SharedRingMachine.server = server
    SharedRingMachine.TestCase.settings = settings(
        max_examples=25, stateful_step_count=25, deadline=None,
        suppress_health_check=[HealthCheck.too_slow])
    SharedRingMachine.TestCase().runTest()


# -- asyncio ----------------------------------------------------------------


def test_async_membership_follows_and_votes(instances: Factory, server: RedisServer) -> None:
    sync = instances()

    async def main() -> None:
        ac = redis.asyncio.Redis(**server.client_kwargs(asyncio=True))
        router = ConsistentHashRouter()
        try:
            async with AsyncRedisMembership(router, ac, resync_interval=RESYNC,
                                            reporter="async") as am:
                assert am.running and am.version == 1
                await am.add_node("a")
                await am.add_node("b", 2.0)
                assert router.weights == {"a": 1.0, "b": 2.0}
                sync.add_node("c")
                await eventually(lambda: "c" in router, "the async instance follows")
                am.mark_down("a", "refused")  # the only reporter: a majority
                await eventually(lambda: "a" not in router, "its vote takes a out")
                await eventually(lambda: "a" not in sync.router, "everywhere")
                # mark_up from another thread is safe too
                thread = threading.Thread(target=am.mark_up, args=("a",))
                thread.start()
                thread.join()
                await eventually(lambda: "a" in router and "a" in sync.router,
                                  "a comes back")
                await am.disable_node("b")
                await am.enable_node("b")
                await am.remove_node("c")
                with pytest.raises(KeyError):
                    await am.remove_node("c")
                assert (await am.refresh()).version == am.version
                am.mark_down("b", "timeout")
                await am.flush()
                await eventually(lambda: "b" not in router, "b is out")
            assert not am.running
            # stopping withdrew the only vote on b; the sync sweep restores it
            wait_until(lambda: "b" in sync.router, "b comes back when its voter leaves")
        finally:
            await ac.aclose()

    asyncio.run(main())
    assert same_ring(sync) and sync.router.weights == {"a": 1.0, "b": 2.0}


# -- outages, in one process ------------------------------------------------


def test_outage_in_one_process(own_instances: Factory, own_server: RedisServer,
                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="chash.membership")
    m1, m2 = own_instances(), own_instances()
    m1.add_node("a")
    m1.add_node("b")
    before = m1.router.fingerprint()
    wait_until(lambda: same_ring(m1, m2), "both hold a and b")
    own_server.stop()
    wait_until(lambda: not m1.connected and not m2.connected, "both notice the outage")
    outages = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(outages) == 2 and all(r.levelno == logging.WARNING for r in outages)
    # Routing goes on, health votes are taken quietly, operators are told.
    assert m1.router.get_target_node("user:1") in ("a", "b")
    m1.mark_up("a")
    m1.mark_up("b")
    with pytest.raises(redis.ConnectionError):
        m1.add_node("c")
    assert m1.router.fingerprint() == before

    own_server.start()  # empty: it lost the ring
    wait_until(lambda: m1.connected and m2.connected, "both reconnect")
    wait_until(lambda: same_ring(m1, m2) and m1.router.fingerprint() == before
               and m1.state == m2.state, "both hold the last known ring again")
    assert any("restored it" in r.getMessage() for r in caplog.records)
    assert any("reachable again" in r.getMessage() for r in caplog.records)
    m2.add_node("c")
    wait_until(lambda: "c" in m1.router, "changes flow again")


def test_async_outage(own_server: RedisServer) -> None:
    async def main() -> None:
        ac = redis.asyncio.Redis(**own_server.client_kwargs(asyncio=True))
        router = ConsistentHashRouter()
        router.add_service_node("a")
        try:
            async with AsyncRedisMembership(router, ac, resync_interval=RESYNC,
                                            bootstrap=True) as am:
                before = router.fingerprint()
                own_server.stop()
                await eventually(lambda: not am.connected, "the outage is noticed")
                am.mark_down("a", "refused")  # kept until Redis is back
                assert router.get_target_node("k") == "a"
                assert router.fingerprint() == before
                own_server.start()
                await eventually(lambda: am.connected, "it reconnects")
                await eventually(lambda: "a" not in router,
                                  "the vote made during the outage counts")
                assert am.version == 3  # re-created (2), then the vote (3)
        finally:
            await ac.aclose()

    asyncio.run(main())


def test_start_during_an_outage_keeps_the_router(own_server: RedisServer) -> None:
    own_server.stop()
    c = redis.Redis(**own_server.client_kwargs())
    router = ConsistentHashRouter()
    router.add_service_node("a")
    m = RedisMembership(router, c, resync_interval=RESYNC, bootstrap=True)
    try:
        m.start()
        assert not m.connected and router.weights == {"a": 1.0}
        own_server.start()
        wait_until(lambda: m.connected and m.version == 1, "it seeds the ring once Redis is up")
        assert c.hgetall("chash:{default}:nodes") == {b"a": b"1.0"}
    finally:
        m.stop()
        c.close()


# -- separate processes -----------------------------------------------------


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., list[Worker]]]:
    """Gateway processes (tests/_support/membership_procs.py)."""
    yield from worker_factory(tmp_path)


def test_processes_converge(workers: Callable[..., list[Worker]], client: redis.Redis,
                            server: RedisServer) -> None:
    gw = workers(server.port, 3)
    gw[0].call("add", node="a")
    gw[1].call("add", node="b", weight=2.0)
    gw[2].call("add", node="c", weight=0.5)
    ring = {"a": 1.0, "b": 2.0, "c": 0.5}
    converge(gw, ring, "adds from three gateways reach all of them")
    gw[1].call("add", node="a", weight=3.0)
    ring["a"] = 3.0
    converge(gw, ring, "a weight change reaches all")
    gw[2].call("remove", node="b")
    del ring["b"]
    converge(gw, ring, "a removal reaches all")
    gw[0].call("disable", node="c")
    converge(gw, {"a": 3.0}, "a disabled node leaves every ring")
    gw[0].call("enable", node="c")
    converge(gw, ring, "an enabled node returns to every ring")

    gw[1].call("mark_up", node="a")
    gw[1].call("flush")
    gw[2].call("mark_up", node="a")
    gw[2].call("flush")
    gw[0].call("mark_down", node="a")
    gw[0].call("flush")
    converge(gw, ring, "one down vote of three keeps a in")
    gw[2].call("mark_down", node="a")
    converge(gw, {"c": 0.5}, "two down votes of three take a out everywhere")
    gw[0].call("mark_up", node="a")
    converge(gw, ring, "a majority of up votes brings a back")


def test_concurrent_writers_lose_no_update(workers: Callable[..., list[Worker]],
                                           client: redis.Redis, server: RedisServer) -> None:
    gw = workers(server.port, 3)
    start_version = gw[0].status()["version"]
    count = 25
    at = time.time() + 0.5
    for i, g in enumerate(gw):
        g.send("burst", prefix=f"w{i}-", count=count, at=at)
    for g in gw:
        assert g.answer(deadline=60)["errors"] == []
    ring = {f"w{i}-{j}": 2.0 for i in range(3) for j in range(count)}
    converge(gw, ring, "every write of every writer reaches every gateway")
    # Each add and each reweigh bumped the version exactly once.
    assert gw[0].status()["version"] == start_version + 2 * 3 * count
    raw: dict[bytes, bytes] = client.hgetall("chash:{default}:nodes")  # type: ignore[assignment]
    stored = {k.decode(): float(v) for k, v in raw.items()}
    assert stored == ring


def test_redis_restart_mid_run(workers: Callable[..., list[Worker]],
                               own_server: RedisServer) -> None:
    gw = workers(own_server.port, 3)
    gw[0].call("add", node="a")
    gw[1].call("add", node="b", weight=2.0)
    gw[2].call("add", node="c")
    ring = {"a": 1.0, "b": 2.0, "c": 1.0}
    converge(gw, ring, "the ring before the outage")

    own_server.stop()
    wait_until(lambda: not any(g.status()["connected"] for g in gw),
               "every gateway notices the outage")
    counts = [g.status()["lookups"] for g in gw]
    wait_until(lambda: all(g.status()["lookups"] > n + 1000 for g, n in zip(gw, counts, strict=True)),
               "every gateway keeps routing during the outage")
    assert all(s["fingerprint"] == fingerprint_of(ring) for s in (g.status() for g in gw))
    for g in gw:
        assert "unreachable" in g.log()

    own_server.start()  # without the ring: it was not persisted
    wait_until(lambda: all(g.status()["connected"] for g in gw), "every gateway reconnects")
    converge(gw, ring, "the gateways re-create the ring they knew")
    assert len({g.status()["epoch"] for g in gw}) == 1
    gw[1].call("add", node="d")
    ring["d"] = 1.0
    converge(gw, ring, "changes after the restart reach every gateway")


def test_haproxy_ids_are_numbered_in_the_shared_order_on_every_instance(instances: Factory) -> None:
    # HAProxy numbers servers in config order and keys their points by the
    # number: an instance that saw b come and go and one that joined after
    # must hold the same ids, those HAProxy gives a config listing a, c.
    m1 = instances(ConsistentHashRouter(layout="haproxy"), name="haproxy-ids")
    for node in ("a", "b", "c"):
        m1.add_node(node)
    m1.remove_node("b")
    m2 = instances(ConsistentHashRouter(layout="haproxy"), name="haproxy-ids")
    for m in (m1, m2):
        wait_until(lambda m=m: m.router.ids == {"a": 1, "c": 2}, "ids as HAProxy numbers a, c")
    m2.add_node("d", 2.0)
    for m in (m1, m2):
        wait_until(lambda m=m: m.router.ids == {"a": 1, "c": 2, "d": 3}, "d numbered after c")
    assert m1.router == m2.router and same_ring(m1, m2)


@pytest.mark.parametrize("layout,nodes", [("varnish", ["be0", "be1", "be2"]),
                                          ("nghttpx", ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"])])
def test_the_program_layouts_share_their_rings_in_add_order(instances: Factory, layout: str,
                                                           nodes: list[str]) -> None:
    # Varnish and nghttpx give a shared point to the backend listed first:
    # every instance holds the nodes in the shared order, so the same ring.
    m1 = instances(ConsistentHashRouter(layout=layout), name=f"{layout}-order")
    for node in nodes:
        m1.add_node(node)
    m1.remove_node(nodes[0])
    m1.add_node(nodes[0])
    m2 = instances(ConsistentHashRouter(layout=layout), name=f"{layout}-order")
    want = [*nodes[1:], nodes[0]]
    for m in (m1, m2):
        wait_until(lambda m=m: m.router.nodes == want, f"the {layout} ring in the shared order")
    assert m1.router == m2.router and same_ring(m1, m2)
    assert m1.router.fingerprint() == m2.router.fingerprint()
    if layout == "varnish":
        m2.add_node("be3", 2.5)
        for m in (m1, m2):
            wait_until(lambda m=m: m.router.points.get("be3") == 167, "be3 at 67 x 2.5 points")
    else:
        with pytest.raises(ValueError, match="no weights"):
            m2.add_node("10.0.0.4:80", 2.0)
        with pytest.raises(ValueError, match="nghttpx layout names a backend"):
            m2.add_node("backend.test:80")


def test_a_shared_ring_refuses_the_other_routers(server: RedisServer) -> None:
    from chash import MaglevRouter, RendezvousRouter

    for router in (MaglevRouter(), RendezvousRouter()):
        with pytest.raises(TypeError, match="ConsistentHashRouter"):
            RedisMembership(router, redis.Redis(port=server.port), name="other")  # type: ignore[arg-type]
