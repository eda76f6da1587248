"""The gateway over every router it offers: the ring in each of its layouts
(varnish and nghttpx, envoy and grpc included), Maglev and rendezvous
(hrw, pymemcache, caddy, squid) and anchor (AnchorRouter).  Each routes every key where its router
says, takes a failed backend out and puts it back through its health
checks, tells its router on the status page, and refuses what its router
has no room for (zones, slow start without weights, a shared ring); and
``chash gateway --router/--layout`` builds them."""
from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
pytest.importorskip("httptools", reason="the gateway extra (httptools) is not installed")

from _support.echo_backends import EchoBackend  # noqa: E402
from _support.waiting import run  # noqa: E402
from chash import (  # noqa: E402
    AnchorRouter,
    ConsistentHashRouter,
    JumpRouter,
    MaglevRouter,
    RendezvousRouter,
)
from chash.gateway import Gateway, GatewayConfig  # noqa: E402
from chash.gateway.view import GatewayRouter  # noqa: E402

USERS = [f"user-{i}" for i in range(60)]


def make(kind: str, layout: str) -> GatewayRouter:
    if kind == "maglev":
        return MaglevRouter()
    if kind == "anchor":
        return AnchorRouter()
    if kind == "rendezvous":
        return RendezvousRouter(layout=layout)  # type: ignore[arg-type]
    return ConsistentHashRouter(layout=layout)


ROUTERS = [("ring", layout) for layout in ("python", "varnish", "nghttpx", "envoy", "grpc",
                                           "haproxy")] + [
    ("maglev", "envoy"), ("rendezvous", "hrw"), ("rendezvous", "pymemcache"),
    ("rendezvous", "caddy"), ("rendezvous", "squid"), ("anchor", "anchor")]


# Routers whose other nodes' shares are recounted when one leaves (Envoy's
# and gRPC's rings by weight share, Maglev's table, CARP's load
# multipliers): their keys may move too.
STIRRING = {("ring", "envoy"), ("ring", "grpc"), ("maglev", "envoy"), ("rendezvous", "squid")}


async def ask(session: Any, gateway: Gateway, user: str) -> str:
    async with session.get(gateway.url + "/page", headers={"X-User-Id": user}) as resp:
        assert resp.status == 200
        body = await resp.json()
        return str(body["backend"])


@pytest.mark.parametrize("kind,layout", ROUTERS, ids=[f"{k}-{v}" for k, v in ROUTERS])
def test_every_router_routes_fails_over_and_reports(kind: str, layout: str) -> None:
    async def main() -> None:
        backends = [await EchoBackend(f"b{i}").start() for i in range(4)]
        # Nodes named by address: the nghttpx layout hashes a backend's address.
        by_node = {b.address: b for b in backends}
        router = make(kind, layout)
        gateway = Gateway(list(by_node), GatewayConfig(key="header:X-User-Id", fall=1, rise=1,
                                                       health_interval=3600.0,
                                                       admin_listen=("127.0.0.1", 0)),
                          router=router)
        assert gateway.router is router and len(router) == 4
        try:
            await gateway.start()
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
                want = {u: by_node[str(router.get_target_node(u.encode()))].name for u in USERS}
                assert {u: await ask(session, gateway, u) for u in USERS} == want
                status = gateway.status()
                assert status["ring"]["layout"] == router.layout
                assert status["ring"]["router"] == type(router).__name__
                assert status["ring"]["fingerprint"] == router.fingerprint()
                assert {n["node"] for n in status["nodes"]} == set(by_node)
                # One backend down: its keys go to the next node of the
                # preference list once the checks take it out.
                gone = backends[1]
                preference = {u: router.get_preference_list(u.encode(), 4) for u in USERS}

                await gone.stop()
                assert gateway.health is not None
                await gateway.health.check_now()
                assert gone.address not in router
                # Varnish's last point once the failed backend is out: its
                # points may have been the last ones.
                last_point = router.hash_ring[-1] if isinstance(router, ConsistentHashRouter) else 0

                def beyond_last(user: str) -> bool:
                    return bool(router._calculate_hash(user.encode()) > last_point)

                after = {u: await ask(session, gateway, u) for u in USERS}
                assert after == {
                    u: by_node[str(router.get_target_node(u.encode()))].name for u in USERS}
                assert gone.name not in after.values()
                # Where the others keep their points (or scores), only the
                # failed backend's keys move, each to its next node.
                if (kind, layout) not in STIRRING:
                    for user in USERS:
                        if want[user] != gone.name:
                            assert after[user] == want[user]
                        elif not (layout == "varnish" and beyond_last(user)):
                            # Its next node; but not on HAProxy's ring (the
                            # nearest point, either side), nor for a key above
                            # Varnish's last point (after the failure), which
                            # goes to whichever backend holds the last point
                            # rather than round to the first.
                            assert preference[user][0] == gone.address
                            if layout != "haproxy":
                                assert by_node[preference[user][1]].name == after[user]
                await gone.start()
                await gateway.health.check_now()
                assert gone.address in router
                back = {u: await ask(session, gateway, u) for u in USERS}
                assert back == {
                    u: by_node[str(router.get_target_node(u.encode()))].name for u in USERS}
                # A node back comes last: HAProxy's ring may give it another
                # id, and CARP's multipliers follow the members' order.
                if layout not in ("haproxy", "squid"):
                    assert back == want
        finally:
            await gateway.stop()
            for backend in backends:
                await backend.stop()

    run(main())


