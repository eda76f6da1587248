"""EtcdMembership and AsyncEtcdMembership against a real single-member etcd.

The operator calls, votes, refresh() and refusals run with both drivers
(the async one on a loop thread of its own, tests/_support/membership_async.py),
what only the store decides with the threaded one, on one etcd started for the module
(tests/_support/etcd_server.py), emptied before each test; every test runs
against etcd 3.4 and 3.5.  The faults of a 3-member cluster are in
test_etcd_faults.py.
"""
from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from _support.etcd_server import VERSIONS, EtcdCluster, running_cluster
from _support.membership_async import BlockingMembership
from _support.waiting import wait_until
from chash import ConsistentHashRouter

pytest.importorskip("httpx", reason="httpx not installed: pip install 'chash-router[etcd]'")

from chash.membership import AsyncEtcdMembership, EtcdMembership, RingMissingError
from chash.membership.etcd.store import EtcdStore
from chash.membership.etcd.wire import EtcdAuthError, EtcdUnavailable
from chash.membership.settings import MembershipSettings
from chash.membership.store import ReadRing, SubscriptionLost

FAST = {"resync_interval": 0.3, "vote_ttl": 1.0, "timeout": 1.0}
#: For the tests of what the store does, the same with either driver: the
#: threaded one only (the operator calls, votes, refresh and refusals run
#: with both).
SYNC_ONLY = pytest.mark.parametrize("make", ["sync"], indirect=True)


@pytest.fixture(scope="module", params=VERSIONS, ids=lambda v: f"etcd{v}")
def etcd(request: pytest.FixtureRequest) -> Iterator[EtcdCluster]:
    """One etcd member of each version for the module (skips without that
    etcd, fails in CI)."""
    yield from running_cluster(1, request.param)


@pytest.fixture
def cluster(etcd: EtcdCluster) -> EtcdCluster:
    etcd.wipe()
    return etcd


Make = Callable[..., Any]


@pytest.fixture(params=["sync", "async"])
def make(request: pytest.FixtureRequest, cluster: EtcdCluster) -> Iterator[Make]:
    """``make(router, bootstrap=..., **settings)``: a started membership of
    ring "t" with the driver of the parameter; stopped at teardown."""
    made: list[Any] = []

    def build(router: ConsistentHashRouter | None = None, start: bool = True,
              **kwargs: Any) -> Any:
        router = router if router is not None else ConsistentHashRouter()
        options = {**FAST, **kwargs}
        if request.param == "sync":
            membership: Any = EtcdMembership(router, cluster.urls, "t", **options)
            made.append(membership.close)
        else:
            membership = BlockingMembership(
                lambda: AsyncEtcdMembership(router, cluster.url, "t", **options))
            made.append(membership.close)
        if start:
            membership.start()
        return membership

    yield build
    for stop in made:
        stop()


def seeded_router(*nodes: str) -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    for node in nodes:
        router.add_service_node(node, 1.0)
    return router


def agree(*members: Any, what: str = "the instances agree") -> None:
    """Wait until every instance holds the same ring at the same version."""
    def same() -> bool:
        fingerprints = {m.router.fingerprint() for m in members}
        versions = {m.version for m in members}
        return len(fingerprints) == 1 and len(versions) == 1
    wait_until(same, what, timeout=15)


def ring_value(cluster: EtcdCluster) -> tuple[dict[str, Any], int]:
    reply = cluster.post("/v3/kv/range", {"key": base64.b64encode(b"chash/t/ring").decode()})
    kv = reply["kvs"][0]
    return json.loads(base64.b64decode(kv["value"])), int(kv["mod_revision"])


def put_ring(cluster: EtcdCluster, doc: dict[str, Any]) -> None:
    cluster.post("/v3/kv/put", {"key": base64.b64encode(b"chash/t/ring").decode(),
                                "value": base64.b64encode(json.dumps(doc).encode()).decode()})


