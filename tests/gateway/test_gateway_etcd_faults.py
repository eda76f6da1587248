"""Two ``chash gateway --etcd`` processes through the faults of a real
3-member etcd cluster.

One cluster serves the module (tests/_support/etcd_server.py); each test
puts back what it broke and uses a ring of its own.  The ring changes come
from an operator (an ``EtcdMembership`` in this process) while the fault
lasts; each test ends with both gateways on one ring (the fingerprints on
their ``/-/status`` pages), holding every change the operator was told
went in.  Health checks and the full checks of the ring run every few
tenths of a second, and votes last one second (``--vote-ttl``), so that a
fault shows within seconds.  The leader killed during writes (with the
watching member restarted after), a paused member, a watcher away past a
compaction, a killed gateway's votes lapsing with their lease, and an etcd
user without a role refused at start.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
pytest.importorskip("httpx", reason="the etcd extra (httpx) is not installed")

# As in test_gateway_workers.py: the gateways are child processes; a socket
# of this process's own echo servers collected unclosed says nothing of them.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

from _support.echo_backends import EchoBackend  # noqa: E402
from _support.etcd_server import EtcdCluster, _post, running_cluster  # noqa: E402
from _support.gateway_processes import gateway_process, route, status  # noqa: E402
from _support.gateways import CHASH_ROOT  # noqa: E402
from _support.membership_procs import fingerprint_of  # noqa: E402
from _support.ports import free_port  # noqa: E402
from _support.waiting import eventually, run  # noqa: E402
from chash import ConsistentHashRouter  # noqa: E402
from chash.membership import EtcdMembership  # noqa: E402
from chash.membership.etcd.wire import EtcdUnavailable  # noqa: E402

KEYS = [f"user-{i}" for i in range(40)]
#: Every gateway's timings: probes, full checks and votes within a second.
FAST = ("--health-interval", "0.3", "--health-timeout", "0.5", "--resync-interval", "0.5",
        "--vote-ttl", "1", "--admin-listen", "127.0.0.1:0")


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    """A 3-member cluster for the module; every member running again after
    each test (``healed``)."""
    yield from running_cluster(3)


@pytest.fixture
def cluster(etcd: EtcdCluster) -> Iterator[EtcdCluster]:
    yield etcd
    for member in etcd.members:
        if not member.running:
            etcd.restart(member)
        else:
            member.resume()
    etcd.wait_healthy()


def sharing(urls: str, ring: str) -> tuple[str, ...]:
    return ("--etcd", urls, "--ring", ring, *FAST)


async def both_on(admins: list[str], weights: dict[str, float], timeout: float = 30) -> None:
    """Wait until every gateway's ring is the one holding ``weights``."""
    want = fingerprint_of(weights)
    seen: list[str] = []

    async def agreed() -> bool:
        seen[:] = [(await status(admin))["ring"]["fingerprint"] for admin in admins]
        return all(print_ == want for print_ in seen)
    await eventually(agreed, f"every gateway holds {sorted(weights)}", timeout=timeout)


async def routed_alike(urls: list[str], nodes: set[str]) -> None:
    """Every gateway sends each key to the same backend, among ``nodes``."""
    seen = [await route(url, KEYS) for url in urls]
    assert all(s == seen[0] for s in seen)
    assert set(seen[0].values()) <= nodes


def write_until_acknowledged(call: Callable[[], None], deadline: float = 30.0) -> None:
    """Retry ``call`` through an outage (the operator's writes are idempotent)."""
    end = time.monotonic() + deadline
    while True:
        try:
            call()
            return
        except (EtcdUnavailable, OSError):
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


def operator(urls: list[str], ring: str) -> EtcdMembership:
    """An operator's instance of ``ring`` (not started: its calls read the
    ring, write it and return), with the gateways' shared settings."""
    return EtcdMembership(ConsistentHashRouter(), urls, ring, timeout=0.5, resync_interval=0.5,
                          vote_ttl=1.0)


async def echoes(count: int) -> list[EchoBackend]:
    """``count`` echo backends, each named by its address (the node name a
    ``--backend HOST:PORT`` gets)."""
    backends = [await EchoBackend("").start() for _ in range(count)]
    for backend in backends:
        backend.name = backend.address
    return backends


