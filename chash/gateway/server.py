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
With a shared membership, a node this gateway's own health checks hold
down stays in the shared ring until a quorum of the gateways votes it down
(one gateway's view is not a verdict), but here it is tried last for every
key, so its keys fail over to the next nodes of their preference list at
once instead of waiting on it (``LocalVerdicts``).

With a shared membership, the zones the shared ring holds (``chash ring add
NODE --zone Z``: ``membership.state.zones``) come first, read at each
lookup so that a zone changed in the store is followed with the ring; the
gateway's own (``zones``) stand for the nodes the shared ring gives none.

Building a ``Gateway`` needs aiohttp and httptools (``pip install 'chash-router[gateway]'``);
importing this module does not.  See docs/gateway.md.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chash._chash import ConsistentHashRouter, JumpRouter
from chash._optional import require
from chash._text import plural
from chash.gateway.admin import make_registry, start_admin
from chash.gateway.admin import status as admin_status
from chash.gateway.config import GatewayConfig, KeyRule
from chash.gateway.listener import TlsListener
from chash.gateway.llm import PromptRoutes
from chash.gateway.proxy import HealthReports, Proxy
from chash.gateway.reload import LIVE_SETTINGS, ReloadError, Reloads, RingChanges
from chash.gateway.session_tickets import new_ticket_keys, set_ticket_keys, ticket_keys_for
from chash.gateway.shared_loads import SharedLoads
from chash.gateway.slow_start import WeightRamp
from chash.gateway.tls import certificate_digest, server_context
from chash.gateway.tracing import attempt_tracer
from chash.gateway.tunnel import TunnelCounts, Tunnels
from chash.gateway.upstream import BackendTls, parse_backend, upstream_of
from chash.gateway.worker_loads import WorkerRow
from chash.metrics import RouteCounters
from chash.routers import Key, MutableRouter, Ranking
from chash.weights import set_weight, weightless
from chash.zones import LocalFirst

if TYPE_CHECKING:
    from aiohttp import web

    from chash.health import AsyncHealthChecker, Membership

__all__ = ["Gateway", "GatewayParts", "LocalVerdicts", "OnChange", "SharedZones"]


class LocalVerdicts:
    """Routes that try last the nodes in ``down`` (read at each lookup, kept
    by the caller: the nodes this gateway's own health checks hold down
    while a shared ring keeps them); otherwise ``routes``' own order, so
    with nothing held down every answer is ``routes``'.  A node held down
    is still tried when the others fail: it is the shared ring's, and this
    gateway's view may be the partial one."""

    def __init__(self, routes: Ranking, down: Set[str]) -> None:
        self._routes = routes
        self._down = down

    def get_preference_list(self, key: Key, n: int, /) -> list[str]:
        """Up to ``n`` nodes to try in turn: ``routes``' preference list,
        the nodes held down moved to its end."""
        down = self._down
        if not down:
            return self._routes.get_preference_list(key, n)
        nodes = self._routes.get_preference_list(key, n + len(down))
        return ([node for node in nodes if node not in down]
                + [node for node in nodes if node in down])[:n]


class SharedZones(Mapping[str, str]):
    """The nodes' zones with a shared membership: those its ring holds
    (``membership.state.zones``, as last applied), and for a node it gives
    none, the gateway's ``own``.  Read at each lookup, never copied, so a
    zone changed in the store is followed as the ring is.  A membership
    without zones (one that has not synced yet, or of a ring stored before
    zones were) leaves the gateway's own."""

    def __init__(self, own: Mapping[str, str], membership: object) -> None:
        self._own = own
        self._membership = membership

    def _shared(self) -> Mapping[str, str]:
        state = getattr(self._membership, "state", None)
        zones = getattr(state, "zones", None)
        return zones if isinstance(zones, Mapping) else {}

    def __getitem__(self, node: str) -> str:
        zone = self._shared().get(node)
        return self._own[node] if zone is None else zone

    def __iter__(self) -> Iterator[str]:
        shared = self._shared()
        yield from shared
        yield from (node for node in self._own if node not in shared)

    def __len__(self) -> int:
        shared = self._shared()
        return len(shared) + sum(1 for node in self._own if node not in shared)

logger = logging.getLogger("chash.gateway")

#: ``on_change(node, old state, new state, reason)``, called on each health
#: transition of the checker a ``Gateway`` builds.
OnChange = Callable[[str, Any, Any, str], object]


class Gateway:
    """A sticky reverse proxy in front of a set of HTTP backends.

    Arguments:
        backends: backend addresses (``host:port``, or ``https://host:port``
            spoken to over TLS), each its own node name;
            or a mapping ``{node name: address}``, so that the ring (and so
            every key's placement) does not depend on addresses.
        config: a ``GatewayConfig``; the defaults if None.
        router: the ring (the balancer) to route through; by default the
            membership's router, or a new ``ConsistentHashRouter()``.  A
            ``MaglevRouter`` or a ``RendezvousRouter`` does as well, with
            neither zones nor a shared membership (both keep a ring); a
            ``JumpRouter`` is refused (TypeError), since a gateway must drop
            a backend from the middle of its list.  Slow start needs a
            layout with weights.
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
            With a membership whose shared ring gives a node a zone
            (``state.zones``), that zone is the node's.
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
        tls_ticket_keys: the key material (80 bytes,
            ``chash.gateway.session_tickets``) that TLS session tickets are
            sealed with (rederived when a reload changes the client CAs,
            ciphers or minimum version; a renewed certificate keeps them);
            the workers of ``chash gateway --workers N`` share one, so a
            client resumes on any of them.  By default new random keys of
            this gateway's own.
        worker_loads: with ``config.affinity``, this worker's row of the
            table of loads the workers of ``chash gateway --workers N``
            share (``chash.gateway.worker_loads``): completions are routed
            on every worker's in-flight counts and queued work.  None: on
            this process's.
    """

    def __init__(
        self,
        backends: Iterable[str] | Mapping[str, str] = (),
        config: GatewayConfig | None = None,
        *,
        router: MutableRouter | None = None,
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
        tls_ticket_keys: bytes | None = None,
        worker_loads: WorkerRow | None = None,
    ) -> None:
        """See the class docstring.  ``GatewayParts.build`` makes the
        collaborators from the arguments; they are stored here, and the
        metrics registered on ``registry`` read this gateway.  Raises
        ImportError (``MissingExtra``) without aiohttp."""
        parts = GatewayParts.build(
            backends, config, router=router, weights=weights, zones=zones, health=health,
            membership=membership, counters=counters, health_reports=health_reports,
            tracer_provider=tracer_provider, ramp=ramp, tls_ticket_keys=tls_ticket_keys,
            worker_loads=worker_loads, health_url=self._health_url,
            health_changed=self._health_changed)
        self._config = parts.config
        self._key = parts.config.key_rule
        self._addresses = parts.addresses
        self._router = parts.router
        self._zones = parts.zones
        self._zoning = parts.zoning
        self._membership = parts.membership
        self._ramp = parts.ramp
        #: Nodes this gateway's own checks hold down while a shared ring
        #: keeps them (without a membership they leave the router itself).
        self._held_down = parts.held_down
        self._counters = parts.counters
        self._backend_tls = parts.backend_tls
        self._health = parts.health
        self._own_health = parts.own_health
        self._verdicts = parts.verdicts
        self._tunnels = parts.tunnels
        self._proxy = parts.proxy
        self._ticket_keys = parts.ticket_keys
        self._tls = parts.tls
        self._tls_certificate = parts.tls_certificate
        self._on_change = on_change
        self._started_at: float | None = None
        self._hints: dict[str, str] = {}
        self._server: asyncio.AbstractServer | None = None
        self._admin_runner: web.AppRunner | None = None
        self._tls_listener: TlsListener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._bound: list[tuple[str, int]] = []
        self._admin_bound: list[tuple[str, int]] = []
        self._registry, self._metrics_off = make_registry(self, parts.config.metrics, registry)
        #: What reloads this gateway (``chash.gateway.supervisor.Reloader``),
        #: served at ``POST /-/reload`` and shown on the status page; None:
        #: the gateway is not reloaded.
        self.reloads: Reloads | None = None

    # -- properties ----------------------------------------------------------

    @property
    def config(self) -> GatewayConfig:
        """The settings."""
        return self._config

    @property
    def router(self) -> MutableRouter:
        """The router (ring, Maglev or rendezvous) requests are routed through."""
        return self._router

    @property
    def zones(self) -> dict[str, str]:
        """``{node: zone}`` of every node with a zone (the shared ring's
        first, with a membership)."""
        return dict(self._zoning)

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
        """``{node: address}`` of every configured backend (``host:port``, or
        ``https://host:port`` for a TLS one)."""
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
    def prompts(self) -> PromptRoutes | None:
        """How completions are routed by their prompt (``affinity``
        ``"prefix"``), or None."""
        return self._proxy.prompts

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
        """``http://host:port`` of the first listening socket
        (``https://`` with TLS)."""
        if not self._bound:
            raise RuntimeError("the gateway is not listening")
        return _url(*self._bound[0], scheme="https" if self._tls is not None else "http")

    @property
    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS context new client connections handshake with (a
        reload replaces it), or None for a plain-HTTP listener."""
        return self._tls

    @property
    def tls_certificate(self) -> str | None:
        """The SHA-256 of the certificate new TLS handshakes are served
        (``openssl x509 -fingerprint -sha256``'s hex), or None without TLS."""
        return self._tls_certificate

    @property
    def tls_handshake_failures(self) -> int:
        """Client handshakes that failed since the start."""
        return self._tls_listener.failures if self._tls_listener is not None else 0

    @property
    def tls_status(self) -> dict[str, Any] | None:
        """The TLS listener as the status page shows it, or None without TLS."""
        config = self._config
        if config.tls_cert is None:
            return None
        return {"certificate": config.tls_cert, "certificate_sha256": self._tls_certificate,
                "min_version": config.tls_min_version, "client_ca": config.tls_client_ca,
                "handshake_failures": self.tls_handshake_failures}

    def _current_tls(self) -> ssl.SSLContext:
        assert self._tls is not None
        return self._tls

    @property
    def admin_url(self) -> str | None:
        """``http://host:port`` of the admin listener, or None without one."""
        return _url(*self._admin_bound[0]) if self._admin_bound else None

    @property
    def started_at(self) -> float | None:
        """When the gateway started listening (``time.time()``), or None."""
        return self._started_at

    def address_of(self, node: str) -> str:
        """The address ``node`` is reached at: ``host:port``, or
        ``https://host:port`` for a TLS backend."""
        return self._addresses.get(node, node)

    def _health_url(self, node: str) -> str:
        upstream = upstream_of(self.address_of(node))
        if not upstream.secure:
            return f"http://{upstream.authority.decode()}{self._config.health_path}"
        if self._own_health and self._health is not None \
                and self._health.ssl_context is None:  # an https node new here
            self._health.ssl_context = self._backend_tls.context()
        return f"https://{upstream.authority.decode()}{self._config.health_path}"

    def _health_changed(self, node: str, old: Any, new: Any, reason: str) -> None:
        self._counters.health_change(node, old, new, reason)
        if self._membership is not None:
            if str(new) == "down":
                self._held_down.add(node)
            else:
                self._held_down.discard(node)
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
        self._tunnels.ring_changed()  # the verdict is applied: what moved
        if self._on_change is not None:
            self._on_change(node, old, new, reason)

    def ring_changed(self) -> None:
        """Tell the gateway that its ring changed, so that the WebSocket
        tunnels it moved close now (``on_ring_change``) and the prompt
        routes drop what they hold of nodes that left.  The gateway
        calls it itself after each change it makes or hears of: health
        verdicts, reloads, slow-start steps, the leader's batches with
        ``--workers N``, a membership's new versions, a record set of
        ``--dns-srv``; call it after changing ``router`` yourself.  Safe
        from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return  # not running: no tunnel
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._ring_changed_here()
        else:
            loop.call_soon_threadsafe(self._ring_changed_here)

    def _ring_changed_here(self) -> None:
        """ring_changed on the gateway's loop: the tunnels moved close, and
        what the prompt routes hold of nodes gone is dropped."""
        self._tunnels.ring_changed()
        self._forget_gone()

    def _forget_gone(self) -> None:
        """Drop the prompt routes' records of the nodes that left the
        configuration: neither in the ring nor watched by the health
        checks (which keep a node they took out).  A node a verdict holds
        down keeps its record."""
        prompts = self._proxy.prompts
        if prompts is None:
            return
        router = self._router
        watched = getattr(self._verdicts, "watched_nodes", None)
        known: Mapping[str, float] = watched() if callable(watched) else {}
        prompts.prune(lambda node: node in router or node in known or node in self._held_down)

    # -- reload ----------------------------------------------------------------

    def reconfigure(self, config: GatewayConfig, changes: RingChanges) -> tuple[str, ...]:
        """Apply a reload: the ring's and the backends' ``changes``, and
        ``config``'s settings; the names of the settings changed.

        The one place where a reload takes effect.  Everything is done in
        one step, with nothing awaited in between, so that no request is
        routed on half of it: a removed node leaves the ring (and the
        health checks: ``forget``), an added one joins it, a changed
        weight moves only that node's keys.  Requests, tunnels and
        connections already under way keep their node and the settings
        they started with; those after take the new ones.  Raises
        ``ReloadError``, changing nothing, if ``config`` changes a setting
        outside ``chash.gateway.reload.LIVE_SETTINGS``.  With a shared
        ring (a Redis or etcd membership) the caller edits no node: the
        store's nodes are changed through the store."""
        old = self._config
        changed = tuple(name for name in old.__dataclass_fields__
                        if getattr(old, name) != getattr(config, name))
        fixed = [name for name in changed if name not in LIVE_SETTINGS]
        if fixed:
            raise ReloadError(f"cannot change while running: {', '.join(fixed)}", tuple(fixed))
        if old.tls != config.tls:  # the listener is a TLS one or a plain one for its life
            raise ReloadError("tls_cert: TLS cannot be turned on or off while the gateway runs "
                              "(restart it to)", ("tls_cert",))
        # The certificate files are read again even when their names did not
        # change (a renewed certificate), and a whole new context is built
        # before anything changes: one that does not load changes nothing.
        try:
            tls = _tls_context(config, self._ticket_keys)
            certificate = _certificate(config)
            backend_tls = BackendTls(
                config.backend_ca, config.backend_insecure,
                eager=self._backend_tls.built or any(upstream_of(a).secure
                                                     for a in changes.addresses.values()))
        except ValueError as exc:
            raise ReloadError(str(exc)) from None
        router = self._router
        ring = router if isinstance(router, ConsistentHashRouter) else None
        # What the router cannot take is refused before anything changes.
        if ring is None and any(zone is not None for zone in changes.zones.values()):
            raise ReloadError(f"zones are the ConsistentHashRouter's (a {type(router).__name__} has none)")
        if weightless(router) and any(weight != 1 for weight in
                                      (*changes.weights.values(), *changes.added.values())):
            raise ReloadError(f"the {router.layout} layout has no weights: every node's is 1")
        forget = getattr(self._verdicts, "forget", None)
        reweigh = getattr(self._verdicts, "reweigh", None)
        ramp = self._ramp
        for node in changes.removed:
            if ramp is not None:
                ramp.reset(node, None)
            if callable(forget):
                forget(node)
            elif node in router:
                router.remove_service_node(node)
            self._addresses.pop(node, None)
            self._zones.pop(node, None)
            self._proxy.drop_pool(node)
        for node, zone in changes.zones.items():
            if zone is None:
                self._zones.pop(node, None)
            else:
                self._zones[node] = zone
            if ring is not None and node in ring:  # the zone is the ring's: the node again, same points
                weight = ring.weights[node]
                ring.remove_service_node(node)
                ring.add_service_node(node, weight, zone=zone)
        for node, weight in changes.weights.items():
            if ramp is not None:  # the reload's weight is final: no ramp overrides it
                ramp.reset(node, weight)
            if node in router:
                set_weight(router, node, weight)
            elif callable(reweigh):  # taken out by health checks: back with this weight
                reweigh(node, weight)
        for node, address in changes.addresses.items():
            self._addresses[node] = address
            self._proxy.drop_pool(node)
        for node, weight in changes.added.items():
            if ring is not None and node not in ring:
                ring.add_service_node(node, weight, zone=self._zones.get(node))
            elif node not in router:
                router.add_service_node(node, weight)
        resync = getattr(self._verdicts, "resync", None)
        if changes.added and callable(resync):  # a follower of --workers N: the leader's
            resync()                            # verdicts on the nodes new here
        self._config = config
        self._key = config.key_rule
        self._proxy.reconfigure(config, backend_tls)
        if not backend_tls.same_as(self._backend_tls):
            self._backend_tls = backend_tls
            if self._own_health and self._health is not None and backend_tls.built:
                self._health.ssl_context = backend_tls.context()
        self._tunnels.reconfigure(config)
        self._ring_changed_here()  # a removed node has left the ring and the checks
        # The new TLS context serves the handshakes from now on; connections
        # already open keep theirs.
        self._tls, self._tls_certificate = tls, certificate
        if self._tls_listener is not None:
            self._tls_listener.handshake_timeout = config.tls_handshake_timeout
        return changed

    # -- lifecycle -----------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0, *,
                    reuse_port: bool = False, sock: socket.socket | None = None) -> str:
        """Listen on ``host:port`` (0: any free port) or on ``sock``, start
        the admin listener if configured and the health checks; return the
        gateway's URL.  ``reuse_port`` lets several processes listen on one
        port (SO_REUSEPORT)."""
        if self._server is not None or self._tls_listener is not None:
            raise RuntimeError("the gateway is already running")
        loop = self._loop = asyncio.get_running_loop()
        add_listener = getattr(self._membership, "add_listener", None)
        if callable(add_listener):  # a shared ring: its new versions
            add_listener(self.ring_changed)
        if self._tls is not None:
            listener = TlsListener(self._proxy.accept, self._current_tls,
                                   self._config.tls_handshake_timeout)
            await listener.start(host, port, reuse_port=reuse_port, sock=sock)
            self._tls_listener = listener
            sockets: Iterable[Any] = listener.sockets
        else:
            if sock is not None:
                server = await loop.create_server(self._proxy.accept, sock=sock, backlog=1024)
            else:
                server = await loop.create_server(self._proxy.accept, host, port, backlog=1024,
                                                  reuse_port=reuse_port or None)
            self._server = server
            sockets = server.sockets
        self._bound = [(str(s.getsockname()[0]), int(s.getsockname()[1])) for s in sockets]
        try:
            if self._config.admin_listen is not None:
                self._admin_runner, self._admin_bound = await start_admin(
                    self, *self._config.admin_listen)
            self._started_at = time.time()
            if self._ramp is not None:
                self._ramp.start(on_change=self._tunnels.ring_changed)
            if self._health is not None and not self._health.running:
                await self._health.start()
            if self._proxy.prompts is not None:
                await self._proxy.prompts.start()
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
        remove_listener = getattr(self._membership, "remove_listener", None)
        if callable(remove_listener):
            remove_listener(self.ring_changed)
        if self._proxy.prompts is not None:
            await self._proxy.prompts.stop()
        server, self._server = self._server, None
        if server is not None:
            server.close()
        listener, self._tls_listener = self._tls_listener, None
        if listener is not None:
            listener.close()
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


@dataclass(frozen=True, eq=False)
class GatewayParts:
    """The collaborators a ``Gateway`` runs with, made from its arguments by
    ``GatewayParts.build`` (which ``Gateway(...)`` calls) and stored by
    ``Gateway.__init__``.  Each field is what the gateway keeps under that
    name; see ``Gateway`` for the arguments they come from."""

    config: GatewayConfig
    #: ``{node: address}`` of every configured backend.
    addresses: dict[str, str]
    router: MutableRouter
    #: The gateway's own zones (``zones``, or the ring's).
    zones: dict[str, str]
    #: The zones lookups read: ``zones``, or the shared ring's first
    #: (``SharedZones``) with a membership.
    zoning: Mapping[str, str]
    membership: Membership | None
    ramp: WeightRamp | None
    #: The nodes this gateway's own checks hold down while a shared ring
    #: keeps them (read at each lookup by ``LocalVerdicts``).
    held_down: set[str]
    counters: RouteCounters
    backend_tls: BackendTls
    health: AsyncHealthChecker | None
    #: Whether ``health`` was built here (its TLS context is then ours).
    own_health: bool
    #: What applies the health verdicts to this ring (a reload forgets a
    #: removed node there): the checker's membership, or the one a worker
    #: of --workers N follows its leader's verdicts through.
    verdicts: object
    tunnels: Tunnels
    proxy: Proxy
    ticket_keys: bytes
    #: The listener's TLS context (None: plain HTTP), built now so that a
    #: certificate that does not load is told before anything listens.
    tls: ssl.SSLContext | None
    tls_certificate: str | None

    @classmethod
    def build(
        cls,
        backends: Iterable[str] | Mapping[str, str] = (),
        config: GatewayConfig | None = None,
        *,
        router: MutableRouter | None = None,
        weights: Mapping[str, float] | None = None,
        zones: Mapping[str, str] | None = None,
        health: AsyncHealthChecker | None = None,
        membership: Membership | None = None,
        counters: RouteCounters | None = None,
        health_reports: HealthReports | None = None,
        tracer_provider: Any = None,
        ramp: WeightRamp | None = None,
        tls_ticket_keys: bytes | None = None,
        worker_loads: WorkerRow | None = None,
        health_url: Callable[[str], str] | None = None,
        health_changed: OnChange | None = None,
    ) -> GatewayParts:
        """The collaborators of a gateway with these arguments (those of
        ``Gateway``): the arguments checked, the backends missing from the
        router added to it, and the health checker, the ramp, the routes,
        the tunnels, the proxy and the TLS contexts made.  ``health_url``
        and ``health_changed`` are what a health checker built here calls
        (the gateway's own URL and transition handlers; by default
        ``http://{node}<health_path>`` and nothing).  TypeError or
        ValueError naming what is wrong with an argument."""
        require("aiohttp", user="chash.gateway", extra="gateway")
        require("httptools", user="chash.gateway", extra="gateway")
        config = _checked(config, health)
        addresses = _addresses(backends)
        router, zones = _filled(router, config, addresses, weights=weights, zones=zones,
                                membership=membership)
        if config.slow_start and membership is not None and ramp is None:
            raise ValueError("slow_start ramps the gateway's own ring: with a membership the "
                             "shared ring's weights come from its store")
        if ramp is None and config.slow_start:
            ramp = WeightRamp(router, config.slow_start)
        zoning: Mapping[str, str] = zones if membership is None else \
            SharedZones(zones, membership)
        routes: Ranking = LocalFirst(router, config.zone, zoning) \
            if isinstance(router, ConsistentHashRouter) and config.zone is not None else router
        held_down: set[str] = set()
        if membership is not None:
            routes = LocalVerdicts(routes, held_down)
        # The context of https:// backends, built now when one is known (or
        # may come from a shared ring) so that a CA bundle that does not
        # load is told before anything listens, and the health checks have it.
        backend_tls = BackendTls(
            config.backend_ca, config.backend_insecure,
            eager=membership is not None or any(upstream_of(a).secure
                                                for a in addresses.values()))
        own_health = health is None and config.health
        if own_health:
            from chash.health import AsyncHealthChecker

            health = AsyncHealthChecker(
                None if membership is not None else router, membership=membership,
                url=health_url if health_url is not None else f"http://{{node}}{config.health_path}",
                interval=config.health_interval, timeout=config.health_timeout,
                fall=config.fall, rise=config.rise, on_change=health_changed,
                ssl_context=backend_tls.context() if backend_tls.built else None)

        def owner(key: bytes) -> str | None:
            nodes = routes.get_preference_list(key, 1)
            return nodes[0] if nodes else None

        counters = counters if counters is not None else RouteCounters()
        tunnels = Tunnels(config, owner, router.__contains__)
        proxy = Proxy(config, routes, addresses, counters,
                      health if health is not None else health_reports,
                      attempt_tracer(config.tracing, tracer_provider), tunnels, backend_tls)
        if config.affinity == "prefix":
            if worker_loads is not None:  # the proxy's counts written through to the table
                proxy.in_flight = worker_loads.in_flight
            prompts = proxy.prompts = PromptRoutes(routes, router, proxy.in_flight,
                                                   workers=worker_loads)
            if config.shared_loads is not None:
                # A gateway of N workers is one replica, which worker 0 publishes.
                prompts.shared = SharedLoads(
                    config.shared_loads, prompts.own_view, prefix=config.shared_loads_key,
                    instance=None if worker_loads is None else worker_loads.table.name,
                    publish=worker_loads is None or worker_loads.worker == 0)
        ticket_keys = new_ticket_keys() if tls_ticket_keys is None else tls_ticket_keys
        return cls(
            config=config, addresses=addresses, router=router, zones=zones, zoning=zoning,
            membership=membership, ramp=ramp, held_down=held_down, counters=counters,
            backend_tls=backend_tls, health=health, own_health=own_health,
            verdicts=getattr(health, "membership", None) if health is not None
            else health_reports,
            tunnels=tunnels, proxy=proxy, ticket_keys=ticket_keys,
            tls=_tls_context(config, ticket_keys), tls_certificate=_certificate(config))


def _checked(config: GatewayConfig | None, health: object) -> GatewayConfig:
    """``config`` (the defaults if None); TypeError for a ``config`` or a
    ``health`` of the wrong kind."""
    if config is not None and not isinstance(config, GatewayConfig):
        raise TypeError(f"config must be a GatewayConfig, not {type(config).__name__}")
    if isinstance(health, bool):
        raise TypeError("health takes a health checker (chash.health.AsyncHealthChecker) or "
                        "None; to turn the checks off, pass GatewayConfig(health=False)")
    if health is not None and not callable(getattr(health, "report_failure", None)):
        raise TypeError(f"health must be a health checker (chash.health.AsyncHealthChecker), "
                        f"not {type(health).__name__}")
    return config if config is not None else GatewayConfig()


def _addresses(backends: Iterable[str] | Mapping[str, str]) -> dict[str, str]:
    """``{node: address}`` of ``backends`` (a list of addresses, each its own
    node, or a mapping); ValueError for an address listed twice."""
    if isinstance(backends, Mapping):
        return {str(node): parse_backend(addr) for node, addr in backends.items()}
    addresses: dict[str, str] = {}
    for addr in backends:
        address = parse_backend(addr)
        if address in addresses:
            raise ValueError(f"backend {address} is listed twice")
        addresses[address] = address
    return addresses


def _filled(router: MutableRouter | None, config: GatewayConfig, addresses: Mapping[str, str],
            *, weights: Mapping[str, float] | None, zones: Mapping[str, str] | None,
            membership: Membership | None) -> tuple[MutableRouter, dict[str, str]]:
    """The router to route through (by default the membership's, or a new
    ring) and the nodes' zones, the backends missing from it added (without
    a membership: then the shared ring says which nodes are in); TypeError
    or ValueError for a router the settings cannot use."""
    if router is None:
        router = getattr(membership, "router", None) or ConsistentHashRouter()
    if isinstance(router, JumpRouter):
        raise TypeError("a gateway cannot route through a JumpRouter: it must take a failed "
                        "backend out wherever it sits, and jump drops only its last bucket; "
                        "use a ConsistentHashRouter, a MaglevRouter or a RendezvousRouter")
    ring = router if isinstance(router, ConsistentHashRouter) else None
    # (A shared membership refuses a router other than a ring itself.)
    if ring is None and (zones or config.zone is not None):
        raise ValueError(f"zones are the ConsistentHashRouter's (a {type(router).__name__} "
                         "has none)")
    if config.slow_start and weightless(router):
        raise ValueError(f"slow_start ramps weights: the {router.layout} layout has none")
    own = dict((ring.zones if ring is not None else {}) if zones is None else zones)
    if membership is None:
        for node in addresses:
            if node not in router:
                weight = (weights or {}).get(node, 1.0)
                if ring is not None:
                    ring.add_service_node(node, weight, zone=own.get(node))
                else:
                    router.add_service_node(node, weight)
    return router, own


def _url(host: str, port: int, scheme: str = "http") -> str:
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def _certificate(config: GatewayConfig) -> str | None:
    return None if config.tls_cert is None else certificate_digest(config.tls_cert)


def _tls_context(config: GatewayConfig, ticket_keys: bytes) -> ssl.SSLContext | None:
    """The listener's TLS context of ``config`` (None without TLS), its
    session tickets sealed with ``ticket_keys``; ValueError naming the file
    that does not load."""
    if config.tls_cert is None:
        return None
    context = server_context(config.tls_cert, config.tls_key, ciphers=config.tls_ciphers,
                             min_version=config.tls_min_version, client_ca=config.tls_client_ca)
    # Who may resume: a session admitted under other client CAs, ciphers or
    # minimum version must not skip the new ones (a renewed certificate
    # changes none of them, and every session stays resumable).
    client_cas = b"" if config.tls_client_ca is None else _read(config.tls_client_ca)
    keys = ticket_keys_for(ticket_keys, client_cas, (config.tls_ciphers or "").encode(),
                           config.tls_min_version.encode())
    if not set_ticket_keys(context, keys):  # at a start or a reload: rare enough to say each time
        logger.warning("TLS session tickets: this Python's ssl module takes no shared ticket "
                       "keys here; a ticket resumes only on the worker that issued it, until "
                       "a reload")
    return context


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:  # server_context read it a moment ago
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None