def test_two_instances_follow_every_operator_change(make: Make) -> None:
    a = make(seeded_router("n1", "n2", "n3"), bootstrap=True)
    b = make()
    agree(a, b)
    assert b.router.weights == {"n1": 1.0, "n2": 1.0, "n3": 1.0}
    a.add_node("n4", 2.5)
    wait_until(lambda: b.router.weights.get("n4") == 2.5, "b has n4")
    b.disable_node("n1", "maintenance")
    wait_until(lambda: "n1" not in a.router, "a took n1 out")
    assert a.state.disabled == {"n1": "maintenance"}
    assert "n1" not in a.watched_nodes()
    a.enable_node("n1")
    b.remove_node("n2")
    agree(a, b)
    assert a.router.weights == {"n1": 1.0, "n3": 1.0, "n4": 2.5}
    with pytest.raises(KeyError):
        a.remove_node("nope")
    a.disable_node("n1")
    a.disable_node("n3")
    with pytest.raises(ValueError, match="pass force=True"):
        a.disable_node("n4")  # the last node in service
    assert a.router.weights == {"n4": 2.5}
    a.enable_node("n1")
    a.enable_node("n3")
    agree(a, b)
    assert b.router.weights == {"n1": 1.0, "n3": 1.0, "n4": 2.5}


def test_health_votes_take_a_node_out_by_majority(make: Make) -> None:
    a = make(seeded_router("x", "y", "z"), bootstrap=True, reporter="a")
    b = make(reporter="b")
    agree(a, b)
    b.mark_up("x")
    b.flush()
    a.mark_down("x", "refused")
    a.flush()
    assert "x" in a.router and "x" in b.router  # 1 of 2 live reporters: no majority
    b.mark_down("x", "timeout")
    b.flush()
    wait_until(lambda: "x" not in a.router and "x" not in b.router, "x out everywhere")
    verdict = a.state.down["x"]
    assert verdict.votes == 2 and verdict.reporters == 2
    a.mark_up("x")
    b.mark_up("x")
    a.flush()
    b.flush()
    wait_until(lambda: "x" in a.router and "x" in b.router, "x back everywhere")
    agree(a, b)


@SYNC_ONLY
def test_a_joining_instance_may_not_create_the_ring(make: Make) -> None:
    lone = make(seeded_router("n1"), start=False)
    lone.start()  # waits for a ring instead of creating one
    assert lone.state is None and lone.router.weights == {"n1": 1.0}
    with pytest.raises(RingMissingError, match="missing in etcd"):
        lone.add_node("n2")
    creator = make(seeded_router("m1", "m2"), bootstrap=True)
    wait_until(lambda: lone.state is not None, "the waiting instance synced")
    agree(lone, creator)
    assert lone.router.weights == {"m1": 1.0, "m2": 1.0}


@SYNC_ONLY
def test_other_shared_settings_are_refused(make: Make) -> None:
    make(seeded_router("n1"), bootstrap=True)
    with pytest.raises(ValueError, match="same router settings"):
        make(ConsistentHashRouter(layout="ketama"))


@SYNC_ONLY
def test_a_lost_ring_is_restored_by_an_instance_that_held_it(
        make: Make, cluster: EtcdCluster) -> None:
    a = make(seeded_router("n1", "n2"), bootstrap=True)
    b = make()
    agree(a, b)
    cluster.wipe()
    wait_until(lambda: cluster.post("/v3/kv/range", {"key": base64.b64encode(
        b"chash/t/ring").decode()}).get("kvs"), "the ring was restored")
    agree(a, b)
    assert b.router.weights == {"n1": 1.0, "n2": 1.0}


