"""A sticky HTTP reverse proxy that routes every request through the ring.

Each request's key (a header, a cookie, a query parameter or the start of
the path; see ``KeyRule``) is looked up on a ``ConsistentHashRouter``: the
key's preference list (its owner, then the next distinct nodes clockwise)
says where the request goes and, if the owner fails, where it goes next.
The retry target is the node the ring would choose once the failed node is
out of it, so a user whose backend dies lands on the same backend during
the failure as after it, and comes home when the backend returns.

Health: an ``AsyncHealthChecker`` probes every backend and takes failing
ones out of the ring (``fall`` failures) and back in (``rise`` successes);
the gateway feeds it the outcome of real requests as well, so a dead
backend is taken out after a few requests rather than a few probe rounds.

Retries: a request that could not be delivered (connection refused or
connect timeout) is retried on the next node, whatever its method.  A
request that may have reached the backend (disconnect, read timeout, or a
status in ``retry_statuses``) is retried only if its method is idempotent,
or if ``retry_unsafe`` is set.  Request bodies are read in full first (up
to ``max_body``) so that they can be sent again; responses are streamed,
so once a response has started it can no longer be retried.

Connections to backends are pooled in one ``aiohttp.ClientSession``.  The
gateway answers ``/-/status`` (JSON: ring, nodes, health, ownership,
counters) and, with prometheus_client installed, ``/metrics``; every other
path is proxied.  Needs aiohttp: ``pip install 'chash-router[gateway]'``.
See docs/gateway.md.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import time
import types
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chash import ConsistentHashRouter
from chash._text import plural
from chash.metrics import RouteCounters

if TYPE_CHECKING:
    import aiohttp
    from aiohttp import web

    from chash.health import AsyncHealthChecker
    from chash.metrics import RouterCollector

__all__ = [
    "IDEMPOTENT_METHODS",
    "KEY_SOURCES",
    "Gateway",
    "KeyRule",
    "parse_address",
]

logger = logging.getLogger("chash.gateway")

#: Where a routing key can come from (see ``KeyRule``).
KEY_SOURCES = ("header", "cookie", "query", "path")

#: Methods safe to send twice (RFC 9110 §9.2.2): retried after any failure.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})

# Hop-by-hop headers (RFC 9110 §7.6.1) are never forwarded, in either
# direction; nor are those the gateway recomputes itself.
_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
    "proxy-connection", "te", "trailer", "trailers", "transfer-encoding", "upgrade",
})
_NOT_FORWARDED = _HOP_BY_HOP | {"host", "content-length", "expect"}
# Never added by the client session on its own: the backend sees the
# client's headers, not the gateway's defaults.
_NO_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")

OnChange = Callable[[str, Any, Any, str], object]


def _require_aiohttp() -> None:
    """ImportError naming the extra unless aiohttp is installed.  Called by
    ``Gateway()``, so that every later local import of aiohttp succeeds."""
    try:
        import aiohttp.web  # noqa: F401
    except ImportError as exc:
        raise ImportError("chash.gateway needs aiohttp: pip install 'chash-router[gateway]'") from exc


# -- configuration ------------------------------------------------------------


@dataclass(frozen=True)
class KeyRule:
    """Where a request's routing key comes from.

    Written as a string, as on the command line:

    * ``header:NAME``: the value of header NAME (case-insensitive);
    * ``cookie:NAME``: the value of cookie NAME;
    * ``query:NAME``: the value of query parameter NAME (the first one);
    * ``path``: the first segment of the URL path (``/u42/cart`` -> ``u42``);
      ``path:N``: the first N segments joined by ``/`` (``path:2`` on
      ``/users/42/cart`` -> ``users/42``; fewer when the path is shorter).

    An empty value counts as no key.
    """

    source: str
    """One of ``KEY_SOURCES``."""
    name: str = ""
    """The header, cookie or parameter name ("" for ``path``)."""
    segments: int = 1
    """For ``path``: how many leading path segments make the key."""

    @classmethod
    def parse(cls, spec: str) -> KeyRule:
        """Parse ``header:NAME``, ``cookie:NAME``, ``query:NAME``, ``path`` or
        ``path:N``; ValueError with the reason otherwise."""
        source, sep, name = spec.partition(":")
        source = source.strip().lower()
        name = name.strip()
        if source == "path":
            if not sep:
                return cls("path")
            if not name.isdigit() or int(name) < 1:
                raise ValueError(f"in {spec!r}: path:N needs a whole number N >= 1")
            return cls("path", segments=int(name))
        if source not in KEY_SOURCES:
            raise ValueError(
                f"unknown key source {spec!r}: use header:NAME, cookie:NAME, "
                "query:NAME, path or path:N")
        if not name:
            raise ValueError(f"in {spec!r}: {source}: needs a name, as in {source}:user")
        if any(c.isspace() for c in name) or any(c in name for c in ":;,=\"()<>@[]{}/?\\"):
            raise ValueError(f"in {spec!r}: {name!r} is not a valid {source} name")
        return cls(source, name)

    def __str__(self) -> str:
        if self.source == "path":
            return "path" if self.segments == 1 else f"path:{self.segments}"
        return f"{self.source}:{self.name}"

    def extract(self, request: web.BaseRequest) -> str | None:
        """The key of ``request``, or None when it has none."""
        value: str | None
        if self.source == "header":
            value = request.headers.get(self.name)
        elif self.source == "cookie":
            value = request.cookies.get(self.name)
        elif self.source == "query":
            value = request.query.get(self.name)
        else:
            parts = [part for part in request.path.split("/") if part]
            value = "/".join(parts[:self.segments])
        return value or None


def parse_address(text: str) -> str:
    """Normalize a backend address to ``host:port``; ValueError if it is not one.

    Accepts ``host:port``, ``[v6]:port`` and ``http://host:port[/]``.
    """
    address = text.strip()
    if address.startswith("http://"):
        address = address[len("http://"):].rstrip("/")
    elif "://" in address:
        raise ValueError(f"backend {text!r}: only http:// backends are supported")
    host, sep, port = address.rpartition(":")
    if not sep or not host or "/" in address:
        raise ValueError(f"backend {text!r} is not HOST:PORT")
    if host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        raise ValueError(f"backend {text!r}: write an IPv6 host in brackets, as [::1]:8080")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"backend {text!r}: the port must be a number from 1 to 65535")
    return f"{host}:{int(port)}"


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, not {value!r}")
    return float(value)


def _describe(exc: BaseException, read_timeout: float, connect_timeout: float) -> str:
    """A short description of a failed attempt, for logs and the status page."""
    import aiohttp as lib

    if isinstance(exc, lib.ConnectionTimeoutError):
        return f"connect timed out after {connect_timeout:g}s"
    if isinstance(exc, (lib.SocketTimeoutError, TimeoutError)):
        return f"timed out after {read_timeout:g}s"
    if isinstance(exc, lib.ClientConnectorError):
        if getattr(exc.os_error, "errno", None) == errno.ECONNREFUSED:
            return "connection refused"
        return f"cannot connect: {exc.os_error.strerror or exc.os_error}"
    if isinstance(exc, lib.ServerDisconnectedError):
        return "disconnected before answering"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- the gateway --------------------------------------------------------------


class Gateway:
    """A sticky reverse proxy in front of a set of HTTP backends.

    Arguments:
        backends: backend addresses (``host:port``), each its own node name;
            or a mapping ``{node name: address}``, so that the ring (and so
            every key's placement) does not depend on addresses.
        router: the ring to route through; a new ``ConsistentHashRouter()``
            by default.  Backends missing from it are added with
            ``weights.get(node, 1.0)``; nodes it already holds keep theirs.
        weights: ``{node: weight}`` for the backends added to the ring.
        key: a ``KeyRule`` or its string form (``header:X-User-Id``...).
        missing_key: ``"remote"`` routes a request without a key by the
            client's IP address; ``"reject"`` answers 400.
        attempts: at most this many distinct nodes are tried per request.
        connect_timeout: seconds to open a connection to a backend.
        read_timeout: seconds a backend may stay silent while answering.
        retry_statuses: backend statuses treated as a failed attempt (tried
            again on the next node, when the method allows; passed to the
            client when no node is left).
        retry_unsafe: also retry non-idempotent requests that may have
            reached a backend.
        health: run an ``AsyncHealthChecker`` and report request outcomes
            to it.
        health_path, health_interval, health_timeout, fall, rise: the health
            checks: ``GET http://ADDRESS{health_path}`` every
            ``health_interval`` seconds, ``fall`` failures to take a node
            out, ``rise`` successes to put it back.
        on_change: called as ``on_change(node, old, new, reason)`` on each
            health transition.
        metrics: serve ``metrics_path``: True requires prometheus_client,
            None serves it if installed, False never.
        registry: the Prometheus registry to serve; by default a private one
            holding this gateway's ``RouterCollector``.
        status_path, metrics_path: the gateway's own pages; not proxied.
        node_header: if set, each response names the node that served it in
            this header.
        max_body: the largest request body accepted, in bytes (413 above).
        pool_size: the most connections open to backends at once (0: no limit).
    """

    def __init__(
        self,
        backends: Iterable[str] | Mapping[str, str] = (),
        *,
        router: ConsistentHashRouter | None = None,
        weights: Mapping[str, float] | None = None,
        key: KeyRule | str = "header:X-User-Id",
        missing_key: str = "remote",
        attempts: int = 3,
        connect_timeout: float = 2.0,
        read_timeout: float = 30.0,
        retry_statuses: Collection[int] = (502, 503, 504),
        retry_unsafe: bool = False,
        health: bool = True,
        health_path: str = "/health",
        health_interval: float = 5.0,
        health_timeout: float = 2.0,
        fall: int = 3,
        rise: int = 2,
        on_change: OnChange | None = None,
        metrics: bool | None = None,
        registry: Any = None,
        status_path: str = "/-/status",
        metrics_path: str = "/metrics",
        node_header: str | None = None,
        max_body: int = 1 << 20,
        pool_size: int = 100,
    ) -> None:
        """See the class docstring.  Raises ImportError without aiohttp."""
        _require_aiohttp()
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
        self._router = router if router is not None else ConsistentHashRouter()
        for node in addresses:
            if node not in self._router:
                self._router.add_service_node(node, (weights or {}).get(node, 1.0))
        self._key = key if isinstance(key, KeyRule) else KeyRule.parse(key)
        if missing_key not in ("remote", "reject"):
            raise ValueError(f"missing_key must be 'remote' or 'reject', not {missing_key!r}")
        self._missing_key = missing_key
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError(f"attempts must be an integer >= 1, not {attempts!r}")
        self._attempts = attempts
        self._connect_timeout = _positive("connect_timeout", connect_timeout)
        self._read_timeout = _positive("read_timeout", read_timeout)
        self._retry_statuses = frozenset(retry_statuses)
        self._retry_unsafe = retry_unsafe
        for name, path in (("status_path", status_path), ("metrics_path", metrics_path),
                           ("health_path", health_path)):
            if not path.startswith("/"):
                raise ValueError(f"{name} must start with '/', not {path!r}")
        self._status_path = status_path
        self._metrics_path = metrics_path
        self._health_path = health_path
        self._node_header = node_header
        if max_body < 0 or pool_size < 0:
            raise ValueError("max_body and pool_size must be >= 0")
        self._max_body = max_body
        self._pool_size = pool_size
        self._on_change = on_change
        self._counters = RouteCounters()
        self._loads: dict[str, int] = {}
        self._started_at: float | None = None

        self._health: AsyncHealthChecker | None = None
        if health:
            from chash.health import AsyncHealthChecker

            self._health = AsyncHealthChecker(
                self._router, url=self._health_url,
                interval=_positive("health_interval", health_interval),
                timeout=_positive("health_timeout", health_timeout),
                fall=fall, rise=rise, on_change=self._health_changed)

        self._collector: RouterCollector | None = None
        self._registry: Any = None
        if metrics is not False:
            try:
                from chash.metrics import RouterCollector

                self._collector = RouterCollector(
                    self._router, health=self._health, load=self, counters=self._counters)
            except ImportError:
                if metrics:
                    raise
            else:
                if registry is None:
                    import prometheus_client

                    registry = prometheus_client.CollectorRegistry()
                registry.register(self._collector)
                self._registry = registry

        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._bound: list[tuple[str, int]] = []

    # -- properties ----------------------------------------------------------

    @property
    def router(self) -> ConsistentHashRouter:
        """The ring requests are routed through."""
        return self._router

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
    def counters(self) -> RouteCounters:
        """Requests, lookups, retries and health transitions counted so far."""
        return self._counters

    @property
    def loads(self) -> dict[str, int]:
        """``{node: requests in flight}`` for every configured backend."""
        return {node: self._loads.get(node, 0) for node in dict.fromkeys(
            [*self._addresses, *self._loads])}

    @property
    def status_path(self) -> str:
        """The path of the JSON status page."""
        return self._status_path

    @property
    def metrics_path(self) -> str:
        """The path of the Prometheus metrics (served when ``registry`` is set)."""
        return self._metrics_path

    @property
    def registry(self) -> Any:
        """The Prometheus registry served at the metrics path, or None."""
        return self._registry

    @property
    def bound(self) -> list[tuple[str, int]]:
        """``(host, port)`` of every listening socket, once started."""
        return list(self._bound)

    @property
    def url(self) -> str:
        """``http://host:port`` of the first listening socket."""
        if not self._bound:
            raise RuntimeError("the gateway is not listening")
        host, port = self._bound[0]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    def address_of(self, node: str) -> str:
        """The ``host:port`` that ``node`` is reached at."""
        return self._addresses.get(node, node)

    def _health_url(self, node: str) -> str:
        return f"http://{self.address_of(node)}{self._health_path}"

    def _health_changed(self, node: str, old: Any, new: Any, reason: str) -> None:
        self._counters.health_change(node, old, new, reason)
        if self._on_change is not None:
            self._on_change(node, old, new, reason)

    # -- lifecycle -----------------------------------------------------------

    def make_app(self) -> web.Application:
        """The aiohttp application: status, metrics, and the proxy."""
        from aiohttp import web

        app = web.Application(client_max_size=self._max_body)
        app.router.add_get(self._status_path, self._handle_status)
        if self._registry is not None:
            app.router.add_get(self._metrics_path, self._handle_metrics)
        app.router.add_route("*", "/{tail:.*}", self._handle_proxy)
        app.on_startup.append(self._open_session)
        app.on_cleanup.append(self._close_session)
        return app

    async def _open_session(self, app: web.Application | None = None) -> None:
        if self._session is None or self._session.closed:
            import aiohttp as lib

            self._session = lib.ClientSession(
                connector=lib.TCPConnector(limit=self._pool_size),
                timeout=lib.ClientTimeout(total=None, sock_connect=self._connect_timeout,
                                          sock_read=self._read_timeout),
                auto_decompress=False,
                skip_auto_headers=_NO_AUTO_HEADERS,
                cookie_jar=lib.DummyCookieJar(),
            )

    async def _close_session(self, app: web.Application | None = None) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``host:port`` (0: any free port), start health checks;
        return the gateway's URL."""
        if self._runner is not None:
            raise RuntimeError("the gateway is already running")
        from aiohttp import web

        runner = web.AppRunner(self.make_app(), access_log=None, shutdown_timeout=5.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._bound = [(str(a[0]), int(a[1])) for a in runner.addresses]
        self._started_at = time.time()
        if self._health is not None:
            await self._health.start()
        logger.info("gateway listening on %s, key %s, %s",
                    self.url, self._key, plural(len(self._addresses), "backend"))
        return self.url

    async def stop(self) -> None:
        """Stop listening (requests in flight finish), stop health checks,
        close the connection pool.  Safe to call more than once."""
        if self._health is not None:
            await self._health.stop()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        await self._close_session()
        self._bound = []

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
        """What ``/-/status`` shows, as a JSON-ready dict."""
        router = self._router
        ownership = router.ownership()
        points = router.points
        weights = router.weights
        health = self._health.status() if self._health is not None else {}
        snap = self._counters.snapshot()
        loads = self.loads
        nodes = []
        for node in dict.fromkeys([*self._addresses, *router.nodes, *health]):
            entry: dict[str, Any] = {
                "node": node,
                "address": self.address_of(node),
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
            status = health.get(node)
            if status is not None:
                entry["health"] = {
                    "state": str(status.state),
                    "in_service": status.in_service,
                    "consecutive_successes": status.consecutive_successes,
                    "consecutive_failures": status.consecutive_failures,
                    "last_error": status.last_error,
                    "last_latency": status.last_latency,
                    "last_check": status.last_check,
                    "last_change": status.last_change,
                    "transitions": {state: count for (n, state), count
                                    in snap.transitions.items() if n == node},
                }
            nodes.append(entry)
        checker = self._health
        return {
            "key": str(self._key),
            "missing_key": self._missing_key,
            "started_at": self._started_at,
            "ring": {
                "nodes": len(router),
                "points": sum(points.values()),
                "virtual_node_count": router.virtual_node_count,
                "hash": router.hash if isinstance(router.hash, str) else repr(router.hash),
                "layout": router.layout,
                "fingerprint": router.fingerprint(),
            },
            "health": None if checker is None else {
                "interval": checker.interval,
                "timeout": checker.timeout,
                "fall": checker.fall,
                "rise": checker.rise,
                "panicking": checker.panicking,
            },
            "nodes": nodes,
            "requests": dict(snap.requests),
            "retries": snap.retries,
        }

    async def _handle_status(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        return web.Response(text=json.dumps(self.status(), indent=2) + "\n",
                            content_type="application/json")

    async def _handle_metrics(self, request: web.Request) -> web.StreamResponse:
        import prometheus_client
        from aiohttp import web

        body = prometheus_client.generate_latest(self._registry)
        return web.Response(body=body,
                            headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})

    # -- proxying ------------------------------------------------------------

    def _upstream_headers(self, request: web.Request) -> Any:
        from multidict import CIMultiDict

        named = {token.strip().lower() for value in request.headers.getall("Connection", [])
                 for token in value.split(",")}
        headers: CIMultiDict[str] = CIMultiDict()
        for name, value in request.headers.items():
            lowered = name.lower()
            if lowered not in _NOT_FORWARDED and lowered not in named:
                headers.add(name, value)
        forwarded_for = request.headers.get("X-Forwarded-For")
        if request.remote:
            forwarded_for = f"{forwarded_for}, {request.remote}" if forwarded_for else request.remote
        if forwarded_for:
            headers["X-Forwarded-For"] = forwarded_for
        headers["X-Forwarded-Proto"] = request.scheme
        if request.host:
            headers["X-Forwarded-Host"] = request.host
        return headers

    def _answer(self, request: web.Request, status: int, message: str) -> web.StreamResponse:
        from aiohttp import web

        return web.Response(status=status, text=f"chash gateway: {message}\n")

    async def _handle_proxy(self, request: web.Request) -> web.StreamResponse:
        import aiohttp as lib
        from yarl import URL

        key = self._key.extract(request)
        if key is None:
            if self._missing_key == "reject":
                self._counters.request("rejected")
                return self._answer(request, 400, f"no routing key ({self._key}) in the request")
            key = request.remote or ""
        nodes = self._router.get_preference_list(key, self._attempts)
        if not nodes:
            self._counters.request("failed")
            return self._answer(request, 503, "no backend in service")
        self._counters.lookup(nodes[0])
        body = await request.read()
        headers = self._upstream_headers(request)
        may_resend = request.method in IDEMPOTENT_METHODS or self._retry_unsafe
        session = self._session
        if session is None:
            raise RuntimeError("the gateway's client session is not open")
        tried: list[str] = []
        timed_out = False
        for index, node in enumerate(nodes):
            if index:
                self._counters.retry()
            last = index == len(nodes) - 1
            # The request target goes on byte for byte (encoded=True), so
            # that "%2F" and the like reach the backend as the client sent them.
            url = URL(f"http://{self.address_of(node)}{request.raw_path}", encoded=True)
            self._loads[node] = self._loads.get(node, 0) + 1
            try:
                try:
                    upstream = await session.request(
                        request.method, url, headers=headers, data=body or None,
                        allow_redirects=False)
                except (lib.ClientConnectorError, lib.ConnectionTimeoutError) as exc:
                    # Never delivered: safe to send to the next node.
                    reason = self._failed(node, exc)
                    tried.append(f"{node}: {reason}")
                    timed_out = isinstance(exc, TimeoutError)
                    continue
                except (lib.ClientError, TimeoutError) as exc:
                    reason = self._failed(node, exc)
                    tried.append(f"{node}: {reason}")
                    timed_out = isinstance(exc, TimeoutError)
                    if may_resend:
                        continue
                    break
                async with upstream:
                    if upstream.status in self._retry_statuses and may_resend and not last:
                        self._failed(node, None, f"HTTP {upstream.status}")
                        tried.append(f"{node}: HTTP {upstream.status}")
                        continue
                    self._succeeded(node, upstream.status)
                    if index:
                        logger.info("request for key %r served by %s after %s", key, node,
                                    "; ".join(tried), extra={"node": node})
                    self._counters.request("ok")
                    return await self._relay(request, upstream, node)
            finally:
                self._loads[node] -= 1
        self._counters.request("failed")
        detail = "; ".join(tried)
        if timed_out:
            return self._answer(request, 504, f"no backend answered in time ({detail})")
        return self._answer(request, 502, f"no backend answered ({detail})")

    def _failed(self, node: str, exc: BaseException | None, reason: str = "") -> str:
        if exc is not None:
            reason = _describe(exc, self._read_timeout, self._connect_timeout)
        self._counters.attempt(node, ok=False)
        logger.warning("backend %s failed: %s", node, reason, extra={"node": node})
        if self._health is not None:
            self._health.report_failure(node, reason)
        return reason

    def _succeeded(self, node: str, status: int) -> None:
        self._counters.attempt(node, ok=True)
        if self._health is not None:
            self._health.report_success(node)

    async def _relay(self, request: web.Request, upstream: aiohttp.ClientResponse,
                     node: str) -> web.StreamResponse:
        """Stream ``upstream`` back to the client."""
        import aiohttp as lib

        response = lib.web.StreamResponse(status=upstream.status, reason=upstream.reason)
        named = {token.strip().lower() for value in upstream.headers.getall("Connection", [])
                 for token in value.split(",")}
        for name, value in upstream.headers.items():
            lowered = name.lower()
            if lowered not in _HOP_BY_HOP and lowered not in named:
                response.headers.add(name, value)
        if self._node_header:
            response.headers[self._node_header] = node
        await response.prepare(request)
        chunks = upstream.content.iter_any().__aiter__()
        while True:
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                break
            except (lib.ClientError, TimeoutError) as exc:
                # The status line is gone already: all that is left is to
                # cut the connection, so that the client sees a truncated
                # answer rather than a complete-looking one.
                reason = _describe(exc, self._read_timeout, self._connect_timeout)
                logger.warning("backend %s failed mid-response: %s", node, reason,
                               extra={"node": node})
                if self._health is not None:
                    self._health.report_failure(node, f"mid-response: {reason}")
                if request.transport is not None:
                    request.transport.close()
                return response
            try:
                await response.write(chunk)
            except ConnectionError:  # the client went away
                return response
        await response.write_eof()
        return response
