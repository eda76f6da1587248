"""Shared membership under faults: Redis going back in time, losing data,
holding unreadable entries, hanging or refusing us.

Every test runs gateway processes (tests/_support/membership_worker.py) against a
real redis-server, once with the threaded driver (``RedisMembership``) and
once with the asyncio one (``AsyncRedisMembership``), and ends with every
instance on the same ring and none lost.  The faults are made the way
Redis would make them: a rollback is one transaction (a replica's state is
one snapshot), an eviction deletes one whole key.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _support.membership_procs import Gateways, add_all, converge, fingerprint_of
from _support.redis_server import RedisServer
from _support.waiting import eventually, run, wait_until
from chash import ConsistentHashRouter

pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")
import redis
import redis.asyncio

from chash.membership import (
    AsyncRedisMembership,
    RedisMembership,
    RingMissingError,
)

META, NODES, VOTES, DOWN, ORDER = (f"chash:{{default}}:{part}" for part in
                                   ("meta", "nodes", "votes", "down", "order"))


def _client(srv: RedisServer) -> redis.Redis:
    """An admin client of ``srv``, replies as str."""
    admin: redis.Redis = srv.connect(decode_responses=True, socket_timeout=10.0)
    return admin


# -- 1. same version, different ring ----------------------------------------


def test_redis_going_back_never_splits_the_ring(gateways: Gateways, server: RedisServer,
                                                text_client: redis.Redis) -> None:
    gw = gateways(server.port, 3)
    gw[0].call("add", node="a")
    at_two, order_at_two = text_client.hgetall(META), text_client.hgetall(ORDER)
    ring = {"a": 1.0, "b": 1.0, "c": 1.0}
    add_all(gw, {"b": 1.0, "c": 1.0})
    converge(gw, ring, "the ring before the faults")
    first_epoch = gw[0].status()["epoch"]

    # Redis goes back to version 2 (a failover that lost two writes) while
    # gw2 sleeps: the others notice the version going back and start a new
    # epoch, which gw2 reads when it wakes whatever version it holds.
    gw[2].pause()
    rollback = text_client.pipeline(transaction=True)
    rollback.delete(NODES)
    rollback.hset(NODES, "a", "1.0")
    rollback.delete(ORDER)
    rollback.hset(ORDER, mapping=order_at_two)
    rollback.hset(META, mapping=at_two)
    rollback.execute()
    wait_until(lambda: all(g.status()["epoch"] != first_epoch for g in gw[:2]),
               "the instances awake start a new epoch")
    gw[2].resume()
    converge(gw, {"a": 1.0}, "every instance follows Redis back")
    second_epoch = gw[0].status()["epoch"]
    assert {g.status()["epoch"] for g in gw} == {second_epoch}
    assert any("went back from version" in g.log() for g in gw)

    # Redis goes back and as many writes follow as were lost, faster than
    # any check: the same version now holds another ring (its digest
    # stamped by the writer).  Content, not the version, tells.
    add_all(gw, ring)
    converge(gw, ring, "a, b and c again")
    version = gw[0].status()["version"]
    other = {"a": 1.0, "d": 1.0, "e": 1.0}
    rewrite = text_client.pipeline(transaction=True)
    rewrite.delete(NODES)
    rewrite.hset(NODES, mapping={node: repr(weight) for node, weight in other.items()})
    rewrite.delete(ORDER)
    rewrite.hset(ORDER, mapping={node: seq for seq, node in enumerate(other, 1)})
    rewrite.hset(META, mapping={"version": version, "count": 3,
                                "digest": fingerprint_of(other)})
    rewrite.execute()
    converge(gw, other, "every instance adopts what Redis holds at that version")
    assert any("another ring at version" in g.log() for g in gw)
    assert len({g.status()["epoch"] for g in gw} - {second_epoch}) == 1
    gw[1].call("add", node="f")
    converge(gw, {**other, "f": 1.0}, "and changes flow on")


# -- 2. a process that never synced never wipes the ring ---------------------


def test_unsynced_instance_never_wipes_the_ring(gateways: Gateways,
                                                own_server: RedisServer) -> None:
    gw = gateways(own_server.port, 2)
    ring = {f"n{i}": 1.0 + i % 3 for i in range(10)}
    add_all(gw, ring)
    converge(gw, ring, "ten nodes everywhere")
    # Redis restarts empty while the running gateways sleep; a fresh gateway
    # (never synced, not told to bootstrap) starts and writes.
    for g in gw:
        g.pause()
    own_server.restart()
    fresh = gateways(own_server.port, 1, options=("--no-bootstrap",))[0]
    fresh.send("add", node="new")
    assert fresh.answer() == {"error": "RingMissingError: ring 'default' is missing in "
                                       "Redis; an instance that holds it will restore it"}
    assert fresh.status()["weights"] == {}
    for g in gw:
        g.resume()
    converge([*gw, fresh], ring, "the running gateways restore the ring, the fresh one adopts it")
    fresh.call("add", node="new")
    converge([*gw, fresh], {**ring, "new": 1.0}, "the fresh gateway's change reaches all")
    assert "waiting for it" in fresh.log()
    assert any("restored it from the last known ring" in g.log() for g in gw)


# -- 3. scripts validate before they write -----------------------------------


def test_unreadable_entries_never_half_apply_a_script(gateways: Gateways, server: RedisServer,
                                                      text_client: redis.Redis) -> None:
    gw = gateways(server.port, 3)
    ring = {"a": 1.0, "b": 1.0, "c": 1.0}
    add_all(gw, ring)
    converge(gw, ring, "a, b, c")
    version = gw[0].status()["version"]
    text_client.hset(VOTES, "a", "not json")
    text_client.hset(VOTES, "c", '{"gw9": ["down", "yesterday"]}')
    # Two of three vote b down, with votes on an unreadable record (replaced
    # by the new vote): the batches count whole and bump the version once.
    for g in gw[:2]:
        g.call("mark_up", node="a")
        g.call("mark_down", node="b")
        g.call("flush")
    converge(gw, {"a": 1.0, "c": 1.0}, "two down votes of three take b out")
    assert gw[0].status()["version"] == version + 1
    # The periodic sweep skips the unreadable record of c every time, logs it
    # once, and still settles the others.
    time.sleep(2.0)  # a sweep (every vote_ttl / 2 = 1.5 s) ran meanwhile
    for g in gw:
        g.call("mark_up", node="b")
        g.call("flush")
    converge(gw, ring, "b comes back")
    logs = [g.log() for g in gw]
    assert all(log.count("skipped unreadable entry votes['c']") <= 1 for log in logs)
    assert any("skipped unreadable entry votes['c']" in log for log in logs)
    # A missing epoch field: the store is damaged, the instances restore it.
    old_epoch = text_client.hget(META, "epoch")
    text_client.hdel(META, "epoch")
    wait_until(lambda: all(g.status()["epoch"] not in (None, old_epoch) for g in gw),
               "the instances restore a ring without an epoch, under a new one")
    converge(gw, ring, "nothing lost")
    gw[2].call("add", node="d")
    converge(gw, {**ring, "d": 1.0}, "changes flow on")


# -- 4. bad entries are skipped one by one -----------------------------------


def test_bad_entries_are_skipped_one_by_one(gateways: Gateways, server: RedisServer,
                                            text_client: redis.Redis) -> None:
    gw = gateways(server.port, 2)
    ring = {"a": 1.0, "b": 2.0}
    add_all(gw, ring)
    converge(gw, ring, "a and b")
    # A buggy writer leaves weights that do not parse or that no router
    # takes (it keeps the count right: the store is readable).
    with text_client.pipeline(transaction=True) as pipe:  # one write, as a writer's
        pipe.hset(NODES, mapping={"x": "heavy", "y": "1e12", "z": "-1"})
        pipe.hset(META, "count", 5)
        pipe.execute()
    gw[0].call("add", node="c")  # succeeds: its write committed, so it says so
    ring["c"] = 1.0
    converge(gw, ring, "every instance applies c and skips x, y and z")
    fresh = gateways(server.port, 1, options=("--no-bootstrap",))[0]
    converge([*gw, fresh], ring, "a new instance starts and skips them too")
    lines = ("ring default: skipped unreadable entry nodes['x'] = 'heavy'",
             "skipped unreadable entry nodes['z'] = '-1'", "nodes['y'] = '1000000000000.0'")
    for g in gw:
        # Each line is written once the instance has read the entries; a
        # loaded machine may let the log trail the ring by a moment.
        wait_until(lambda g=g: all(line in g.log() for line in lines), "the skips logged")
        log = g.log()
        assert [log.count(line) for line in lines] == [1, 1, 1]
    # A version that is not an integer: damaged; the synced instances
    # restore the ring, the new one follows.
    old_epoch = text_client.hget(META, "epoch")
    text_client.hset(META, "version", "4.5")
    wait_until(lambda: all(g.status()["epoch"] != old_epoch for g in [*gw, fresh]),
               "the ring is restored with a sound version")
    converge([*gw, fresh], ring, "nothing lost")
    gw[1].call("add", node="d")
    converge([*gw, fresh], {**ring, "d": 1.0}, "changes flow on")


# -- 5. partial data loss is noticed -----------------------------------------


def test_lost_node_set_is_restored_not_applied(gateways: Gateways, server: RedisServer,
                                               text_client: redis.Redis) -> None:
    gw = gateways(server.port, 3)
    ring = {f"n{i}": 1.0 for i in range(24)}
    add_all(gw, ring)
    converge(gw, ring, "24 nodes")
    text_client.delete(NODES)  # evicted under an allkeys-* policy; meta stays
    gw[1].call("add", node="x")
    ring["x"] = 1.0
    converge(gw, ring, "the node set is restored, then x added: nothing removed")
    assert text_client.hlen(NODES) == 25
    assert any("damaged (meta.count is 24 but 0 entries are stored)" in g.log() for g in gw)
    # Removing the last node in service is refused unless forced.
    for node in list(ring)[:-1]:
        gw[0].call("remove", node=node)
    converge(gw, {"x": 1.0}, "one node left")
    gw[2].send("remove", node="x")
    assert "would take 1 of the 1 nodes in service out" in gw[2].answer()["error"]
    assert "refused to remove 'x'" in gw[2].log()
    gw[2].call("remove", node="x", force=True)
    converge(gw, {}, "forced")
    assert "took 1 of the 1 nodes in service out at once (forced)" in gw[2].log()


# -- 6. outages and refusals ---------------------------------------------------


def test_refusals_fail_start(gateways: Gateways, own_server: RedisServer) -> None:
    c = _client(own_server)
    try:
        c.acl_setuser("elsewhere", enabled=True, passwords=["+pw"], keys=["other:*"],
                      commands=["+@all"])
        c.config_set("requirepass", "secret")
    finally:
        c.close()
    wrong = gateways(own_server.port, 1, ready=False, options=("--password", "wrong"))[0]
    assert wrong.answer()["start_error"].startswith("AuthenticationError")
    limited = gateways(own_server.port, 1, ready=False,
                       options=("--username", "elsewhere", "--password", "pw"))[0]
    assert limited.answer()["start_error"].startswith("NoPermissionError")
    good = gateways(own_server.port, 2, options=("--password", "secret"))
    good[0].call("add", node="a")
    converge(good, {"a": 1.0}, "the right password works")


def test_hung_redis_is_an_outage(gateways: Gateways, own_server: RedisServer) -> None:
    gw = gateways(own_server.port, 2)
    gw[0].call("add", node="a")
    converge(gw, {"a": 1.0}, "a")
    own_server.pause()
    try:
        wait_until(lambda: not any(g.status()["connected"] for g in gw),
                   "every gateway sees the hung Redis")
        gw[1].send("add", node="b")
        assert "Timeout" in gw[1].answer(deadline=30)["error"]
    finally:
        own_server.resume()
    wait_until(lambda: all(g.status()["connected"] for g in gw), "every gateway reconnects")
    for g in gw:
        log = g.log()
        assert "Redis unreachable for ring default" in log
        assert "Redis reachable again for ring default" in log
    gw[1].call("add", node="b")
    converge(gw, {"a": 1.0, "b": 1.0}, "changes flow again")


# -- in one process, both drivers ------------------------------------------------


class Driver:
    """Runs the membership calls of either driver synchronously."""

    def __init__(self, kind: str, srv: RedisServer) -> None:
        self.kind = kind
        self.srv = srv
        self.loop = asyncio.new_event_loop() if kind == "async" else None
        self.made: list[Any] = []

    def make(self, router: ConsistentHashRouter | None = None, **kwargs: Any) -> Any:
        kwargs.setdefault("resync_interval", 0.2)
        router = router if router is not None else ConsistentHashRouter()
        if self.loop is None:
            m: Any = RedisMembership(router, redis.Redis(**self.srv.client_kwargs()), **kwargs)
        else:
            async def build() -> AsyncRedisMembership:
                return AsyncRedisMembership(
                    router, redis.asyncio.Redis(**self.srv.client_kwargs(asyncio=True)),
                    **kwargs)
            m = self.loop.run_until_complete(build())
        self.made.append(m)
        return m

    def __call__(self, m: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(m, method)(*args, **kwargs)
        if self.loop is not None and asyncio.iscoroutine(result):
            return self.loop.run_until_complete(result)
        return result

    def close(self) -> None:
        for m in self.made:
            self(m, "stop")
            close = m.client.aclose() if self.loop is not None else m.client.close()
            if self.loop is not None:
                self.loop.run_until_complete(close)
        if self.loop is not None:
            self.loop.close()


@pytest.fixture(params=["sync", "async"])
def driver(request: pytest.FixtureRequest, text_client: redis.Redis,
           server: RedisServer) -> Iterator[Driver]:
    d = Driver(request.param, server)
    yield d
    d.close()


def test_writes_against_a_missing_ring(driver: Driver, text_client: redis.Redis,
                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="chash.membership")
    admin = driver.make()  # a one-off script: never started, never synced
    with pytest.raises(RingMissingError, match="ring 'default' is missing in Redis; an "
                                               "instance that holds it will restore it"):
        driver(admin, "add_node", "a")
    with pytest.raises(RingMissingError):
        driver(admin, "refresh")
    assert text_client.exists(META) == 0
    seeded = ConsistentHashRouter()
    seeded.add_service_node("s")
    first = driver.make(seeded, bootstrap=True)
    driver(first, "add_node", "a")  # bootstrap: creates the ring from its router
    assert first.router.weights == {"s": 1.0, "a": 1.0}
    driver(admin, "add_node", "b")  # the ring exists now
    assert admin.router.weights == {"s": 1.0, "a": 1.0, "b": 1.0}
    assert admin.state is not None and admin.state.version == 3
    text_client.delete(NODES)
    other = driver.make()
    with pytest.raises(RingMissingError, match="is damaged in Redis"):
        driver(other, "add_node", "c")
    driver(admin, "add_node", "c")  # synced: restores, then writes
    assert admin.router.weights == {"s": 1.0, "a": 1.0, "b": 1.0, "c": 1.0}
    assert any("restored it" in r.getMessage() for r in caplog.records)


def test_start_without_a_ring_waits_for_one(driver: Driver, text_client: redis.Redis) -> None:
    router = ConsistentHashRouter()
    router.add_service_node("mine")
    waiting = driver.make(router)
    driver(waiting, "start")
    assert waiting.state is None and waiting.version == 0 and router.weights == {"mine": 1.0}
    holder = driver.make(bootstrap=True)
    driver(holder, "add_node", "a")
    if driver.loop is None:
        wait_until(lambda: router.weights == {"a": 1.0}, "the waiting instance adopts it")
    else:
        async def adopt() -> None:
            end = time.monotonic() + 15
            while router.weights != {"a": 1.0} and time.monotonic() < end:
                await asyncio.sleep(0.02)
        driver.loop.run_until_complete(adopt())
    assert router.weights == {"a": 1.0}
    assert waiting.state is not None and waiting.state.version == holder.version


def test_stop_raises_nothing(driver: Driver, text_client: redis.Redis) -> None:
    m = driver.make(bootstrap=True)
    driver(m, "start")
    driver(m, "add_node", "a")
    m.mark_down("a", "failing")
    text_client.hset(VOTES, "a", "[[[")
    text_client.hset(META, "version", "x")  # every script now finds the store damaged
    driver(m, "stop")
    assert not m.running


# -- the documented ACL rules --------------------------------------------------


def documented_acl() -> list[str]:
    """The ACL SETUSER line of docs/membership.md, for ring ``default``."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "membership.md"
    lines = [line for line in docs.read_text().splitlines() if line.startswith("ACL SETUSER")]
    assert len(lines) == 1, lines
    return lines[0].replace("{orders}", "{default}").split()


