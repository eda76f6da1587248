"""Promise 1 with Redis replicas: a change is reported committed only once
a replica acknowledged it (``WAIT``), so a failover cannot lose a change
that an operator was told was made.

A real primary and a real replica (``REPLICAOF``), both started here; the
replica is paused (SIGSTOP: the primary still counts it connected, and it
acknowledges nothing) or stopped.  Through the Python API (both drivers)
and through ``chash ring``.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from _support.redis_server import RedisServer, running_server
from _support.waiting import wait_until
from chash import ConsistentHashRouter
from chash.cli import main
from chash.membership import AsyncRedisMembership, NotReplicatedError, RedisMembership
from chash.membership.redis.store import (
    RedisStore,
    _ReplicaMemory,
    check_replicas,
    replicas_seen,
)
from chash.membership.settings import MembershipSettings

pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")


class Pair:
    """A primary and its replica."""

    def __init__(self, primary: RedisServer, replica: RedisServer) -> None:
        self.primary = primary
        self.replica = replica

    def link(self) -> None:
        """Make ``replica`` a replica of ``primary``, caught up (its first
        sync done: ``online``)."""
        primary = self.primary.connect(decode_responses=True)
        primary.config_set("repl-diskless-sync-delay", 0)
        client = self.replica.connect(decode_responses=True)
        client.execute_command("REPLICAOF", "127.0.0.1", self.primary.port)
        client.close()
        try:
            wait_until(lambda: primary.info("replication").get("slave0", {}).get("state")
                       == "online", "the replica is in sync", timeout=20)
            # After a diskless first sync the primary streams to the replica
            # only once it acknowledged the snapshot (within a second).
            primary.set("warm", "1")
            assert primary.execute_command("WAIT", 1, 20_000) == 1
        finally:
            primary.close()


@pytest.fixture
def pair() -> Iterator[Pair]:
    for primary in running_server():
        for replica in running_server():
            made = Pair(primary, replica)
            made.link()
            yield made  # stopping a paused server resumes it first


def _seed(pair: Pair, ring: str) -> None:
    router = ConsistentHashRouter()
    router.add_service_node("a:1")
    router.add_service_node("b:1")
    seeder = RedisMembership(router, pair.primary.connect(), name=ring, bootstrap=True,
                             min_replicas=0)
    seeder.refresh()
    seeder.client.close()


def _held(server: RedisServer, ring: str) -> set[str]:
    client = server.connect(decode_responses=True)
    try:
        return set(client.hkeys(f"chash:{{{ring}}}:nodes"))
    finally:
        client.close()


def test_a_change_waits_for_the_replica_and_fails_without_it(pair: Pair) -> None:
    _seed(pair, "r")
    client = pair.primary.connect(socket_timeout=5.0)
    membership = RedisMembership(ConsistentHashRouter(), client, name="r",
                                 replica_timeout=0.3)  # min_replicas: 1 replica seen
    membership.refresh()
    version = membership.add_node("c:1")
    assert version == membership.version
    assert "c:1" in _held(pair.replica, "r")  # acknowledged, so on the replica already
    pair.replica.pause()
    with pytest.raises(NotReplicatedError, match="reached 0 of the 1 Redis replicas") as caught:
        membership.add_node("d:1")
    assert (caught.value.acknowledged, caught.value.required) == (0, 1)
    assert membership.version == version  # not applied as committed
    # A change that changes nothing waits for nothing; it gives the ring's
    # version, where the primary (not failed over) kept the change the
    # replica did not acknowledge, as its history says.
    assert membership.add_node("c:1") == version + 1
    assert membership.history()[-1].node == "d:1"
    pair.replica.resume()
    # Gone for good: the primary drops it, but it had one, so a change
    # still needs it (a primary cut off from its replicas keeps failing
    # rather than taking writes a failover would discard).
    pair.replica.stop()
    wait_until(lambda: replicas_seen(client.info("replication")) == 0,
               "the primary saw the replica go", timeout=20)
    with pytest.raises(NotReplicatedError):
        membership.add_node("e:1")
    client.close()


def test_the_memory_of_replicas_is_per_primary() -> None:
    memory = _ReplicaMemory()
    assert memory.required({"master_replid": "p1", "connected_slaves": 0}) == 0
    assert memory.required({"master_replid": "p1", "connected_slaves": 2}) == 1
    assert memory.required({"master_replid": "p1", "connected_slaves": 0}) == 1
    # A replica promoted by a failover has a new replication id.
    assert memory.required({"master_replid": "p2", "connected_slaves": 0}) == 0
    assert memory.required("not a dict") == 0


def test_the_async_driver_waits_alike(pair: Pair) -> None:
    _seed(pair, "ra")
    pair.replica.pause()

    async def main_() -> None:
        import redis.asyncio

        client = redis.asyncio.Redis(host="127.0.0.1", port=pair.primary.port,
                                     socket_timeout=5.0)
        membership = AsyncRedisMembership(ConsistentHashRouter(), client, name="ra",
                                          min_replicas=1, replica_timeout=0.3)
        await membership.refresh()
        with pytest.raises(NotReplicatedError):
            await membership.add_node("c:1")
        pair.replica.resume()
        version = await membership.add_node("d:1")
        assert version == membership.version and "d:1" in membership.router
        await client.aclose()

    asyncio.run(main_())


def test_chash_ring_reports_no_replica_as_not_committed(
        pair: Pair, capsys: pytest.CaptureFixture[str]) -> None:
    _seed(pair, "cli")
    args = ["--redis", pair.primary.url, "--ring", "cli", "--timeout", "1"]
    assert main(["ring", "add", "c:1", *args]) == 0
    assert "committed at version" in capsys.readouterr().out
    pair.replica.pause()
    assert main(["ring", "add", "d:1", *args]) == 1  # the default waits for the replica seen
    out, err = capsys.readouterr()
    assert out == "" and "0 of the 1 Redis replicas" in err and len(err.splitlines()) == 1
    pair.replica.resume()
    pair.replica.stop()
    # Gone: the primary sees no replica, so only an explicit count waits.
    wait_until(lambda: replicas_seen(pair.primary.connect().info("replication")) == 0,
               "the primary saw the replica go", timeout=20)
    assert main(["ring", "add", "e:1", "--redis-min-replicas", "1", *args]) == 1
    assert "not committed" in capsys.readouterr().err
    assert main(["ring", "add", "f:1", *args]) == 0
    assert "committed at version" in capsys.readouterr().out
    assert main(["ring", "add", "g:1", "--redis-min-replicas", "1", "--etcd",
                 "http://127.0.0.1:1"]) == 2


def test_bad_replica_settings_are_refused() -> None:
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="min_replicas"):
            check_replicas(bad, 1.0)  # type: ignore[arg-type]
    for timeout in (0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="replica_timeout"):
            check_replicas(1, timeout)

    class ClusterLike:
        def register_script(self, source: str) -> Any:
            return None

    with pytest.raises((ValueError, TypeError)):
        RedisStore(ClusterLike(), MembershipSettings(), min_replicas=1)
    assert replicas_seen({"connected_slaves": 2}) == 2 and replicas_seen(None) == 0