@SYNC_ONLY
def test_bad_entries_are_skipped_one_by_one(make: Make, cluster: EtcdCluster,
                                            caplog: pytest.LogCaptureFixture) -> None:
    a = make(seeded_router("n1", "n2"), bootstrap=True)
    doc, _ = ring_value(cluster)
    doc["nodes"]["bad"] = "-3"
    doc["nodes"]["n3"] = "2.0"
    doc["version"] += 1
    doc.pop("digest", None)
    with caplog.at_level(logging.ERROR, "chash.membership"):
        put_ring(cluster, doc)
        wait_until(lambda: "n3" in a.router, "the good entry is applied")
    assert "bad" not in a.router
    assert sum("skipped unreadable entry nodes['bad']" in r.getMessage()
               for r in caplog.records) == 1


def test_refresh_ends_on_the_stored_ring(make: Make, cluster: EtcdCluster) -> None:
    """etcd went back (a restored backup) and then moved on to the version
    an idle instance applied, with other content: refresh() follows it."""
    writer = make(seeded_router("n1", "n2"), bootstrap=True, start=False)
    writer.refresh()
    idle = make(start=False)
    idle.refresh()
    old, _ = ring_value(cluster)
    writer.add_node("n3")
    idle.refresh()
    assert idle.version == old["version"] + 1 and "n3" in idle.router
    put_ring(cluster, old)  # the backup: back one version
    other = make(start=False)
    other.refresh()
    other.add_node("other")  # moves on to idle's version with other content
    doc, _ = ring_value(cluster)
    assert doc["version"] == idle.version
    idle.refresh()
    assert idle.router.weights == {"n1": 1.0, "n2": 1.0, "other": 1.0}
    assert idle.router.fingerprint() == other.router.fingerprint()


def test_start_refuses_a_user_without_the_role(make: Make, cluster: EtcdCluster) -> None:
    cluster.post("/v3/auth/user/add", {"name": "norole", "password": "pw"})
    cluster.enable_auth()
    try:
        refused = make(seeded_router("n1"), bootstrap=True, username="norole", password="pw",
                       start=False)
        with pytest.raises(EtcdAuthError, match="permission denied") as caught:
            refused.start()
        assert refused.is_refusal(caught.value)
        assert not refused.is_refusal(EtcdUnavailable("no etcd endpoint answered"))
        with pytest.raises(EtcdAuthError, match="authentication failed"):
            make(seeded_router("n1"), bootstrap=True, username="norole", password="wrong")
        with pytest.raises(EtcdAuthError, match=r"user name is empty.*give a username"):
            make(seeded_router("n1"), bootstrap=True)  # no credentials at all
        member = make(seeded_router("n1"), bootstrap=True, username="root",
                      password="rootpw")
        assert member.router.weights == {"n1": 1.0} and member.version == 1
    finally:
        cluster.disable_auth()
        cluster.post("/v3/auth/user/delete", {"name": "norole"})
        cluster.post("/v3/auth/user/delete", {"name": "root"})


def test_an_outage_is_logged_when_it_starts_and_when_it_ends(
        make: Make, cluster: EtcdCluster, caplog: pytest.LogCaptureFixture) -> None:
    a = make(seeded_router("n1", "n2"), bootstrap=True)
    assert a.connected
    member = cluster.members[0]
    with caplog.at_level(logging.WARNING, "chash.membership"):
        caplog.clear()
        member.kill()
        try:
            wait_until(lambda: not a.connected, "the outage was seen")
            wait_until(lambda: any("unreachable" in r.getMessage() for r in caplog.records),
                       "the outage was logged")
            assert a.router.weights == {"n1": 1.0, "n2": 1.0}  # routing goes on
        finally:
            cluster.restart(member)
        wait_until(lambda: a.connected, "the instance is in step again")
        wait_until(lambda: any("reachable again" in r.getMessage() for r in caplog.records),
                   "the end of the outage was logged")
    messages = [r.getMessage() for r in caplog.records]
    started = [m for m in messages if "etcd unreachable for ring t" in m]
    ended = [m for m in messages if "etcd reachable again for ring t" in m]
    assert len(started) == 1 and len(ended) == 1, messages
    assert "routing on the last known ring, version 1" in started[0]
    a.add_node("n3")
    assert a.router.weights == {"n1": 1.0, "n2": 1.0, "n3": 1.0}