def test_routers_without_room_are_refused_clearly() -> None:
    backends = {"a": "127.0.0.1:9", "b": "127.0.0.1:10"}
    with pytest.raises(ValueError, match="zones are the ConsistentHashRouter's"):
        Gateway(backends, GatewayConfig(health=False), router=MaglevRouter(), zones={"a": "z1"})
    with pytest.raises(ValueError, match="zones are the ConsistentHashRouter's"):
        Gateway(backends, GatewayConfig(health=False, zone="z1"), router=RendezvousRouter())
    for router in (RendezvousRouter(layout="caddy"), RendezvousRouter(layout="pymemcache")):
        with pytest.raises(ValueError, match="slow_start ramps weights"):
            Gateway(backends, GatewayConfig(health=False, slow_start=5.0), router=router)
    addresses = ["127.0.0.1:9", "127.0.0.1:10"]
    with pytest.raises(ValueError, match="the nghttpx layout has none"):
        Gateway(addresses, GatewayConfig(health=False, slow_start=5.0),
                router=ConsistentHashRouter(layout="nghttpx"))
    # Jump drops only its last bucket: refused before any node is added.
    jump = JumpRouter()
    with pytest.raises(TypeError, match="cannot route through a JumpRouter"):
        Gateway(backends, GatewayConfig(health=False), router=jump)
    assert len(jump) == 0


@pytest.mark.parametrize("kind,layout,full,start", [
    ("maglev", "envoy", 4.0, 1.0),            # whole weights: from 1
    ("rendezvous", "hrw", 2.0, 0.1),          # real weights
    ("rendezvous", "squid", 4.0, 1.0),        # CARP's whole load factors
    ("ring", "varnish", 3.0, 1.0),            # the shard director's weights >= 1
    ("ring", "envoy", 4.0, 1.0),
])
def test_slow_start_ramps_every_router_with_weights(kind: str, layout: str, full: float,
                                                    start: float) -> None:
    from chash.health import NodeState

    backends = {"a": "127.0.0.1:9", "b": "127.0.0.1:10"}
    router = make(kind, layout)
    gateway = Gateway(backends, GatewayConfig(slow_start=30.0, health=False), router=router,
                      weights={"a": full, "b": full})
    gateway._health_changed("a", NodeState.DOWN, NodeState.UP, "probe answered 200")
    assert router.weights["a"] == start and router.weights["b"] == full
    router._check()


def chash_gateway(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chash", "gateway", "--backend", "127.0.0.1:9",
                           "--backend", "127.0.0.1:10", "--duration", "0.5", *args],
                          capture_output=True, text=True, timeout=60)


