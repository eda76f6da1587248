"""The gateway's admin app (chash.gateway.admin) on its own: the status page
as a dict and as JSON, the metrics route, and how metrics are turned off,
served from a ``GatewayView`` that is not a ``Gateway``."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

from aiohttp import web  # noqa: E402

from _support.ports import refused_node  # noqa: E402
from _support.waiting import run  # noqa: E402
from chash import ConsistentHashRouter  # noqa: E402
from chash._optional import MissingExtra  # noqa: E402
from chash.gateway import GatewayConfig  # noqa: E402
from chash.gateway.admin import make_registry, start_admin, status  # noqa: E402
from chash.gateway.tunnel import DIRECTIONS, TunnelCounts  # noqa: E402
from chash.gateway.view import GatewayView  # noqa: E402
from chash.health import AsyncHealthChecker  # noqa: E402
from chash.metrics import RouteCounters  # noqa: E402


@dataclass
class View:
    """A gateway as the admin app sees it, with no proxy behind it."""

    config: GatewayConfig
    router: ConsistentHashRouter
    addresses: dict[str, str]
    health: AsyncHealthChecker | None = None
    membership: object | None = None
    counters: RouteCounters = field(default_factory=RouteCounters)
    loads: dict[str, int] = field(default_factory=dict)
    hints: dict[str, str] = field(default_factory=dict)
    zones: dict[str, str] = field(default_factory=dict)
    started_at: float | None = 1795962530.5
    registry: Any = None
    metrics_off: str | None = "metrics are turned off"
    tunnel_counts: TunnelCounts = field(default_factory=lambda: TunnelCounts(
        {}, {}, {}, dict.fromkeys(DIRECTIONS, 0)))

    def address_of(self, node: str) -> str:
        return self.addresses.get(node, node)


@dataclass
class Shared:
    """A membership as the status page reads it."""

    name: str = "shop"
    version: int = 7
    connected: bool = True
    reporter: str = "gw-1"
    stale_seconds: float = 0.0
    stale_since: float | None = None


async def answering_health() -> tuple[web.AppRunner, str]:
    """A server on 127.0.0.1 answering 200 at /health: its runner and address."""
    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    app = web.Application()
    app.router.add_get("/health", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"127.0.0.1:{runner.addresses[0][1]}"


def view(**changes: Any) -> View:
    router = ConsistentHashRouter(50)
    for node in ("a", "b", "c"):
        router.add_service_node(node)
    config = changes.pop("config", GatewayConfig(key="cookie:session", health=False))
    return View(config, router, {n: f"10.0.0.{i}:90" for i, n in enumerate("abc", 1)},
                **changes)


def test_the_status_page_reports_the_ring_the_nodes_and_the_counts() -> None:
    gateway = view(loads={"a": 2}, hints={"c": "c answers 404 on /health"},
                   zones={"a": "eu", "b": "us"},
                   config=GatewayConfig(key="cookie:session", health=False, zone="eu"))
    gateway.router.add_service_node("x")  # in the ring, not configured
    for node in ("a", "a", "b"):
        gateway.counters.lookup(node)
    gateway.counters.attempt("a", ok=True)
    gateway.counters.attempt("b", ok=False)
    gateway.counters.request("ok")
    gateway.counters.request("failed")
    gateway.counters.retry()
    page = status(gateway)
    assert json.loads(json.dumps(page)) == page  # JSON-ready
    assert page["key"] == "cookie:session" and page["missing_key"] == "remote"
    assert page["started_at"] == 1795962530.5
    assert page["ring"] == {
        "nodes": 4, "router": "ConsistentHashRouter", "points": 200, "virtual_node_count": 50,
        "hash": "md5", "layout": "python", "fingerprint": gateway.router.fingerprint()}
    assert page["membership"] is None and page["health"] is None
    assert page["zone"] == "eu"
    assert page["metrics"] == "metrics are turned off"
    assert page["requests"] == {"ok": 1, "failed": 1, "rejected": 0}
    assert page["retries"] == 1
    nodes = {entry["node"]: entry for entry in page["nodes"]}
    assert [entry["node"] for entry in page["nodes"]] == ["a", "b", "c", "x"]
    assert nodes["a"] == {
        "node": "a", "address": "10.0.0.1:90", "zone": "eu", "in_ring": True, "weight": 1.0,
        "points": 50, "ownership": gateway.router.ownership()["a"], "in_flight": 2, "tunnels": 0,
        "lookups": 2, "upstream_ok": 1, "upstream_errors": 0, "health": None}
    assert nodes["b"]["upstream_errors"] == 1 and nodes["b"]["lookups"] == 1
    assert nodes["c"]["hint"] == "c answers 404 on /health" and "hint" not in nodes["a"]
    assert nodes["x"]["address"] == "x"  # not configured: its name is its address
    assert (nodes["b"]["zone"], nodes["c"]["zone"], nodes["x"]["zone"]) == ("us", None, None)
    assert sum(entry["ownership"] for entry in page["nodes"]) == pytest.approx(1.0)


def test_the_status_page_shows_health_and_the_shared_ring() -> None:
    async def main() -> None:
        healthy = await answering_health()
        gateway = view(membership=Shared(), metrics_off=None)
        gateway.addresses = {"a": healthy[1], "b": refused_node(), "c": healthy[1]}
        checker = AsyncHealthChecker(
            gateway.router, url=lambda node: f"http://{gateway.address_of(node)}/health",
            fall=1, on_change=gateway.counters.health_change)
        gateway.health = checker
        try:
            await checker.check_now()
        finally:
            await checker.stop()
            await healthy[0].cleanup()
        page = status(gateway)
        assert page["membership"] == {"name": "shop", "version": 7, "connected": True,
                                      "reporter": "gw-1", "stale_seconds": 0.0,
                                      "stale_since": None}
        assert page["health"] == {"interval": 5.0, "timeout": 2.0, "fall": 1, "rise": 2,
                                  "panicking": False}
        assert page["metrics"] == "/metrics"
        nodes = {entry["node"]: entry for entry in page["nodes"]}
        down = nodes["b"]
        assert (down["in_ring"], down["points"], down["ownership"]) == (False, 0, 0.0)
        assert down["weight"] == 1.0  # from the checker, the ring no longer has it
        assert down["health"]["state"] == "down" and not down["health"]["in_service"]
        assert down["health"]["consecutive_failures"] == 1
        assert down["health"]["last_error"] == "connection refused"
        assert down["address"] == gateway.addresses["b"]
        assert down["health"]["transitions"] == {"down": 1}
        assert nodes["a"]["health"]["state"] == "up"
        assert nodes["a"]["health"]["transitions"] == {}
    run(main())


def test_the_admin_routes() -> None:
    async def main() -> None:
        config = GatewayConfig(health=False, status_path="/admin/status",
                               metrics_path="/admin/metrics")
        gateway = view(config=config)
        runner, bound = await start_admin(gateway, "127.0.0.1", 0)
        base = f"http://127.0.0.1:{bound[0][1]}"
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(base + "/admin/status") as resp:
                    assert resp.status == 200
                    assert resp.content_type == "application/json"
                    assert await resp.json() == status(gateway)
                async with session.get(base + "/admin/metrics") as resp:
                    assert resp.status == 404
                    assert await resp.text() == "chash gateway: metrics are turned off\n"
                for path in ("/-/status", "/metrics", "/anything"):
                    async with session.get(base + path) as resp:
                        assert resp.status == 404, path
        finally:
            await runner.cleanup()
    run(main())


def test_metrics_are_served_from_the_registry() -> None:
    pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
    from prometheus_client import CollectorRegistry

    async def main() -> None:
        gateway = view(loads={"b": 3})
        mine = CollectorRegistry()
        gateway.registry, gateway.metrics_off = make_registry(gateway, True, mine)
        assert gateway.registry is mine and gateway.metrics_off is None
        gateway.counters.request("ok")
        runner, bound = await start_admin(gateway, "127.0.0.1", 0)
        try:
            async with aiohttp.ClientSession() as session, \
                    session.get(f"http://127.0.0.1:{bound[0][1]}/metrics") as resp:
                assert resp.status == 200
                assert resp.headers["Content-Type"].startswith("text/plain")
                lines = set((await resp.text()).splitlines())
        finally:
            await runner.cleanup()
        assert "chash_ring_nodes 3.0" in lines
        assert 'chash_node_in_flight{node="b"} 3.0' in lines
        assert 'chash_requests_total{outcome="ok"} 1.0' in lines
        assert not any(line.startswith("chash_membership_stale") for line in lines)
    run(main())


def test_a_shared_ring_cut_off_from_its_store_says_so() -> None:
    pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
    from prometheus_client import CollectorRegistry, generate_latest

    stale = Shared()
    stale.connected, stale.stale_seconds, stale.stale_since = False, 12.5, 1_700_000_000.0
    gateway = view(membership=stale)
    registry, _ = make_registry(gateway, True, CollectorRegistry())
    lines = generate_latest(registry).decode().splitlines()
    assert 'chash_membership_stale_seconds{ring="shop"} 12.5' in lines
    page = status(gateway)["membership"]
    assert (page["connected"], page["stale_seconds"], page["stale_since"]) \
        == (False, 12.5, 1_700_000_000.0)


def test_metrics_off_and_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    gateway: GatewayView = view()
    assert make_registry(gateway, False, None) == (None, "metrics are turned off")
    for name in list(sys.modules):
        if name == "prometheus_client" or name.startswith("prometheus_client."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    # None: served if installed, else off with the reason.
    assert make_registry(gateway, None, None) == (
        None, "metrics are off: prometheus_client is not installed "
              "(pip install 'chash-router[metrics]')")
    # True: required.
    with pytest.raises(MissingExtra, match=r"pip install 'chash-router\[metrics\]'"):
        make_registry(gateway, True, None)
