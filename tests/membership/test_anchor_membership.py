"""Three instances sharing an AnchorRouter's ring through a real Redis and
a real etcd (tests/_support/redis_server.py, etcd_server.py): through
removals of middle nodes, re-adds, health verdicts and an instance that
restarts and misses changes, every instance holds the same state() and
routes every key alike, a removal moves only the removed node's keys and
a re-add moves them back (chash.membership.anchor: the record stamped
under each version); an operator's write stamps its version with its
change, so an instance that missed versions adopts the writer's mapping."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from _support.etcd_server import VERSIONS, EtcdCluster, running_cluster
from _support.membership_async import BlockingMembership
from _support.redis_server import RedisServer, emptied_client, running_server
from _support.waiting import wait_until
from chash import AnchorRouter
from chash.membership.anchor import read_record, record
from chash.membership.state import RingHead
from chash.membership.store import Operation, ReadHead, Stamp, Write

FAST = {"resync_interval": 0.3, "vote_ttl": 1.0}
KEYS = [f"user-{i}" for i in range(4000)]

Make = Callable[..., Any]


@pytest.fixture(params=["redis", "etcd"])
def make(request: pytest.FixtureRequest) -> Iterator[Make]:
    """``make(router, **options)``: a started membership of ring "a" over
    the store of the parameter (one server for the test); all stopped at
    teardown."""
    made: list[Any] = []
    if request.param == "redis":
        pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")
        import redis.asyncio

        from chash.membership import AsyncRedisMembership, RedisMembership

        servers: Iterator[RedisServer] = running_server()
        server = next(servers)
        clients = emptied_client(server, **server.client_kwargs())
        client = next(clients)

        def build(router: AnchorRouter, driver: str = "sync", **options: Any) -> Any:
            settings = {**FAST, **options}
            membership: Any
            if driver == "async":
                membership = BlockingMembership(lambda: AsyncRedisMembership(
                    router, redis.asyncio.Redis(**server.client_kwargs(asyncio=True)), "a",
                    **settings))
            else:
                membership = RedisMembership(router, client, "a", **settings)
            membership.start()
            made.append(membership)
            return membership

        build.store = ["--redis", server.url]  # type: ignore[attr-defined]
        yield build
        for membership in made:
            membership.close() if isinstance(membership, BlockingMembership) else membership.stop()
        for gen in (clients, servers):
            gen.close()
    else:
        pytest.importorskip("httpx", reason="httpx not installed: pip install 'chash-router[etcd]'")
        from chash.membership import AsyncEtcdMembership, EtcdMembership

        clusters: Iterator[EtcdCluster] = running_cluster(1, VERSIONS[-1])
        cluster = next(clusters)

        def build(router: AnchorRouter, driver: str = "sync", **options: Any) -> Any:
            settings = {**FAST, "timeout": 2.0, **options}
            membership: Any
            if driver == "async":
                membership = BlockingMembership(lambda: AsyncEtcdMembership(
                    router, cluster.url, "a", **settings))
            else:
                membership = EtcdMembership(router, cluster.urls, "a", **settings)
            membership.start()
            made.append(membership)
            return membership

        build.store = ["--etcd", cluster.url]  # type: ignore[attr-defined]
        yield build
        for membership in made:
            if not isinstance(membership, BlockingMembership):
                membership.stop()
            membership.close()
        clusters.close()


def chash_ring(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chash", "ring", *args, "--ring", "a"],
                          capture_output=True, text=True, timeout=120)


def agreed(routers: list[AnchorRouter], memberships: list[Any]) -> bool:
    """Every instance at the same version, holding the same state and nodes."""
    versions = {m.state.version for m in memberships if m.state is not None}
    return len(versions) == 1 and all(m.state is not None for m in memberships) and \
        len({(r.state(), tuple(r.nodes)) for r in routers}) == 1 and \
        all(r == routers[0] for r in routers)


def settle(routers: list[AnchorRouter], memberships: list[Any]) -> list[str | None]:
    for m in memberships:
        m.refresh()
    wait_until(lambda: agreed(routers, memberships), timeout=20)
    mappings = [r.get_target_nodes(KEYS) for r in routers]
    assert all(m == mappings[0] for m in mappings)
    return mappings[0]


def test_three_instances_route_alike_through_removals_re_adds_and_a_restart(make: Make) -> None:
    routers = [AnchorRouter() for _ in range(3)]
    first = make(routers[0], bootstrap=True)
    for i in range(10):
        first.add_node(f"n{i}")
    others = [make(routers[1], driver="async"), make(routers[2])]  # both drivers
    members = [first, *others]
    before = settle(routers, members)
    assert routers[0].nodes == [f"n{i}" for i in range(10)]

    # a middle node removed through another instance: only its keys move
    others[0].remove_node("n4")
    after = settle(routers, members)
    assert all(a == b for a, b in zip(before, after, strict=True) if a != "n4")
    assert "n4" not in after and sum(a != b for a, b in zip(before, after, strict=True)) == \
        before.count("n4")
    assert routers[1].state() == (10).to_bytes(4, "little") + (4).to_bytes(4, "little")

    # the operator's tool: a removal, and the mapping it shows
    done = chash_ring("remove", "n5", *make.store)  # type: ignore[attr-defined]
    assert done.returncode == 0, done.stderr
    moved = settle(routers, members)
    assert all(a == b for a, b in zip(after, moved, strict=True) if a != "n5")
    shown = json.loads(chash_ring("show", "--json", *make.store).stdout)  # type: ignore[attr-defined]
    assert shown["anchor"]["state"] == routers[2].state().hex()
    assert shown["anchor"]["buckets"] == {n: routers[2].bucket_of(n) for n in routers[2].nodes}
    assert chash_ring("add", "n5", *make.store).returncode == 0  # type: ignore[attr-defined]
    assert settle(routers, members) == after

    # another one, then the first re-added through the third instance
    others[1].remove_node("n7")
    settle(routers, members)
    others[1].add_node("n7")
    assert settle(routers, members) == after  # n7 back on its id: its keys back

    # the third instance stops; changes it misses; a new one starts empty
    stopped = others.pop()
    stopped.stop()
    first.remove_node("n2")
    first.add_node("n10")  # takes n2's id
    first.remove_node("n8")
    first.disable_node("n1", "maintenance")
    late = AnchorRouter()
    members = [first, others[0], make(late)]
    routers = [routers[0], routers[1], late]
    final = settle(routers, members)
    assert late.bucket_of("n10") == 2
    assert set(late.nodes) == {"n0", "n3", "n5", "n6", "n7", "n9", "n10"}
    # what the store holds under the version is this very mapping
    stamped = members[0].refresh()
    assert stamped.version == members[2].state.version
    assert read_record(record(late), stamped.ring()) is not None
    assert final == routers[0].get_target_nodes(KEYS)

    # re-enabling n1 hands back exactly the keys it had
    first.enable_node("n1")
    back = settle(routers, members)
    assert all(b == f or b == "n1" for f, b in zip(final, back, strict=True))
    for r in routers:
        r._check()


def test_an_instance_that_computed_another_mapping_adopts_the_stamped_one(make: Make) -> None:
    # an instance whose router went another way (changed behind the
    # membership's back) is put back to the record of the version
    a, b = AnchorRouter(), AnchorRouter()
    first = make(a, bootstrap=True)
    for i in range(6):
        first.add_node(f"n{i}")
    second = make(b)
    settle([a, b], [first, second])
    b.remove_service_node("n2")
    b.add_service_node("intruder")
    wait_until(lambda: b == a, timeout=20)
    assert b.get_target_nodes(KEYS) == a.get_target_nodes(KEYS)


def anchor_of(history: list[tuple[str, str]]) -> AnchorRouter:
    """A router through ``history`` ((add|remove, node)), one step at a time."""
    r = AnchorRouter()
    for op, node in history:
        (r.add_service_node if op == "add" else r.remove_service_node)(node)
    return r


def test_a_write_stamps_its_version_with_the_change_so_an_instance_behind_adopts_it(
        make: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    # The race of a loaded machine made certain: the writer's own stamp,
    # the separate call after its write, never arrives (as if later than
    # the check interval), while another instance, several versions
    # behind, catches up.  The versions the writer makes carry its record
    # already, so that instance adopts it instead of stamping its own.
    a, b = AnchorRouter(), AnchorRouter()
    writer = make(a, bootstrap=True)
    history = [("add", f"n{i}") for i in range(10)]
    for _, node in history:
        writer.add_node(node)
    behind = make(b)
    before = settle([a, b], [writer, behind])
    assert a == anchor_of(history)
    behind.stop()  # it stays at this version, following nothing
    left_at = behind.state.version

    store = writer._store
    perform = store.run
    sent: list[Operation[Any]] = []

    def late_stamps(operation: Operation[Any]) -> Any:
        sent.append(operation)
        if isinstance(operation, Stamp):
            raise TimeoutError("the writer's stamp is late")
        return perform(operation)

    monkeypatch.setattr(store, "run", late_stamps)
    calls = {"remove": writer.remove_node, "add": writer.add_node,
             "disable": writer.disable_node}
    for op, node in [("remove", "n2"), ("add", "n10"), ("remove", "n8"), ("disable", "n1")]:
        mapped = a.get_target_nodes(KEYS)
        version = calls[op](node)
        history.append(("add" if op == "add" else "remove", node))
        expected = anchor_of(history)  # one change from the record before
        head = perform(ReadHead())
        assert isinstance(head, RingHead)
        assert (head.version, head.digest) == (version, record(expected))  # stamped with it
        assert a == expected
        moved = [(x, y) for x, y in zip(mapped, a.get_target_nodes(KEYS), strict=True) if x != y]
        assert moved and all(node in (x, y) for x, y in moved)  # only the changed node's keys
    writes = [operation for operation in sent if isinstance(operation, Write)]
    assert len(writes) == 4 and all(w.stamp is not None for w in writes)

    # the instance behind catches up over the four versions, then checks
    assert behind.state.version == left_at == version - 4
    behind.refresh()
    behind.refresh()
    assert b == a == expected and b.bucket_of("n10") == 2  # n2's id, as the writer gave it
    caught_up = b.get_target_nodes(KEYS)
    assert caught_up == a.get_target_nodes(KEYS)
    assert all(x == y or x in ("n1", "n2", "n8") or y == "n10"
               for x, y in zip(before, caught_up, strict=True))
    head = perform(ReadHead())
    assert isinstance(head, RingHead) and head.digest == record(expected)
    assert not any(isinstance(operation, Stamp) for operation in sent)  # never needed
