"""The gateway's admin listener: the JSON status page and Prometheus metrics.

Served by aiohttp on an address of its own (``GatewayConfig.admin_listen``),
never on the proxy's port: backend addresses and error messages are for
operators, not for every client.  Importing this module imports aiohttp;
``chash.gateway`` does so once, behind the extra's guard.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from chash.gateway import Gateway

__all__ = ["make_app", "make_registry", "start", "status"]


def make_registry(gateway: Gateway, metrics: bool | None, registry: Any) -> tuple[Any, str | None]:
    """``(registry, None)`` when metrics are served, else ``(None, why not)``.

    ``metrics``: True requires prometheus_client (ImportError naming the
    extra), None serves metrics if it is installed, False never.
    """
    if metrics is False:
        return None, "metrics are turned off"
    try:
        import prometheus_client

        from chash.metrics import RouterCollector
    except ImportError as exc:
        if metrics:
            raise ImportError("metrics need prometheus_client: "
                              "pip install 'chash-router[metrics]'") from exc
        return None, ("metrics are off: prometheus_client is not installed "
                      "(pip install 'chash-router[metrics]')")
    collector = RouterCollector(gateway.router, health=gateway.health, load=gateway,
                                counters=gateway.counters)
    if registry is None:
        registry = prometheus_client.CollectorRegistry()
    registry.register(collector)
    return registry, None


def status(gateway: Gateway) -> dict[str, Any]:
    """The status page as a JSON-ready dict."""
    router = gateway.router
    ownership = router.ownership()
    points = router.points
    weights = router.weights
    checker = gateway.health
    health = checker.status() if checker is not None else {}
    snap = gateway.counters.snapshot()
    loads = gateway.loads
    hints = gateway.hints
    nodes = []
    for node in dict.fromkeys([*gateway.addresses, *router.nodes, *health]):
        entry: dict[str, Any] = {
            "node": node,
            "address": gateway.address_of(node),
            "in_ring": node in router,
            "weight": weights.get(node, getattr(health.get(node), "weight", None)),
            "points": points.get(node, 0),
            "ownership": ownership.get(node, 0.0),
            "in_flight": loads.get(node, 0),
            "lookups": snap.lookups.get(node, 0),
            "upstream_ok": snap.upstream_ok.get(node, 0),
            "upstream_errors": snap.upstream_errors.get(node, 0),
            "health": None,
        }
        node_status = health.get(node)
        if node_status is not None:
            entry["health"] = {
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
        if node in hints:
            entry["hint"] = hints[node]
        nodes.append(entry)
    config = gateway.config
    membership = gateway.membership
    shared = None
    if membership is not None:
        shared = {name: getattr(membership, name, None)
                  for name in ("name", "version", "connected", "reporter")}
    return {
        "key": str(gateway.key_rule),
        "missing_key": config.missing_key,
        "started_at": gateway.started_at,
        "ring": {
            "nodes": len(router),
            "points": sum(points.values()),
            "virtual_node_count": router.virtual_node_count,
            "hash": router.hash if isinstance(router.hash, str) else repr(router.hash),
            "layout": router.layout,
            "fingerprint": router.fingerprint(),
        },
        "membership": shared,
        "health": None if checker is None else {
            "interval": checker.interval,
            "timeout": checker.timeout,
            "fall": checker.fall,
            "rise": checker.rise,
            "panicking": checker.panicking,
        },
        "metrics": gateway.metrics_off or config.metrics_path,
        "nodes": nodes,
        "requests": dict(snap.requests),
        "retries": snap.retries,
    }


def make_app(gateway: Gateway) -> web.Application:
    """The admin application: the status page and the metrics (or, at the
    metrics path, why they are off)."""
    config = gateway.config

    async def handle_status(request: web.Request) -> web.StreamResponse:
        return web.Response(text=json.dumps(status(gateway), indent=2) + "\n",
                            content_type="application/json")

    async def handle_metrics(request: web.Request) -> web.StreamResponse:
        registry = gateway.registry
        if registry is None:
            return web.Response(status=404, text=f"chash gateway: {gateway.metrics_off}\n")
        import prometheus_client

        return web.Response(body=prometheus_client.generate_latest(registry),
                            headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get(config.status_path, handle_status)
    app.router.add_get(config.metrics_path, handle_metrics)
    return app


async def start(gateway: Gateway, host: str, port: int,
                ) -> tuple[web.AppRunner, list[tuple[str, int]]]:
    """Serve the admin application on ``host:port``; the runner and the
    addresses bound."""
    runner = web.AppRunner(make_app(gateway), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, [(str(a[0]), int(a[1])) for a in runner.addresses]
