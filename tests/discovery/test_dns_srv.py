"""DnsSrvDiscovery against a real dnsmasq whose records change under it.

One dnsmasq serves the module (tests/_support/dns_server.py, TTL 1 s); each
test serves its own record set.  The rules from SRV records to nodes are
also tested without a server (chash.discovery.records).
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from _support.dns_server import DnsServer, running_dns
from _support.waiting import wait_until
from chash import ConsistentHashRouter
from chash.discovery import DiscoveryError, DnsSrvDiscovery
from chash.discovery.records import ZERO_WEIGHT, SrvRecord, nodes_of
from chash.health import LocalMembership

pytest.importorskip("dns.resolver", reason="dnspython not installed: pip install 'chash-router[dns]'")

NAME = "_http._tcp.users.example"
BASE = [(NAME, "b1.example", 8080, 10, 10), (NAME, "b2.example", 8081, 10, 30),
        (NAME, "spare.example", 9000, 20, 5)]
IN_SERVICE = {"b1.example:8080": 10.0, "b2.example:8081": 30.0}


@pytest.fixture(scope="module")
def dns() -> Iterator[DnsServer]:
    yield from running_dns(ttl=1)


@pytest.fixture
def served(dns: DnsServer) -> DnsServer:
    dns.serve(BASE)
    return dns


def discovery(dns: DnsServer, **kwargs: Any) -> DnsSrvDiscovery:
    # A generous timeout: on a loaded machine a 0.5 s query to the local
    # dnsmasq once went unanswered, and the refresh kept the last set.
    return DnsSrvDiscovery(NAME, nameservers=[dns.nameserver], timeout=5.0, **kwargs)


# -- records to nodes, without a server ---------------------------------------

def test_the_lowest_priority_is_in_service_in_proportion_to_its_weights() -> None:
    records = [SrvRecord(10, 10, 80, "a.example."), SrvRecord(10, 30, 80, "b.example."),
               SrvRecord(20, 50, 80, "backup.example.")]
    assert nodes_of(records) == {"a.example:80": 10.0, "b.example:80": 30.0}
    assert nodes_of(records[2:]) == {"backup.example:80": 50.0}
    assert nodes_of([SrvRecord(1, 0, 80, "a."), SrvRecord(1, 0, 81, "a.")]) == \
        {"a:80": 1.0, "a:81": 1.0}
    assert nodes_of([SrvRecord(1, 0, 80, "a."), SrvRecord(1, 5, 81, "b.")]) == \
        {"a:80": ZERO_WEIGHT, "b:81": 5.0}
    assert nodes_of([SrvRecord(1, 2, 80, "a."), SrvRecord(1, 3, 80, "A.")]) == {"a:80": 5.0}
    assert nodes_of([SrvRecord(0, 1, 80, "."), SrvRecord(5, 1, 80, "b.")]) == {"b:80": 1.0}
    assert nodes_of([]) == {}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="IP address"):
        DnsSrvDiscovery(NAME, nameservers=["dns.example"])
    with pytest.raises(ValueError, match="valid port"):
        DnsSrvDiscovery(NAME, nameservers=["127.0.0.1:99999"])
    with pytest.raises(ValueError, match="interval"):
        DnsSrvDiscovery(NAME, interval=0)
    with pytest.raises(ValueError, match="DNS name"):
        DnsSrvDiscovery("")
    with pytest.raises(TypeError, match="cannot follow"):
        DnsSrvDiscovery(NAME, nameservers=["127.0.0.1"]).follow(object())


# -- against dnsmasq ----------------------------------------------------------

def test_resolve_gives_nodes_and_weights(served: DnsServer) -> None:
    found = discovery(served)
    assert found.resolve() == IN_SERVICE
    assert found.next_poll() == 1.0  # the records' TTL
    assert discovery(served, interval=7).next_poll() == 7


def test_a_followed_router_tracks_record_changes_within_a_ttl(served: DnsServer) -> None:
    router = ConsistentHashRouter()
    router.add_service_node("stale:1", 1.0)
    with discovery(served) as found:
        found.follow(router)
        assert router.weights == IN_SERVICE
        # serve() restarts dnsmasq: a lookup caught in the restart (or
        # starved on a loaded machine) waits out its 5 s and the next poll
        # tries again, so the waits leave room for a few such lookups.
        served.serve([(NAME, "b1.example", 8080, 10, 20), (NAME, "b3.example", 8082, 10, 20)])
        wait_until(lambda: router.weights == {"b1.example:8080": 20.0,
                                              "b3.example:8082": 20.0},
                   "the router follows the new set", timeout=30)
        served.serve([(NAME, "spare.example", 9000, 20, 5)])  # only the backup is left
        wait_until(lambda: router.weights == {"spare.example:9000": 5.0},
                   "the backups take over", timeout=30)


def test_outages_keep_the_last_set_and_are_logged_once(
        served: DnsServer, caplog: pytest.LogCaptureFixture) -> None:
    router = ConsistentHashRouter()
    found = discovery(served)
    found.follow(router)
    assert found.refresh() == IN_SERVICE
    with caplog.at_level(logging.INFO, "chash.discovery"):
        caplog.clear()
        served.serve([("_other._tcp.users.example", "x.example", 1, 1, 1)])
        assert found.refresh() == IN_SERVICE  # NXDOMAIN
        assert found.refresh() == IN_SERVICE
        served.serve([], hosts=[NAME])
        with pytest.raises(DiscoveryError, match="empty answer"):
            found.resolve()
        assert found.refresh() == IN_SERVICE
        served.stop()
        assert found.refresh() == IN_SERVICE  # nobody answers
        with pytest.raises(DiscoveryError, match="no nameserver answered"):
            found.resolve()
        served.serve([(NAME, "b1.example", 8080, 10, 10)])
        assert found.refresh() == {"b1.example:8080": 10.0}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "NXDOMAIN" in warnings[0] and "keeping the last known set (2 nodes)" in warnings[0]
    assert "resolves again" in warnings[1]
    assert router.weights == {"b1.example:8080": 10.0}


def test_a_servfail_keeps_the_last_set_and_is_logged_once(
        served: DnsServer, caplog: pytest.LogCaptureFixture) -> None:
    router = ConsistentHashRouter()
    found = discovery(served)
    found.follow(router)
    assert found.refresh() == IN_SERVICE
    before = router.fingerprint()
    with caplog.at_level(logging.INFO, "chash.discovery"):
        caplog.clear()
        served.serve([], failing=["users.example"])  # dnsmasq forwards the name
        with pytest.raises(DiscoveryError, match="SERVFAIL"):
            found.resolve()
        assert found.refresh() == IN_SERVICE
        assert found.refresh() == IN_SERVICE
        assert router.fingerprint() == before
        served.serve(BASE[:1] + BASE[2:])
        assert found.refresh() == {"b1.example:8080": 10.0}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "every nameserver failed the query" in warnings[0] and "answered SERVFAIL" in warnings[0]
    assert "keeping the last known set (2 nodes)" in warnings[0]
    assert "resolves again" in warnings[1]
    assert router.weights == {"b1.example:8080": 10.0}


def test_no_lookup_ever_empties_the_ring(served: DnsServer) -> None:
    served.serve([("_other._tcp.users.example", "x.example", 1, 1, 1)])
    router = ConsistentHashRouter()
    router.add_service_node("seed:1", 1.0)
    found = discovery(served)
    found.follow(router)
    assert found.refresh() is None
    assert router.weights == {"seed:1": 1.0}


def test_a_local_membership_follows_leaving_taken_out_nodes_out(served: DnsServer) -> None:
    router = ConsistentHashRouter()
    local = LocalMembership(router)
    found = discovery(served)
    found.follow(local)
    found.refresh()
    local.mark_down("b1.example:8080", "refused")
    served.serve([(NAME, "b1.example", 8080, 10, 10), (NAME, "b4.example", 8084, 10, 10)])
    found.refresh()
    assert router.weights == {"b4.example:8084": 10.0}
    assert local.taken_out() == {"b1.example:8080": 10.0}
    served.serve([(NAME, "b4.example", 8084, 10, 10)])
    found.refresh()
    assert local.taken_out() == {}  # forgotten: never re-added
    assert router.weights == {"b4.example:8084": 10.0}


def test_listeners_hear_of_each_set_brought_to_the_targets(served: DnsServer) -> None:
    router = ConsistentHashRouter()
    found = discovery(served)
    heard: list[dict[str, float]] = []
    found.add_listener(lambda: heard.append(dict(router.weights)))
    found.follow(router)
    assert heard == []  # nothing resolved yet: nothing brought
    found.refresh()
    assert heard == [IN_SERVICE]
    found.refresh()  # the same set: nothing written, nobody told
    assert heard == [IN_SERVICE]
    with pytest.raises(TypeError, match="callable"):
        found.add_listener(None)  # type: ignore[arg-type]
