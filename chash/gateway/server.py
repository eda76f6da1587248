"""The ``Gateway``: a sticky HTTP reverse proxy routing through the ring.

Each request's key (a header, a cookie, a query parameter or the start of
the path; see ``KeyRule``) is looked up on a ``ConsistentHashRouter``: the
key's preference list (its owner, then the next distinct nodes clockwise)
says where the request goes and, if the owner fails, where it goes next.
The retry target is the node the ring would choose once the failed node is
out of it, so a user whose backend dies lands on the same backend during
the failure as after it, and comes home when the backend returns.

``Gateway`` holds the configuration (``GatewayConfig``), the collaborators
a library user may replace (the router, the health checker, the
membership), the listeners and the lifecycle.  The proxy path is
``chash.gateway.proxy.Proxy``, a lean HTTP/1.1 server and client on
``asyncio`` protocols; the admin listener (status page and metrics, off
unless configured) is the aiohttp application of ``chash.gateway.admin``.

Health: an ``AsyncHealthChecker`` probes every backend and takes failing
ones out of the ring (``fall`` failures) and back in (``rise`` successes);
the gateway feeds it the outcome of real requests as well: connection
errors and timeouts count as failures, an application's own 5xx answer
does not unless its status is listed in ``fail_on_status``.

Zones: with ``config.zone`` set, each key goes to the first node of that
zone clockwise from it, and its failover stays in the zone while the zone
has a node in the ring (``chash.zones.LocalFirst``), leaving it only then.

Building a ``Gateway`` needs aiohttp and httptools (``pip install 'chash-router[gateway]'``);
importing this module does not.  See docs/gateway.md.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import types
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from chash._chash import ConsistentHashRouter
from chash._optional import require
from chash._text import plural
from chash.gateway.admin import make_registry, start_admin
from chash.gateway.admin import status as admin_status
from chash.gateway.config import GatewayConfig, KeyRule, parse_address
from chash.gateway.proxy import HealthReports, Proxy, Routes
from chash.gateway.slow_start import WeightRamp
from chash.gateway.tracing import attempt_tracer
from chash.gateway.tunnel import TunnelCounts, Tunnels
from chash.metrics import RouteCounters
from chash.zones import LocalFirst

if TYPE_CHECKING:
    from aiohttp import web

    from chash.health import AsyncHealthChecker, Membership

__all__ = ["Gateway", "OnChange"]

logger = logging.getLogger("chash.gateway")

#: ``on_change(node, old state, new state, reason)``, called on each health
#: transition of the checker a ``Gateway`` builds.
OnChange = Callable[[str, Any, Any, str], object]


class Gateway:
    """A sticky reverse proxy in front of a set of HTTP backends.

    Arguments:
        backends: backend addresses (``host:port``), each its own node name;
            or a mapping ``{node name: address}``, so that the ring (and so
            every key's placement) does not depend on addresses.
        config: a ``GatewayConfig``; the defaults if None.
        router: the ring (the balancer) to route through; by default the
            membership's router, or a new ``ConsistentHashRouter()``.
            Backends missing from it are added with ``weights.get(node,
            1.0)``, unless a membership is given (then the shared ring says
            which nodes are in).
        weights: ``{node: weight}`` for the backends added to the ring.
        zones: ``{node: zone}``: the nodes' zones (datacentres, racks),
            which ``config.zone`` prefers; a node it does not name is in
            no zone.  Backends added to the ring get them too.  By default
            the router's own ``zones``.  Kept here rather than read from the
            ring, since a node taken out and put back (health checks, a
            shared membership) comes back to the ring without its zone.
        health: the health checker to report request outcomes to; by
            default one is built from the config (``config.health``), voting
            through ``membership`` when given.
        membership: where health verdicts go and nodes come from (a
            ``chash.membership.RedisMembership`` shares the ring with other
            gateways).  The caller starts and stops it.
        on_change: called as ``on_change(node, old, new, reason)`` on each
            health transition of the checker the gateway builds.
        registry: the Prometheus registry the admin listener serves; by
            default a private one holding this gateway's ``RouterCollector``.
        counters: the ``RouteCounters`` to count in (by default a new one).
        health_reports: where the outcomes of requests go when the gateway
            has no health checker of its own (``health`` None and
            ``config.health`` False): a worker of ``chash gateway --workers
            N`` forwards them to the one worker that probes.
        tracer_provider: the OpenTelemetry tracer provider the spans of
            attempts go to (None: the global one); see ``config.tracing``.
        ramp: the slow-start ramp that the health transitions drive; by
            default, with ``config.slow_start``, a ``WeightRamp`` on the
            router (which needs the gateway's own ring: no membership).
            Worker 0 of ``chash gateway --workers N`` gives one that applies
            every weight to the other workers' rings as well.
    """

    def __init__(
        self,
        backends: Iterable[str] | Mapping[str, str] = (),
        config: GatewayConfig | None = None,
        *,
        router: ConsistentHashRouter | None = None,
        weights: Mapping[str, float] | None = None,
        zones: Mapping[str, str] | None = None,
        health: AsyncHealthChecker | None = None,
        membership: Membership | None = None,
        on_change: OnChange | None = None,
        registry: Any = None,
        counters: RouteCounters | None = None,
        health_reports: HealthReports | None = None,
        tracer_provider: Any = None,
        ramp: WeightRamp | None = None,
    ) -> None:
        """See the class docstring.  Raises ImportError (``MissingExtra``)
        without aiohttp."""
        require("aiohttp", user="chash.gateway", extra="gateway")
        require("httptools", user="chash.gateway", extra="gateway")
        if config is not None and not isinstance(config, GatewayConfig):
            raise TypeError(f"config must be a GatewayConfig, not {type(config).__name__}")
        if isinstance(health, bool):
            raise TypeError("health takes a health checker (chash.health.AsyncHealthChecker) or "
                            "None; to turn the checks off, pass GatewayConfig(health=False)")
        if health is not None and not callable(getattr(health, "report_failure", None)):
            raise TypeError(f"health must be a health checker (chash.health.AsyncHealthChecker), "
                            f"not {type(health).__name__}")
        self._config = config = config if config is not None else GatewayConfig()
        if isinstance(backends, Mapping):
            addresses = {str(node): parse_address(addr) for node, addr in backends.items()}
        else:
            addresses = {}
            for addr in backends:
                address = parse_address(addr)
                if address in addresses:
                    raise ValueError(f"backend {address} is listed twice")
                addresses[address] = address
        self._addresses = addresses
        if router is None:
            router = getattr(membership, "router", None) or ConsistentHashRouter()
        self._router = router
        self._zones = dict(router.zones if zones is None else zones)
        if membership is None:
            for node in addresses:
                if node not in router:
                    router.add_service_node(node, (weights or {}).get(node, 1.0),
                                            zone=self._zones.get(node))
        self._membership = membership
        if config.slow_start and membership is not None and ramp is None:
            raise ValueError("slow_start ramps the gateway's own ring: with a membership the "
                             "shared ring's weights come from its store")
        if ramp is None and config.slow_start:
            ramp = WeightRamp(router, config.slow_start)
        self._ramp = ramp
        routes: Routes = router if config.zone is None else \
            LocalFirst(router, config.zone, self._zones)
        self._key = config.key_rule
        self._on_change = on_change
        self._counters = counters if counters is not None else RouteCounters()
        self._started_at: float | None = None
        self._hints: dict[str, str] = {}
        if health is None and config.health:
            from chash.health import AsyncHealthChecker

            health = AsyncHealthChecker(
                None if membership is not None else router, membership=membership,
                url=self._health_url, interval=config.health_interval,
                timeout=config.health_timeout, fall=config.fall, rise=config.rise,
                on_change=self._health_changed)
        self._health = health
        self._registry, self._metrics_off = make_registry(self, config.metrics, registry)
        self._server: asyncio.AbstractServer | None = None
        self._admin_runner: web.AppRunner | None = None
        def owner(key: bytes) -> str | None:
            nodes = routes.get_preference_list(key, 1)
            return nodes[0] if nodes else None

        self._tunnels = Tunnels(config, owner, router.__contains__, router.fingerprint)
        self._proxy = Proxy(config, routes, addresses, self._counters,
                            health if health is not None else health_reports,
                            attempt_tracer(config.tracing, tracer_provider), self._tunnels)
        self._bound: list[tuple[str, int]] = []
        self._admin_bound: list[tuple[str, int]] = []

    # -- properties ----------------------------------------------------------

    @property
    def config(self) -> GatewayConfig:
        """The settings."""
        return self._config

    @property
    def router(self) -> ConsistentHashRouter:
        """The ring requests are routed through."""
        return self._router

    @property
    def zones(self) -> dict[str, str]:
        """``{node: zone}`` of every node with a zone."""
        return dict(self._zones)

    @property
    def ramp(self) -> WeightRamp | None:
        """The slow-start ramp, or None without slow start."""
        return self._ramp

    @property
    def key_rule(self) -> KeyRule:
        """Where each request's key comes from."""
        return self._key

    @property
    def addresses(self) -> dict[str, str]:
        """``{node: host:port}`` of every configured backend."""
        return dict(self._addresses)

    @property
    def health(self) -> AsyncHealthChecker | None:
        """The health checker, or None if health checks are off."""
        return self._health

    @property
    def membership(self) -> Membership | None:
        """The membership given, or None."""
        return self._membership

    @property
    def counters(self) -> RouteCounters:
        """Requests, lookups, retries and health transitions counted so far."""
        return self._counters

    @property
    def loads(self) -> dict[str, int]:
        """``{node: requests in flight}`` for every configured backend."""
        return self._proxy.loads

    @property
    def tunnels(self) -> Tunnels:
        """The WebSocket tunnels of this gateway and their counts."""
        return self._tunnels

    @property
    def tunnel_counts(self) -> TunnelCounts:
        """The tunnels' counters now (open, opened, closed, bytes)."""
        return self._tunnels.counts()

    @property
    def status_path(self) -> str:
        """The path of the JSON status page on the admin listener."""
        return self._config.status_path

    @property
    def metrics_path(self) -> str:
        """The path of the Prometheus metrics on the admin listener."""
        return self._config.metrics_path

    @property
    def registry(self) -> Any:
        """The Prometheus registry served at the metrics path, or None."""
        return self._registry

    @property
    def metrics_off(self) -> str | None:
        """Why metrics are not served (None when they are)."""
        return self._metrics_off

    @property
    def hints(self) -> dict[str, str]:
        """Advice for the operator, by node (a health path answering 404...)."""
        return dict(self._hints)

    @property
    def bound(self) -> list[tuple[str, int]]:
        """``(host, port)`` of every listening socket, once started."""
        return list(self._bound)

    @property
    def url(self) -> str:
        """``http://host:port`` of the first listening socket."""
        if not self._bound:
            raise RuntimeError("the gateway is not listening")
        return _url(*self._bound[0])

    @property
    def admin_url(self) -> str | None:
        """``http://host:port`` of the admin listener, or None without one."""
        return _url(*self._admin_bound[0]) if self._admin_bound else None

    @property
    def started_at(self) -> float | None:
        """When the gateway started listening (``time.time()``), or None."""
        return self._started_at

    def address_of(self, node: str) -> str:
        """The ``host:port`` that ``node`` is reached at."""
        return self._addresses.get(node, node)

    def _health_url(self, node: str) -> str:
        return f"http://{self.address_of(node)}{self._config.health_path}"

    def _health_changed(self, node: str, old: Any, new: Any, reason: str) -> None:
        self._counters.health_change(node, old, new, reason)
        if self._ramp is not None:
            if str(new) == "up":
                self._ramp.node_up(node)
            elif str(new) == "down":
                self._ramp.node_down(node)
        if reason.endswith("HTTP 404") and node not in self._hints:
            hint = (f"{node} answers 404 on {self._config.health_path}: give a path it "
                    "serves with --health-path (GatewayConfig.health_path), or turn "
                    "probes off with --no-health")
            self._hints[node] = hint
            logger.warning("%s", hint, extra={"node": node})
        if self._on_change is not None:
            self._on_change(node, old, new, reason)

    # -- lifecycle -----------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0, *,
                    reuse_port: bool = False, sock: socket.socket | None = None) -> str:
        """Listen on ``host:port`` (0: any free port) or on ``sock``, start
        the admin listener if configured and the health checks; return the
        gateway's URL.  ``reuse_port`` lets several processes listen on one
        port (SO_REUSEPORT)."""
        if self._server is not None:
            raise RuntimeError("the gateway is already running")
        loop = asyncio.get_running_loop()
        if sock is not None:
            server = await loop.create_server(self._proxy.accept, sock=sock, backlog=1024)
        else:
            server = await loop.create_server(self._proxy.accept, host, port, backlog=1024,
                                              reuse_port=reuse_port or None)
        self._server = server
        self._bound = [(str(s.getsockname()[0]), int(s.getsockname()[1]))
                       for s in server.sockets]
        try:
            if self._config.admin_listen is not None:
                self._admin_runner, self._admin_bound = await start_admin(
                    self, *self._config.admin_listen)
            self._started_at = time.time()
            if self._ramp is not None:
                self._ramp.start()
            if self._health is not None and not self._health.running:
                await self._health.start()
        except BaseException:
            await self.stop()
            raise
        logger.info("gateway listening on %s, key %s, %s",
                    self.url, self._key, plural(len(self._addresses), "backend"))
        return self.url

    async def stop(self, grace: float = 5.0) -> None:
        """Stop listening, let requests in flight finish (``grace`` seconds
        at most), stop health checks, close every connection.  Safe to call
        more than once."""
        if self._health is not None:
            await self._health.stop()
        if self._ramp is not None:
            await self._ramp.stop()
        server, self._server = self._server, None
        if server is not None:
            server.close()
        runner, self._admin_runner = self._admin_runner, None
        if runner is not None:
            await runner.cleanup()
        await self._proxy.close(grace)
        if server is not None:
            await server.wait_closed()
        self._bound = []
        self._admin_bound = []

    async def __aenter__(self) -> Gateway:
        """``async with Gateway(...) as gw`` starts on 127.0.0.1, any port."""
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: types.TracebackType | None) -> None:
        """Stop the gateway."""
        await self.stop()

    # -- status --------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """What the admin status page shows, as a JSON-ready dict."""
        return admin_status(self)


def _url(host: str, port: int) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"