def test_documented_acl_rules_suffice(gateways: Gateways, own_server: RedisServer) -> None:
    c = _client(own_server)
    try:
        c.execute_command(*documented_acl())
        c.config_set("requirepass", "admin-secret")  # the default user is no way in
    finally:
        c.close()
    gw = gateways(own_server.port, 2, options=("--username", "gateway",
                                               "--password", "change-me"))
    ring = {"a": 1.0, "b": 2.0, "c": 1.0}
    add_all(gw, ring)
    converge(gw, ring, "a restricted user creates and changes the ring")
    for g in gw:
        g.call("mark_down", node="c")
        g.call("flush")
    converge(gw, {"a": 1.0, "b": 2.0}, "its votes take c out")
    gw[1].call("disable", node="a")
    gw[0].call("enable", node="a")
    gw[0].call("remove", node="b")
    converge(gw, {"a": 1.0}, "every kind of change")
    for g in gw:
        assert "NOPERM" not in g.log() and "refuses" not in g.log()


# -- a client without sharded pub/sub ----------------------------------------------


def test_a_client_without_sharded_pub_sub_follows_by_the_checks(
        server: RedisServer, text_client: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    """redis.asyncio has SSUBSCRIBE only from redis-py 8: an older one
    follows the ring by its periodic checks, and says so once."""
    assert int(text_client.info("server")["redis_version"].split(".")[0]) >= 7, "needs Redis 7"

    class OldPubSub(redis.asyncio.client.PubSub):
        ssubscribe = None  # type: ignore[assignment]

    class OldRedis(redis.asyncio.Redis):
        def pubsub(self, **kwargs: Any) -> OldPubSub:
            return OldPubSub(self.connection_pool, **kwargs)

    writer = RedisMembership(ConsistentHashRouter(), redis.Redis(**server.client_kwargs()),
                             bootstrap=True)
    writer.add_node("a")

    async def main() -> None:
        router = ConsistentHashRouter()
        old = OldRedis(**server.client_kwargs(asyncio=True))
        try:
            async with AsyncRedisMembership(router, old, resync_interval=0.2):
                assert router.weights == {"a": 1.0}
                writer.add_node("b")
                await eventually(lambda: router.weights == {"a": 1.0, "b": 1.0},
                                 "the periodic check applies the change")
        finally:
            await old.aclose()

    try:
        run(main())
    finally:
        writer.client.close()
    warnings = [r.getMessage() for r in caplog.records if "offers no sharded pub/sub" in r.getMessage()]
    assert len(warnings) == 1, warnings