@SYNC_ONLY
def test_a_watch_from_a_compacted_revision_asks_for_a_full_read(
        make: Make, cluster: EtcdCluster) -> None:
    a = make(seeded_router("n1"), bootstrap=True)
    b = make()
    agree(a, b)
    client = _sync_client(cluster)
    store = EtcdStore(client, MembershipSettings(name="t"))
    store.run(ReadRing())
    seen = store._watched.revision
    for i in range(3):
        a.add_node(f"later{i}")
    cluster.compact()
    store._watched.revision = seen  # a watcher that was away since
    subscription = store.subscribe(False)
    try:
        notices = [subscription.receive(5.0) for _ in range(1)]
    finally:
        subscription.close()
        client.close()
    assert isinstance(notices[0], SubscriptionLost)
    assert store._watched.revision == 0  # the next watch starts from now
    agree(a, b)


def _sync_client(cluster: EtcdCluster) -> Any:
    from chash.membership.etcd.client import EtcdClient
    return EtcdClient(cluster.urls, timeout=1.0)


def test_bad_arguments_are_refused_before_any_io() -> None:
    router = ConsistentHashRouter()
    with pytest.raises(ValueError, match="not an http"):
        EtcdMembership(router, "127.0.0.1:2379")
    with pytest.raises(ValueError, match="at least one"):
        EtcdMembership(router, [])
    with pytest.raises(ValueError, match="both username and password"):
        EtcdMembership(router, "http://127.0.0.1:1", username="u")
    with pytest.raises(TypeError, match="ConsistentHashRouter"):
        EtcdMembership(object(), "http://127.0.0.1:1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        AsyncEtcdMembership(router, "http://127.0.0.1:1", timeout=0)


def test_an_async_watch_from_a_compacted_revision_asks_for_a_full_read(
        cluster: EtcdCluster) -> None:
    """The asyncio store's watch, as the threaded one's above."""
    import asyncio

    from chash.membership.etcd.client import AsyncEtcdClient
    from chash.membership.etcd.store import AsyncEtcdStore

    writer = EtcdMembership(seeded_router("n1"), cluster.urls, "t", bootstrap=True, **FAST)
    try:
        writer.refresh()

        async def main() -> tuple[object, int]:
            client = AsyncEtcdClient(cluster.urls, timeout=1.0)
            store = AsyncEtcdStore(client, MembershipSettings(name="t"))
            try:
                await store.run(ReadRing())
                seen = store._watched.revision
                for i in range(3):
                    await asyncio.to_thread(writer.add_node, f"later{i}")
                await asyncio.to_thread(cluster.compact)
                store._watched.revision = seen  # a watcher that was away since
                subscription = await store.subscribe(False)
                try:
                    notice = await subscription.receive(5.0)
                finally:
                    await subscription.close()
                return notice, store._watched.revision
            finally:
                await client.aclose()

        notice, revision = asyncio.run(main())
        assert isinstance(notice, SubscriptionLost)
        assert revision == 0
    finally:
        writer.close()


def test_operator_calls_return_their_version_and_the_history_keeps_it(make: Make) -> None:
    a = make(seeded_router("n1", "n2"), bootstrap=True)
    b = make()
    agree(a, b)
    first = a.add_node("n3", 2.0)
    assert first == a.version
    second = b.disable_node("n1", "maintenance")
    assert second == first + 1 == b.version
    assert a.add_node("n3", 2.0) == second  # nothing to change: the ring's version
    changes = b.history()
    assert [(c.version, c.action, c.node, c.value) for c in changes] == [
        (1, "seed", "", "2"), (first, "add", "n3", "2.0"), (second, "disable", "n1",
                                                             "maintenance")]
