"""Several instances following one SRV name into one shared ring (etcd,
Redis): each writes only what differs from the ring, so the versions do
not flap however often they look the name up."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from _support.dns_server import DnsServer, running_dns
from _support.etcd_server import EtcdCluster, running_cluster
from _support.redis_server import RedisServer, running_server
from _support.waiting import wait_until
from chash import ConsistentHashRouter
from chash.discovery import DnsSrvDiscovery

pytest.importorskip("dns.resolver", reason="dnspython not installed: pip install 'chash-router[dns]'")

NAME = "_http._tcp.users.example"


@pytest.fixture(scope="module")
def dns() -> Iterator[DnsServer]:
    yield from running_dns(ttl=1)


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    pytest.importorskip("httpx", reason="httpx not installed: pip install 'chash-router[etcd]'")
    yield from running_cluster(1)


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")
    yield from running_server()


@pytest.fixture(params=["etcd", "redis"])
def shared(request: pytest.FixtureRequest, dns: DnsServer) -> Iterator[Callable[..., Any]]:
    """``shared(bootstrap)``: a started membership of one ring in the store
    of the parameter; closed at teardown."""
    made: list[Callable[[], None]] = []
    if request.param == "etcd":
        etcd = request.getfixturevalue("etcd")
        etcd.wipe()
        from chash.membership import EtcdMembership

        def build(bootstrap: bool = False) -> Any:
            membership = EtcdMembership(ConsistentHashRouter(), etcd.urls, "dns",
                                        bootstrap=bootstrap, resync_interval=0.3, timeout=1.0)
            made.append(membership.close)
            membership.start()
            return membership
    else:
        server = request.getfixturevalue("redis_server")
        from chash.membership import RedisMembership

        client = server.connect(**server.client_kwargs())
        client.flushall()
        made.append(client.close)

        def build(bootstrap: bool = False) -> Any:
            membership = RedisMembership(ConsistentHashRouter(), client, "dns",
                                         bootstrap=bootstrap, resync_interval=0.3)
            made.insert(0, membership.stop)
            membership.start()
            return membership
    yield build
    for close in made:
        close()


def test_instances_following_one_name_into_one_ring_do_not_flap(
        shared: Callable[..., Any], dns: DnsServer) -> None:
    dns.serve([(NAME, "b1.example", 80, 1, 10), (NAME, "b2.example", 80, 1, 20)])
    a, b = shared(bootstrap=True), shared()
    found = [DnsSrvDiscovery(NAME, nameservers=[dns.nameserver], timeout=5.0)
             for _ in range(2)]
    found[0].follow(a)
    found[1].follow(b)
    for _ in range(3):
        for one in found:
            one.refresh()
    want = {"b1.example:80": 10.0, "b2.example:80": 20.0}
    wait_until(lambda: a.router.weights == want == b.router.weights, "both follow the name")
    settled = a.version
    assert settled == 3  # the seed (empty), then one write per node
    for _ in range(3):
        for one in found:
            one.refresh()
    assert a.version == settled
    dns.serve([(NAME, "b2.example", 80, 1, 20), (NAME, "b3.example", 80, 1, 5)])
    for one in found:
        one.refresh()
    want = {"b2.example:80": 20.0, "b3.example:80": 5.0}
    wait_until(lambda: a.router.weights == want == b.router.weights, "both follow the change")
    wait_until(lambda: a.version == b.version, "one version")
    assert a.version == settled + 2  # b3 added, b1 removed: once, by whoever came first


def test_a_set_that_could_not_be_written_is_written_at_the_next_lookup(
        shared: Callable[..., Any], dns: DnsServer) -> None:
    dns.serve([(NAME, "b1.example", 80, 1, 10)])
    joiner = shared()  # no ring yet, and it may not create one
    found = DnsSrvDiscovery(NAME, nameservers=[dns.nameserver], timeout=5.0)
    found.follow(joiner)
    assert found.refresh() == {"b1.example:80": 10.0}
    assert joiner.state is None  # the write was refused: RingMissingError
    creator = shared(bootstrap=True)
    wait_until(lambda: joiner.state is not None, "the joiner synced")
    found.refresh()  # the same set, not yet written: written now
    wait_until(lambda: creator.router.weights == {"b1.example:80": 10.0}, "the set is in")