def test_the_command_builds_every_router() -> None:
    from chash.cli import build_parser
    from chash.cli.args import ROUTER_LAYOUTS, make_any_router

    parser = build_parser()
    nodes = ["127.0.0.1:9", "127.0.0.1:10"]
    for kind, layouts in ROUTER_LAYOUTS.items():
        for layout in layouts:
            args = parser.parse_args(["gateway", "--backend", nodes[0], "--router", kind,
                                      "--layout", layout])
            router = make_any_router(args, nodes)
            assert router.layout == layout and router.nodes == nodes
            assert type(router) is {"ring": ConsistentHashRouter, "maglev": MaglevRouter,
                                    "rendezvous": RendezvousRouter, "anchor": AnchorRouter}[kind]
    args = parser.parse_args(["gateway", "--backend", nodes[0]])
    router = make_any_router(args, nodes)
    assert type(router) is ConsistentHashRouter and router.layout == "python"
    args = parser.parse_args(["gateway", "--backend", nodes[0], "--router", "rendezvous"])
    assert make_any_router(args, nodes).layout == "hrw"
    assert set(ROUTER_LAYOUTS["ring"]) >= {"varnish", "nghttpx", "envoy", "grpc"}
    # anchor is shared through a store with its state: --redis / --etcd taken
    for store in (["--redis", "redis://127.0.0.1:1/0"], ["--etcd", "http://127.0.0.1:1"]):
        args = parser.parse_args(["gateway", "--backend", nodes[0], "--router", "anchor", *store])
        router = make_any_router(args, nodes)
        assert type(router) is AnchorRouter and router.nodes == nodes


@pytest.mark.parametrize("args,message", [
    (["--router", "maglev", "--layout", "python"], "--router maglev takes --layout envoy"),
    (["--router", "rendezvous", "--layout", "varnish"], "--router rendezvous takes --layout hrw"),
    (["--router", "rendezvous", "--vnodes", "10"], "--vnodes is the ring's"),
    (["--router", "maglev", "--redis", "redis://127.0.0.1:1/0"], "--redis and --etcd share a ring"),
    (["--router", "rendezvous", "--etcd", "http://127.0.0.1:1"], "--redis and --etcd share a ring"),
    (["--router", "jump"], "invalid choice: 'jump'"),
    (["--router", "anchor", "--vnodes", "10"], "--vnodes is the ring's"),
    (["--router", "anchor", "--weight", "127.0.0.1:9=2"], "no weights"),
    (["--layout", "hrw"], "cannot build the ring: unknown layout 'hrw'"),
    (["--layout", "nghttpx", "--weight", "127.0.0.1:9=2"], "no weights"),
    (["--router", "rendezvous", "--layout", "caddy", "--slow-start", "5"],
     "slow_start ramps weights"),
])
def test_the_command_refuses_what_a_router_cannot_do(args: list[str], message: str) -> None:
    done = chash_gateway(*args)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr


def test_the_help_says_why_jump_is_not_offered() -> None:
    done = subprocess.run([sys.executable, "-m", "chash", "gateway", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "--router {ring,maglev,rendezvous,anchor}" in text
    assert "Jump is a library router only" in text
    for layout in ("varnish", "nghttpx", "envoy", "grpc", "squid"):
        assert layout in text


@pytest.mark.parametrize("argv,made", [
    (["--router", "maglev"], MaglevRouter),
    (["--router", "rendezvous", "--layout", "squid", "--weight", "b=3"], RendezvousRouter),
    (["--layout", "varnish", "--weight", "b=2.5"], ConsistentHashRouter),
], ids=["maglev", "rendezvous-squid", "ring-varnish"])
def test_the_command_routes_through_each_router_in_every_worker(argv: list[str],
                                                                 made: type) -> None:
    from _support.gateway_processes import gateway_process, route, status

    async def main() -> None:
        backends = {name: await EchoBackend(name).start() for name in "abc"}
        spec = ",".join(f"{n}={b.address}" for n, b in backends.items())
        keys = [f"user-{i}" for i in range(40)]
        try:
            async with gateway_process("--backend", spec, "--workers", "2", "--admin-listen",
                                       "127.0.0.1:0", "--health-interval", "0.3",
                                       *argv) as (url, admin, _):
                assert admin is not None
                page = await status(admin)
                assert page["ring"]["router"] == made.__name__
                # The same router built here: every key where it says, in
                # whichever worker a fresh connection lands.
                from chash.cli import build_parser
                from chash.cli.args import make_any_router

                parser = build_parser()
                args = parser.parse_args(["gateway", "--backend", spec, *argv])
                router = make_any_router(args, ["a", "b", "c"])
                assert page["ring"]["fingerprint"] == router.fingerprint()
                seen = await route(url, keys)
                assert seen == {k: router.get_target_node(k) for k in keys}
        finally:
            for backend in backends.values():
                await backend.stop()

    run(main())
