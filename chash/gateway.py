"""A sticky HTTP reverse proxy that routes every request through the ring.

Each request's key (a header, a cookie, a query parameter or the start of
the path; see ``KeyRule``) is looked up on a ``ConsistentHashRouter``: the
key's preference list (its owner, then the next distinct nodes clockwise)
says where the request goes and, if the owner fails, where it goes next.
The retry target is the node the ring would choose once the failed node is
out of it, so a user whose backend dies lands on the same backend during
the failure as after it, and comes home when the backend returns.

The proxy path is a lean HTTP/1.1 server and client on ``asyncio``
protocols (``chash._http`` parses heads, strictly); the admin listener
(status page and metrics, off unless configured) is an aiohttp application
(``chash._gateway_admin``).  Pieces a library user may replace are
injected: the router (the balancer), the health checker, the membership
(``chash.membership.RedisMembership`` shares the ring between instances).

Health: an ``AsyncHealthChecker`` probes every backend and takes failing
ones out of the ring (``fall`` failures) and back in (``rise`` successes);
the gateway feeds it the outcome of real requests as well: connection
errors and timeouts count as failures, an application's own 5xx answer
does not unless its status is listed in ``fail_on_status``.

Retries: ``chash._retry.next_attempt`` decides, from the preference list,
the method and the outcome of an attempt.  Request bodies up to
``buffer_body`` bytes are read first so that they can be sent again;
larger ones are streamed to the first backend that accepts the connection
(capped at ``max_body``).  Responses are streamed back; a small one is
written in one call.  Needs aiohttp: ``pip install 'chash-router[gateway]'``.
See docs/gateway.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import socket
import time
import types
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chash import ConsistentHashRouter
from chash._gateway_proxy import Proxy
from chash._http import RequestHead
from chash._retry import IDEMPOTENT_METHODS, Outcome, next_attempt
from chash._text import plural
from chash.metrics import RouteCounters

try:  # the gateway extra: aiohttp serves the admin listener and the probes
    from chash import _gateway_admin as _admin
except ImportError as _exc:  # pragma: no cover - exercised by a test with aiohttp hidden
    if not (getattr(_exc, "name", None) or "").startswith(("aiohttp", "multidict", "yarl")):
        raise
    _admin = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from aiohttp import web

    from chash.health import AsyncHealthChecker, Membership

__all__ = [
    "IDEMPOTENT_METHODS",
    "KEY_SOURCES",
    "Gateway",
    "GatewayConfig",
    "KeyRule",
    "Outcome",
    "next_attempt",
    "parse_address",
]

logger = logging.getLogger("chash.gateway")

#: Where a routing key can come from (see ``KeyRule``).
KEY_SOURCES = ("header", "cookie", "query", "path")

OnChange = Callable[[str, Any, Any, str], object]


def _require_extra() -> None:
    if _admin is None:
        raise ImportError("chash.gateway needs aiohttp: pip install 'chash-router[gateway]'")


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

    Keys are bytes, exactly as sent (percent-decoded for query and path):
    a value that is not UTF-8 is hashed like any other.  An empty value
    counts as no key.
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
        if any(c.isspace() for c in name) or any(c in name for c in ":;,=\"()<>@[]{}/?\\") \
                or not name.isascii():
            raise ValueError(f"in {spec!r}: {name!r} is not a valid {source} name")
        return cls(source, name)

    def __str__(self) -> str:
        if self.source == "path":
            return "path" if self.segments == 1 else f"path:{self.segments}"
        return f"{self.source}:{self.name}"

    def extract(self, request: RequestHead) -> bytes | None:
        """The key of ``request`` (a parsed head), or None when it has none."""
        value: bytes | None = None
        if self.source == "header":
            value = request.get(self.name.lower().encode())
        elif self.source == "cookie":
            wanted = self.name.encode()
            for name, header in request.fields:
                if name == b"cookie":
                    for pair in header.split(b";"):
                        cname, sep, cvalue = pair.strip(b" \t").partition(b"=")
                        if sep and cname == wanted:
                            value = cvalue.strip(b'"')
                            break
                    if value is not None:
                        break
        elif self.source == "query":
            _, sep, query = request.target.partition(b"?")
            wanted = self.name.encode()
            for pair in query.split(b"&"):
                qname, _, qvalue = pair.partition(b"=")
                if urllib.parse.unquote_to_bytes(qname.replace(b"+", b" ")) == wanted:
                    value = urllib.parse.unquote_to_bytes(qvalue.replace(b"+", b" "))
                    break
        else:
            path = request.target.partition(b"?")[0]
            parts = [part for part in path.split(b"/") if part]
            value = urllib.parse.unquote_to_bytes(b"/".join(parts[:self.segments]))
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


def _count(name: str, value: int, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, not {value!r}")


@dataclass(frozen=True)
class GatewayConfig:
    """Every setting of a ``Gateway``; checked when built (ValueError).

    The collaborators (router, health checker, membership) are not settings:
    they are given to ``Gateway`` itself.
    """

    key: KeyRule | str = "header:X-User-Id"
    """Where the key comes from: a ``KeyRule`` or its string form."""
    missing_key: str = "remote"
    """``"remote"`` routes a request without a key by the client's IP
    address; ``"reject"`` answers 400."""
    attempts: int = 3
    """At most this many distinct nodes are tried per request."""
    connect_timeout: float = 2.0
    """Seconds to open a connection to a backend."""
    read_timeout: float = 30.0
    """Seconds a backend may stay silent while answering."""
    deadline: float = 60.0
    """Seconds from a request's arrival until a backend must have started
    answering it, all attempts and waits for a pooled connection included
    (504 after)."""
    pool_size: int = 100
    """Connections open at once to each backend (0: no limit).  Every
    backend has its own pool, so a hung one cannot hold up the others."""
    retry_statuses: frozenset[int] = frozenset({502, 503, 504})
    """Backend statuses tried again on the next node, when the method
    allows (the last node's answer is passed on)."""
    fail_on_status: frozenset[int] = frozenset()
    """Backend statuses reported to the health checker as failures.  Empty
    by default: an application's own 5xx is an answer, not a dead node."""
    retry_unsafe: bool = False
    """Also retry non-idempotent requests that may have reached a backend."""
    health: bool = True
    """Build an ``AsyncHealthChecker`` (unless one is given to ``Gateway``)."""
    health_path: str = "/health"
    health_interval: float = 5.0
    health_timeout: float = 2.0
    fall: int = 3
    rise: int = 2
    metrics: bool | None = None
    """Serve Prometheus metrics on the admin listener: True requires
    prometheus_client, None serves them if installed, False never."""
    admin_listen: tuple[str, int] | None = None
    """``(host, port)`` of the admin listener (status page, metrics); None
    (the default): no admin listener."""
    status_path: str = "/-/status"
    metrics_path: str = "/metrics"
    node_header: str | None = None
    """If set, each response names the node that served it in this header."""
    max_body: int = 1 << 20
    """The largest request body accepted, in bytes (413 above)."""
    buffer_body: int = 65536
    """Request bodies up to this size are read whole, so that a failed
    attempt can be retried; larger and chunked ones are streamed."""
    max_header_size: int = 32768
    """The largest request head (request line and headers), in bytes (431)."""
    header_timeout: float = 60.0
    """Seconds a client may take to send a request head once it has begun
    (408, and the connection is closed)."""
    idle_timeout: float = 75.0
    """Seconds a keep-alive connection may wait for its next request."""
    body_timeout: float = 60.0
    """Seconds a client may stay silent while sending a body (408)."""

    def __post_init__(self) -> None:
        if not isinstance(self.key, KeyRule):
            object.__setattr__(self, "key", KeyRule.parse(self.key))
        if self.missing_key not in ("remote", "reject"):
            raise ValueError(f"missing_key must be 'remote' or 'reject', not "
                             f"{self.missing_key!r}")
        _count("attempts", self.attempts, 1)
        for name in ("connect_timeout", "read_timeout", "deadline", "health_interval",
                     "health_timeout", "header_timeout", "idle_timeout", "body_timeout"):
            _positive(name, getattr(self, name))
        for name in ("pool_size", "max_body", "buffer_body"):
            _count(name, getattr(self, name), 0)
        _count("max_header_size", self.max_header_size, 256)
        _count("fall", self.fall, 1)
        _count("rise", self.rise, 1)
        object.__setattr__(self, "retry_statuses", frozenset(self.retry_statuses))
        object.__setattr__(self, "fail_on_status", frozenset(self.fail_on_status))
        for name in ("status_path", "metrics_path", "health_path"):
            if not getattr(self, name).startswith("/"):
                raise ValueError(f"{name} must start with '/', not {getattr(self, name)!r}")

    @property
    def key_rule(self) -> KeyRule:
        """``key`` as a ``KeyRule``."""
        assert isinstance(self.key, KeyRule)
        return self.key

    def replace(self, **changes: Any) -> GatewayConfig:
        """A copy with ``changes`` applied (and checked)."""
        return dataclasses.replace(self, **changes)


# -- the gateway --------------------------------------------------------------


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
    """

    def __init__(
        self,
        backends: Iterable[str] | Mapping[str, str] = (),
        config: GatewayConfig | None = None,
        *,
        router: ConsistentHashRouter | None = None,
        weights: Mapping[str, float] | None = None,
        health: AsyncHealthChecker | None = None,
        membership: Membership | None = None,
        on_change: OnChange | None = None,
        registry: Any = None,
    ) -> None:
        """See the class docstring.  Raises ImportError without aiohttp."""
        _require_extra()
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
        if membership is None:
            for node in addresses:
                if node not in router:
                    router.add_service_node(node, (weights or {}).get(node, 1.0))
        self._membership = membership
        self._key = config.key_rule
        self._on_change = on_change
        self._counters = RouteCounters()
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
        assert _admin is not None
        self._registry, self._metrics_off = _admin.make_registry(self, config.metrics, registry)
        self._server: asyncio.AbstractServer | None = None
        self._admin_runner: web.AppRunner | None = None
        self._proxy = Proxy(config, router, addresses, self._counters, health)
        self._bound: list[tuple[str, int]] = []
        self._admin_bound: list[tuple[str, int]] = []
        self._forwarded_host = b""

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
                assert _admin is not None
                self._admin_runner, self._admin_bound = await _admin.start(
                    self, *self._config.admin_listen)
            self._started_at = time.time()
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
        assert _admin is not None
        return _admin.status(self)

def _url(host: str, port: int) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"