def test_the_leader_killed_during_writes_then_a_member_restarted(cluster: EtcdCluster) -> None:
    async def main() -> None:
        backends = await echoes(7)
        first, rest = backends[0].address, [b.address for b in backends[1:]]
        op = operator(cluster.urls, "leader")
        acked: list[str] = []
        try:
            common = sharing(cluster.url, "leader")
            async with gateway_process("--backend", first, "--bootstrap", *common) as one, \
                    gateway_process("--backend", first, *common) as two:
                admins = [one.admin, two.admin]
                assert None not in admins
                await both_on(admins, {first: 1.0})  # type: ignore[arg-type]

                def writes() -> None:
                    for node in rest:
                        write_until_acknowledged(lambda node=node: op.add_node(node))  # type: ignore[misc]
                        acked.append(node)

                writer = threading.Thread(target=writes)
                writer.start()
                await eventually(lambda: len(acked) >= 2, "some writes went in")
                leader = cluster.leader()
                leader.kill()
                await asyncio.to_thread(writer.join, 60)
                assert not writer.is_alive() and acked == rest
                await both_on(admins, {first: 1.0, **dict.fromkeys(acked, 1.0)})  # type: ignore[arg-type]
                await asyncio.to_thread(cluster.restart, leader)
                # The member both gateways reach etcd through goes down and
                # comes back while the operator takes a node out.
                watched = cluster.members[0]
                watched.kill()
                write_until_acknowledged(lambda: op.remove_node(rest[0]))
                await asyncio.to_thread(cluster.restart, watched)
                ring = {first: 1.0, **dict.fromkeys(rest[1:], 1.0)}
                await both_on(admins, ring)  # type: ignore[arg-type]
                await routed_alike([one.url, two.url], set(ring))
        finally:
            op.close()
            for backend in backends:
                await backend.stop()
    run(main(), timeout=180)


def test_a_paused_member(cluster: EtcdCluster) -> None:
    """The member both gateways talk to is SIGSTOPped (its connections stay
    open, nothing answers): they go on through the others."""
    async def main() -> None:
        backends = await echoes(4)
        nodes = [b.address for b in backends]
        paused = cluster.members[0]  # the first endpoint: where each gateway starts
        op = operator(cluster.urls[1:], "paused")
        try:
            common = sharing(cluster.url, "paused")
            async with gateway_process("--backend", ",".join(nodes[:2]), "--bootstrap",
                                       *common) as one, \
                    gateway_process("--backend", nodes[0], *common) as two:
                admins = [one.admin, two.admin]
                await both_on(admins, dict.fromkeys(nodes[:2], 1.0))  # type: ignore[arg-type]
                paused.pause()
                try:
                    write_until_acknowledged(lambda: op.add_node(nodes[2]))
                    write_until_acknowledged(lambda: op.disable_node(nodes[0], "paused member"))
                    await both_on(admins, dict.fromkeys(nodes[1:3], 1.0))  # type: ignore[arg-type]
                finally:
                    paused.resume()
                write_until_acknowledged(lambda: op.add_node(nodes[3]))
                await both_on(admins, dict.fromkeys(nodes[1:], 1.0))  # type: ignore[arg-type]
                await routed_alike([one.url, two.url], set(nodes[1:]))
        finally:
            op.close()
            for backend in backends:
                await backend.stop()
    run(main(), timeout=180)


def test_a_watcher_away_past_a_compaction(cluster: EtcdCluster) -> None:
    """The second gateway reaches etcd through one member, which is paused
    while the ring moves on and the history is compacted past the
    revision its watch would resume from."""
    async def main() -> None:
        backends = await echoes(4)
        nodes = [b.address for b in backends]
        leader = cluster.leader()
        away = next(m for m in cluster.members if m is not leader)
        op = operator([leader.url], "compacted")
        try:
            async with gateway_process("--backend", nodes[0], "--bootstrap",
                                       *sharing(leader.url, "compacted")) as one, \
                    gateway_process("--backend", nodes[0],
                                    *sharing(away.url, "compacted")) as two:
                admins = [one.admin, two.admin]
                await both_on(admins, {nodes[0]: 1.0})  # type: ignore[arg-type]
                away.pause()
                try:
                    for node in nodes[1:]:
                        op.add_node(node)
                    revision = await asyncio.to_thread(
                        _post, leader.url + "/v3/kv/range", {"key": "AA=="})
                    await asyncio.to_thread(
                        _post, leader.url + "/v3/kv/compaction",
                        {"revision": revision["header"]["revision"], "physical": True})
                finally:
                    away.resume()
                await both_on(admins, dict.fromkeys(nodes, 1.0))  # type: ignore[arg-type]
                await routed_alike([one.url, two.url], set(nodes))
        finally:
            op.close()
            for backend in backends:
                await backend.stop()
    run(main(), timeout=180)


