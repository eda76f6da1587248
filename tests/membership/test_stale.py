"""Promise 2, never empty and never stuck: an instance cut off from its
store keeps routing on its last ring, says how stale that ring may be
(``stale_seconds``, ``stale_since``), and is in step again within its
resync interval once the store is back.

The bookkeeping with clocks of the test's own, then real stores stopped
and started again (a redis-server, an etcd member) under started
memberships of both stores.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from _support.etcd_server import EtcdCluster, running_cluster
from _support.redis_server import RedisServer, running_server
from _support.waiting import wait_until
from chash import ConsistentHashRouter
from chash.membership.core import MembershipCore
from chash.membership.settings import MembershipSettings


class Clocks:
    def __init__(self) -> None:
        self.mono, self.wall = 100.0, 1_700_000_000.0

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds


def test_stale_counts_from_the_last_answer_while_the_store_is_out() -> None:
    clocks = Clocks()
    core = MembershipCore(ConsistentHashRouter(), MembershipSettings(resync_interval=1.0),
                          clock=lambda: clocks.mono, wall=lambda: clocks.wall)
    assert (core.stale_seconds, core.stale_since) == (0.0, None)
    clocks.advance(5)
    core.answered()
    answered_at = clocks.wall
    clocks.advance(3)
    core.outage(ConnectionError("refused"))
    assert core.stale_since == answered_at
    assert core.stale_seconds == pytest.approx(3.0)
    clocks.advance(10)
    assert core.stale_seconds == pytest.approx(13.0) and core.stale_since == answered_at
    core.answered()
    core.reconnected()
    assert (core.stale_seconds, core.stale_since) == (0.0, None)
    # A call that hangs counts as an outage once it stalls.
    core.exchange_started()
    clocks.advance(core.stall_after + 1)
    assert core.stale_seconds == pytest.approx(core.stall_after + 1)


# -- real stores ------------------------------------------------------------

RESYNC = 0.3


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    yield from running_server()


@pytest.fixture
def etcd() -> Iterator[EtcdCluster]:
    yield from running_cluster(1)


def _router(*nodes: str) -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    for node in nodes:
        router.add_service_node(node)
    return router


def _stale_then_back(membership: Any, stop: Any, start: Any) -> None:
    """Cut ``membership`` off (``stop()``), check it says so and routes on,
    bring the store back (``start()``), check it is in step again."""
    ring = dict(membership.router.weights)
    fingerprint = membership.router.fingerprint()
    assert (membership.stale_seconds, membership.stale_since) == (0.0, None)
    before = time.time()
    stop()
    wait_until(lambda: not membership.connected, "the outage is noticed", timeout=20)
    since = membership.stale_since
    assert since is not None and before - 30 < since <= time.time()
    first = membership.stale_seconds
    assert first > 0
    wait_until(lambda: membership.stale_seconds > first, "stale_seconds grows", timeout=10)
    assert membership.router.weights == ring  # never empty: the last ring routes
    assert membership.router.get_target_node("user:1") in ring
    start()
    wait_until(lambda: membership.connected and membership.stale_seconds == 0.0,
               "in step again", timeout=20)
    assert membership.stale_since is None
    membership.refresh()
    assert membership.router.fingerprint() == fingerprint


def test_a_redis_membership_cut_off_says_how_stale_its_ring_is(
        redis_server: RedisServer) -> None:
    from chash.membership import RedisMembership

    client = redis_server.connect(**redis_server.client_kwargs())
    membership = RedisMembership(_router("a:1", "b:1"), client, bootstrap=True,
                                 resync_interval=RESYNC, vote_ttl=1.0)
    with membership:
        # restart() keeps the port and loses every key: the instance
        # restores the ring it holds.
        _stale_then_back(membership, redis_server.stop, redis_server.start)
    client.close()


def test_an_etcd_membership_cut_off_says_how_stale_its_ring_is(etcd: EtcdCluster) -> None:
    from chash.membership import EtcdMembership

    membership = EtcdMembership(_router("a:1", "b:1"), etcd.url, bootstrap=True,
                                resync_interval=RESYNC, vote_ttl=1.0, timeout=0.5)
    member = etcd.members[0]
    with membership:
        _stale_then_back(membership, member.kill, lambda: etcd.restart(member))
    membership.close()
