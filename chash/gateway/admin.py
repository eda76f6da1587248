"""The gateway's admin listener: the JSON status page, Prometheus metrics, reload.

Served by aiohttp on an address of its own (``GatewayConfig.admin_listen``),
never on the proxy's port: backend addresses and error messages are for
operators, not for every client.  Everything here reads the gateway through
``chash.gateway.view.GatewayView``.  aiohttp and prometheus_client are
imported when first needed, through ``chash._optional.require``, so that
importing this module needs neither.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from chash._optional import MissingExtra, require

if TYPE_CHECKING:
    from aiohttp import web

    from chash.gateway.view import GatewayView
    from chash.health import NodeStatus
    from chash.metrics import CountersSnapshot

__all__ = ["RELOAD_PATH", "make_app", "make_registry", "start_admin", "status"]

#: Where ``POST`` reloads the gateway's configuration (``chash.gateway.reload``).
RELOAD_PATH = "/-/reload"

#: Why metrics are off when prometheus_client is missing and not required.
_NO_PROMETHEUS = ("metrics are off: prometheus_client is not installed "
                  "(pip install 'chash-router[metrics]')")


def _web() -> Any:
    """``aiohttp.web``, or MissingExtra naming the gateway extra."""
    return require("aiohttp.web", user="chash.gateway", extra="gateway", package="aiohttp")


def _prometheus() -> Any:
    """``prometheus_client``, or MissingExtra naming the metrics extra."""
    return require("prometheus_client", user="GatewayConfig(metrics=True)", extra="metrics")


def make_registry(gateway: GatewayView, metrics: bool | None,
                  registry: Any) -> tuple[Any, str | None]:
    """``(registry, None)`` when metrics are served, else ``(None, why not)``.

    ``metrics``: True requires prometheus_client (``MissingExtra``, an
    ImportError naming the extra), None serves metrics if it is installed,
    False never.  ``registry``: where to register the gateway's
    ``RouterCollector`` (None: a new, private one).
    """
    if metrics is False:
        return None, "metrics are turned off"
    try:
        prometheus_client = _prometheus()
    except MissingExtra:
        if metrics:
            raise
        return None, _NO_PROMETHEUS
    from chash.metrics import RouterCollector

    collector = RouterCollector(gateway.router, health=gateway.health, load=gateway,
                                counters=gateway.counters)
    if registry is None:
        registry = prometheus_client.CollectorRegistry()
    registry.register(collector)
    registry.register(_TunnelCollector(gateway, prometheus_client))
    registry.register(_StaleCollector(gateway))
    registry.register(_AffinityCollector(gateway))
    return registry, None


class _AffinityCollector:
    """With ``affinity``: ``chash_gateway_completions_routed_total{how}``
    and, when loads are shared, ``chash_gateway_shared_loads_up`` (0: cut
    off from Redis, routing on this gateway's own view)."""

    def __init__(self, gateway: object) -> None:
        self._gateway = gateway

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        prompts = getattr(self._gateway, "prompts", None)
        if prompts is None:
            return
        routed = CounterMetricFamily(
            "chash_gateway_completions_routed", "Completions routed by their prompt (prefix), "
            "their session (session) or to the least-loaded backend", labels=["how"])
        for how, count in prompts.routed_totals().items():
            routed.add_metric([how], float(count))
        yield routed
        if prompts.shared is not None:
            up = GaugeMetricFamily(
                "chash_gateway_shared_loads_up", "1 while the replicas' loads are read from "
                "Redis, 0 while this gateway routes on its own view")
            up.add_metric([], 1.0 if prompts.shared.up else 0.0)
            yield up


class _TunnelCollector:
    """The WebSocket tunnels' metrics, read from the view at each scrape:
    ``chash_tunnels_open{node}``, ``chash_tunnels_opened_total{node}``,
    ``chash_tunnels_closed_total{node,reason}``,
    ``chash_tunnel_bytes_total{direction}``."""

    def __init__(self, gateway: GatewayView, prometheus_client: Any) -> None:
        self._gateway = gateway
        self._metrics = prometheus_client.core

    def collect(self) -> Any:
        """The four families, as prometheus_client collects them."""
        core = self._metrics
        counts = self._gateway.tunnel_counts
        nodes = dict.fromkeys([*self._gateway.addresses, *counts.open, *counts.opened])
        open_ = core.GaugeMetricFamily("chash_tunnels_open", "WebSocket tunnels open, by node",
                                       labels=["node"])
        opened = core.CounterMetricFamily("chash_tunnels_opened",
                                          "WebSocket tunnels opened, by node", labels=["node"])
        for node in nodes:
            open_.add_metric([node], counts.open.get(node, 0))
            opened.add_metric([node], counts.opened.get(node, 0))
        closed = core.CounterMetricFamily("chash_tunnels_closed",
                                          "WebSocket tunnels closed, by node and reason",
                                          labels=["node", "reason"])
        for (node, reason), count in sorted(counts.closed.items()):
            closed.add_metric([node, reason], count)
        moved = core.CounterMetricFamily("chash_tunnel_bytes",
                                         "Bytes relayed by WebSocket tunnels, by direction",
                                         labels=["direction"])
        for direction, count in counts.bytes.items():
            moved.add_metric([direction], count)
        return [open_, opened, closed, moved]

    def describe(self) -> list[Any]:
        """Nothing up front: the families are built at each scrape."""
        return []


class _StaleCollector:
    """``chash_membership_stale_seconds{ring}``: how old the shared ring the
    gateway routes on may be (0 while its store answers); nothing without
    a shared ring."""

    def __init__(self, gateway: GatewayView) -> None:
        self._gateway = gateway

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        membership = self._gateway.membership
        stale = getattr(membership, "stale_seconds", None)
        if stale is None:
            return
        family = GaugeMetricFamily(
            "chash_membership_stale_seconds",
            "Seconds since the shared ring's store last answered, while it does not (0 while "
            "it does): routing goes on with the last ring", labels=["ring"])
        family.add_metric([str(getattr(membership, "name", ""))], float(stale))
        yield family


def status(gateway: GatewayView) -> dict[str, Any]:
    """The status page as a JSON-ready dict: the key rule, the ring, the
    membership, the health settings, each node, the request counts, and
    the configuration (its file, digest and reloads; None when the
    gateway is not reloaded)."""
    router = gateway.router
    checker = gateway.health
    health = checker.status() if checker is not None else {}
    snap = gateway.counters.snapshot()
    config = gateway.config
    membership = gateway.membership
    shared = None
    if membership is not None:
        shared = {name: getattr(membership, name, None)
                  for name in ("name", "version", "connected", "reporter", "stale_seconds",
                               "stale_since")}
    from chash.metrics import router_points

    points = router_points(router)
    tunnels = gateway.tunnel_counts
    return {
        "key": str(config.key_rule),
        "missing_key": config.missing_key,
        "started_at": gateway.started_at,
        "ring": {
            "nodes": len(router),
            "router": type(router).__name__,
            "points": None if points is None else sum(points.values()),
            "virtual_node_count": getattr(router, "virtual_node_count", None),
            "hash": router.hash if isinstance(router.hash, str) else repr(router.hash),
            "layout": router.layout,
            "fingerprint": router.fingerprint(),
        },
        "zone": config.zone,
        "tls": getattr(gateway, "tls_status", None),
        "membership": shared,
        "health": None if checker is None else {
            "interval": checker.interval,
            "timeout": checker.timeout,
            "fall": checker.fall,
            "rise": checker.rise,
            "panicking": checker.panicking,
        },
        "metrics": gateway.metrics_off or config.metrics_path,
        "nodes": _nodes(gateway, health, snap),
        "requests": dict(snap.requests),
        "retries": snap.retries,
        "tunnels": {
            "open": sum(tunnels.open.values()),
            "opened": sum(tunnels.opened.values()),
            "closed": _by_reason(tunnels.closed),
            "bytes": dict(tunnels.bytes),
        },
        "config": None if (reloads := getattr(gateway, "reloads", None)) is None
        else reloads.status(),
        # Completions routed by their prompt (affinity="prefix"): the
        # counts, the queued estimates, loads shared through Redis or not.
        **({"affinity": prompts.status()} if (prompts := getattr(gateway, "prompts", None))
           is not None else {}),
        # Each worker's own counts, when the view gathers several processes
        # (chash.gateway.workers.GroupView); absent for a single process.
        **({"workers": workers} if (workers := getattr(gateway, "workers", None)) is not None
           else {}),
    }


def _nodes(gateway: GatewayView, health: dict[str, NodeStatus],
           snap: CountersSnapshot) -> list[dict[str, Any]]:
    """One entry per node: every configured backend, then any other node
    the ring or the health checker knows."""
    router = gateway.router
    from chash.metrics import router_points

    ownership = router.ownership()
    points = router_points(router) or {}
    weights = router.weights
    loads = gateway.loads
    hints = gateway.hints
    zones = gateway.zones
    tunnels = gateway.tunnel_counts
    nodes = []
    for node in dict.fromkeys([*gateway.addresses, *router.nodes, *health]):
        node_status = health.get(node)
        entry: dict[str, Any] = {
            "node": node,
            "address": gateway.address_of(node),
            "zone": zones.get(node),
            "in_ring": node in router,
            "weight": weights.get(node, getattr(node_status, "weight", None)),
            "points": points.get(node, 0),
            "ownership": ownership.get(node, 0.0),
            "in_flight": loads.get(node, 0),
            "tunnels": tunnels.open.get(node, 0),
            "lookups": snap.lookups.get(node, 0),
            "upstream_ok": snap.upstream_ok.get(node, 0),
            "upstream_errors": snap.upstream_errors.get(node, 0),
            "health": None if node_status is None else _health(node, node_status, snap),
        }
        if node in hints:
            entry["hint"] = hints[node]
        nodes.append(entry)
    return nodes


def _by_reason(closed: dict[tuple[str, str], int]) -> dict[str, int]:
    """Tunnels closed, by reason (all nodes)."""
    reasons: dict[str, int] = {}
    for (_, reason), count in closed.items():
        reasons[reason] = reasons.get(reason, 0) + count
    return reasons


def _health(node: str, node_status: NodeStatus, snap: CountersSnapshot) -> dict[str, Any]:
    """The health checker's view of ``node``, with its transitions by state."""
    return {
        "state": str(node_status.state),
        "in_service": node_status.in_service,
        "consecutive_successes": node_status.consecutive_successes,
        "consecutive_failures": node_status.consecutive_failures,
        "last_error": node_status.last_error,
        "last_latency": node_status.last_latency,
        "last_check": node_status.last_check,
        "last_change": node_status.last_change,
        "transitions": {state: count for (n, state), count
                        in snap.transitions.items() if n == node},
    }


def make_app(gateway: GatewayView) -> web.Application:
    """The admin application: the status page, the metrics (or, at the
    metrics path, why they are off) and ``POST /-/reload`` (answered with
    the reload's outcome as JSON: 200 applied, 409 refused, 422 the
    configuration does not validate).  MissingExtra without aiohttp."""
    aioweb = _web()
    config = gateway.config

    async def handle_status(request: web.Request) -> web.StreamResponse:
        page: web.Response = aioweb.Response(text=json.dumps(status(gateway), indent=2) + "\n",
                                             content_type="application/json")
        return page

    async def handle_metrics(request: web.Request) -> web.StreamResponse:
        registry = gateway.registry
        answer: web.Response
        if registry is None:
            answer = aioweb.Response(status=404, text=f"chash gateway: {gateway.metrics_off}\n")
        else:
            prometheus_client = _prometheus()
            answer = aioweb.Response(
                body=prometheus_client.generate_latest(registry),
                headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})
        return answer

    async def handle_reload(request: web.Request) -> web.StreamResponse:
        reloads = getattr(gateway, "reloads", None)
        if reloads is None:
            body: dict[str, Any] = {"reloaded": False, "digest": None, "refused": [],
                                    "error": "this gateway is not reloaded"}
            code = 409
        else:
            outcome = reloads.reload()
            body, code = outcome.as_json(), outcome.status
        answer: web.Response = aioweb.Response(
            status=code, text=json.dumps(body, indent=2) + "\n", content_type="application/json")
        return answer

    app: web.Application = aioweb.Application()
    app.router.add_get(config.status_path, handle_status)
    app.router.add_post(RELOAD_PATH, handle_reload)
    app.router.add_get(config.metrics_path, handle_metrics)
    return app


async def start_admin(gateway: GatewayView, host: str, port: int,
                ) -> tuple[web.AppRunner, list[tuple[str, int]]]:
    """Serve the admin application on ``host:port``; the runner and the
    addresses bound.  MissingExtra without aiohttp."""
    aioweb = _web()
    runner: web.AppRunner = aioweb.AppRunner(make_app(gateway), access_log=None,
                                             shutdown_timeout=1.0)
    await runner.setup()
    try:
        await aioweb.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, [(str(a[0]), int(a[1])) for a in runner.addresses]