def test_a_killed_gateways_votes_lapse_with_its_lease(cluster: EtcdCluster) -> None:
    """A third gateway, which alone probes node x (its x is an address
    nothing listens on), votes x out of the ring; SIGKILLed, it withdraws
    nothing: its vote ends with its lease, and x is back in both others."""
    async def main() -> None:
        backends = await echoes(2)
        x, y = (b.address for b in backends)
        spec = f"x={x},y={y}"
        common = sharing(cluster.url, "lease")
        try:
            # The two that stay do not probe (no votes of theirs to
            # outnumber the doomed one's); they sweep the ring as usual.
            async with gateway_process("--backend", spec, "--bootstrap", "--no-health",
                                       *common) as one, \
                    gateway_process("--backend", spec, "--no-health", *common) as two:
                admins = [one.admin, two.admin]
                await both_on(admins, {"x": 1.0, "y": 1.0})  # type: ignore[arg-type]
                async with gateway_process("--backend", f"x=127.0.0.1:{free_port()},y={y}",
                                           "--fall", "1", *common) as doomed:
                    await both_on(admins, {"y": 1.0})  # type: ignore[arg-type]
                    page = await status(one.admin)  # type: ignore[arg-type]
                    assert page["ring"]["fingerprint"] == fingerprint_of({"y": 1.0})
                    doomed.process.kill()  # no withdraw: only the lease ends its vote
                    await doomed.process.wait()
                await both_on(admins, {"x": 1.0, "y": 1.0})  # type: ignore[arg-type]
                await routed_alike([one.url, two.url], {x, y})  # the backends answer their address
        finally:
            for backend in backends:
                await backend.stop()
    run(main(), timeout=180)


def test_a_user_without_the_role_is_refused_at_start(cluster: EtcdCluster) -> None:
    """With auth on, a gateway whose etcd user has no role exits at start,
    saying so, and serves nothing; one with a role shares the ring."""
    backend_port = free_port()
    cluster.post("/v3/auth/user/add", {"name": "norole", "password": "pw"})
    cluster.enable_auth()
    try:
        urls = ",".join(u.replace("http://", "http://norole:pw@") for u in cluster.urls)
        env = {**os.environ, "PYTHONPATH": str(CHASH_ROOT)}
        for workers in ("1", "2"):  # one process, or the workers' supervisor
            done = subprocess.run(
                [sys.executable, "-m", "chash", "gateway", "--listen", "127.0.0.1:0",
                 "--backend", f"127.0.0.1:{backend_port}", "--bootstrap", "--duration", "30",
                 "--workers", workers, *sharing(urls, "auth")],
                capture_output=True, text=True, timeout=60, env=env)
            assert done.returncode == 1, done.stderr[-2000:]
            assert "Traceback" not in done.stderr, done.stderr[-2000:]
            assert "chash gateway: cannot join the shared ring 'auth': etcdserver: " \
                   "permission denied" in done.stderr
            assert "listening" not in done.stdout

        async def as_root() -> None:
            root = ",".join(u.replace("http://", "http://root:rootpw@") for u in cluster.urls)
            async with gateway_process("--backend", f"127.0.0.1:{backend_port}",
                                       "--bootstrap", "--no-health",
                                       *sharing(root, "auth")) as gateway:
                page = await status(gateway.admin)  # type: ignore[arg-type]
                assert page["membership"]["name"] == "auth"
                assert page["ring"]["fingerprint"] == fingerprint_of(
                    {f"127.0.0.1:{backend_port}": 1.0})
        run(as_root(), timeout=120)
    finally:
        cluster.disable_auth()
        cluster.post("/v3/auth/user/delete", {"name": "norole"})
        cluster.post("/v3/auth/user/delete", {"name": "root"})
