"""``chash gateway --workers N`` (one port, N processes) and ``--redis``
(every worker and every instance on one shared ring), as real processes on
127.0.0.1 with a redis-server started by the test."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

# The gateways under test are child processes: what this process holds is
# the tests' own aiohttp clients and echo servers.  Once in a while, on
# Python 3.12, asyncio lets a socket that an echo server accepted while it
# was closing be collected unclosed; that says nothing of the gateway.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

from _support.echo_backends import EchoBackend  # noqa: E402
from _support.gateway_processes import gateway_process, route, status  # noqa: E402
from _support.waiting import eventually, run  # noqa: E402
from chash import ConsistentHashRouter  # noqa: E402

KEYS = [f"user-{i}" for i in range(60)]


def ring(names: str) -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    for name in names:
        router.add_service_node(name)
    return router


def test_workers_share_one_port_and_route_identically() -> None:
    async def main() -> None:
        backends = {name: await EchoBackend(name).start() for name in "abc"}
        spec = ",".join(f"{n}={b.address}" for n, b in backends.items())
        try:
            async with gateway_process("--backend", spec, "--workers", "2",
                                       "--health-interval", "60") as (url, _, _):
                expected = ring("abc")
                # Every request on a new connection: the kernel spreads them
                # over both workers; each one must route like the ring.
                for _ in range(3):
                    seen = await route(url, KEYS)
                    assert seen == {k: expected.get_target_node(k) for k in KEYS}
                # Each worker keeps its own pool: connections from two
                # processes reached the backends.
                assert sum(len(b.peers) for b in backends.values()) >= 2 * 3 - 1
        finally:
            for backend in backends.values():
                await backend.stop()
    run(main(), timeout=180)


def test_two_instances_sharing_redis_agree() -> None:
    from _support.redis_server import RedisServer

    pytest.importorskip("redis", reason="the redis extra (redis-py) is not installed")

    async def main() -> None:
        server = RedisServer()
        server.start()
        backends = {name: await EchoBackend(name).start() for name in "abc"}
        spec = ",".join(f"{n}={b.address}" for n, b in backends.items())
        common = ("--backend", spec, "--workers", "2", "--redis", server.url,
                  "--ring", "shop", "--health-interval", "0.3", "--admin-listen",
                  "127.0.0.1:0")
        try:
            # The first instance may create the ring; the second joins it.
            async with gateway_process(*common, "--bootstrap") as (url1, admin1, _), \
                    gateway_process(*common) as (url2, admin2, _):
                assert admin1 and admin2
                one, two = await route(url1, KEYS), await route(url2, KEYS)
                assert one == two
                assert set(one.values()) == {"a", "b", "c"}
                page1, page2 = await status(admin1), await status(admin2)
                assert page1["ring"]["fingerprint"] == page2["ring"]["fingerprint"] \
                    == ring("abc").fingerprint()
                assert page1["membership"]["name"] == "shop"

                # b stops: the health votes of all four workers take it out
                # of the shared ring, and both instances agree again.
                await backends["b"].stop()
                without_b = ring("ac").fingerprint()

                async def agreed() -> bool:
                    pages = [await status(admin1), await status(admin2)]
                    return all(p["ring"]["fingerprint"] == without_b for p in pages)
                await eventually(agreed, timeout=60)
                one, two = await route(url1, KEYS), await route(url2, KEYS)
                assert one == two and "b" not in one.values()

                await backends["b"].start()
                expected = {k: ring("abc").get_target_node(k) for k in KEYS}

                # The shared ring takes b back on a quorum's votes; each
                # worker's own probes must also see it up (rise) before it
                # stops trying b last, so the routes follow a moment later.
                async def back() -> bool:
                    pages = [await status(admin1), await status(admin2)]
                    return all(p["ring"]["fingerprint"] == ring("abc").fingerprint()
                               for p in pages) \
                        and await route(url1, KEYS) == await route(url2, KEYS) == expected
                await eventually(back, timeout=60)
                assert await route(url1, KEYS) == await route(url2, KEYS) == expected
        finally:
            for backend in backends.values():
                await backend.stop()
            server.close()
    run(main(), timeout=240)


def test_two_instances_sharing_etcd_agree_and_follow_dns_srv() -> None:
    """Two instances share a ring through a 3-member etcd cluster; the first
    follows an SRV name into it (the second joins): both route alike
    through record changes written while the leader is dead, a backend's
    failure (health votes through etcd) and a DNS outage."""
    from _support.dns_server import DnsServer
    from _support.etcd_server import EtcdCluster

    pytest.importorskip("httpx", reason="the etcd extra (httpx) is not installed")
    pytest.importorskip("dns.resolver", reason="the dns extra (dnspython) is not installed")
    name = "_http._tcp.shop.example"

    async def main() -> None:
        etcd, dns = EtcdCluster(3), DnsServer(ttl=1)
        backends = {name: await EchoBackend(name).start() for name in "abc"}
        port = {n: int(b.address.rsplit(":", 1)[1]) for n, b in backends.items()}
        node = {n: f"127.0.0.1:{p}" for n, p in port.items()}

        def records(names: str) -> list[tuple[str, str, int, int, int]]:
            return [(name, "127.0.0.1", port[n], 1, 10) for n in names]

        def fingerprint(names: str) -> str:
            router = ConsistentHashRouter()
            for n in names:
                router.add_service_node(node[n], 10.0)
            return router.fingerprint()

        try:
            etcd.start()
            dns.serve(records("ab"))
            common = ("--etcd", etcd.url, "--ring", "shop", "--health-interval", "0.3",
                      "--admin-listen", "127.0.0.1:0")
            async with gateway_process(*common, "--bootstrap", "--dns-srv", name,
                                       "--nameserver", dns.nameserver) as (url1, admin1, _), \
                    gateway_process("--backend", node["c"], *common) as (url2, admin2, _):
                assert admin1 and admin2

                async def both_on(names: str) -> bool:
                    pages = [await status(admin1), await status(admin2)]
                    return all(p["ring"]["fingerprint"] == fingerprint(names) for p in pages)

                async def routed_alike(names: str) -> None:
                    one, two = await route(url1, KEYS), await route(url2, KEYS)
                    assert one == two and set(one.values()) == set(names)

                await eventually(lambda: both_on("ab"), timeout=30)
                await routed_alike("ab")
                page = await status(admin2)
                assert page["membership"]["name"] == "shop"
                leader = etcd.leader()
                leader.kill()
                dns.serve(records("bc"))  # the records change: within a TTL, both follow
                await eventually(lambda: both_on("bc"), timeout=30)
                await routed_alike("bc")
                await asyncio.to_thread(etcd.restart, leader)
                await backends["b"].stop()  # the health votes take b out of both
                await eventually(lambda: both_on("c"), timeout=60)
                await routed_alike("c")
                dns.stop()  # a DNS outage: the last set is kept, the ring unchanged
                await asyncio.sleep(1.2)  # a TTL's poll fails meanwhile
                assert await both_on("c")
                await routed_alike("c")
        finally:
            for backend in backends.values():
                await backend.stop()
            dns.close()
            etcd.close()
    run(main(), timeout=240)


async def metric(admin: str, name: str) -> float:
    """The value of the sample ``name`` (with its labels) on ``/metrics``."""
    async with aiohttp.ClientSession() as session, session.get(f"{admin}/metrics") as resp:
        text = await resp.text()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")


def test_workers_act_as_one_gateway() -> None:
    """``--workers 2`` without Redis: the admin listener counts every
    request whichever worker served it, and the one health checker's
    verdicts change both workers' rings."""
    async def main() -> None:
        backends = {name: await EchoBackend(name).start() for name in "abc"}
        spec = ",".join(f"{n}={b.address}" for n, b in backends.items())
        try:
            async with gateway_process("--backend", spec, "--workers", "2",
                                       "--health-interval", "3600", "--fall", "1",
                                       "--admin-listen", "127.0.0.1:0") as (url, admin, _):
                assert admin is not None
                sent = 0
                for _ in range(400 // len(KEYS) + 1):  # each on a new connection
                    sent += len(await route(url, KEYS))

                async def counted() -> bool:
                    page = await status(admin)
                    return page["requests"]["ok"] == sent and \
                        sum(w["requests"]["ok"] for w in page["workers"]) == sent
                await eventually(counted, timeout=30)
                page = await status(admin)
                assert [w["worker"] for w in page["workers"]] == [0, 1]
                assert all(w["requests"]["ok"] > 0 for w in page["workers"]), page["workers"]
                assert await metric(admin, 'chash_requests_total{outcome="ok"}') == sent
                assert sum(n["upstream_ok"] for n in page["nodes"]) == sent

                def rings(page: dict[str, Any]) -> set[str]:
                    return {w["fingerprint"] for w in page["workers"]}

                # b dies.  Probes are an hour apart, so only what requests
                # meet can take it out; one request meets it, in whichever
                # worker the kernel hands it to, and both rings lose b.
                await backends["b"].stop()
                key = next(k for k in KEYS if ring("abc").get_target_node(k) == "b")
                assert (await route(url, [key]))[key] != "b"
                without_b = ring("ac").fingerprint()

                async def taken_out() -> bool:
                    return rings(await status(admin)) == {without_b}
                await eventually(taken_out, timeout=30)
        finally:
            for backend in backends.values():
                await backend.stop()
    run(main(), timeout=180)


def test_a_follower_tells_its_gateway_after_each_batch() -> None:
    """The leader's batch applied, the follower's gateway hears of it at
    once (its tunnels close what moved): no look at the ring later."""
    import socket as socket_module

    from chash.gateway.workers import Follower

    router = ConsistentHashRouter()
    router.add_service_nodes(["a", "b"])
    ours, theirs = socket_module.socketpair()
    told: list[list[str]] = []

    class Told:
        def ring_changed(self) -> None:
            told.append(sorted(router.weights))

    try:
        follower = Follower(router, ours)
        follower._gateway = Told()  # type: ignore[assignment]
        follower._receive(("batch", 1, [("down", "a", "refused")]))
        assert told == [["b"]] and follower.ring_changes == 1
        follower._receive(("batch", 2, [("up", "a")]))
        assert told == [["b"], ["a", "b"]]
    finally:
        ours.close()
        theirs.close()
