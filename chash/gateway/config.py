"""The gateway's settings: ``GatewayConfig``, ``KeyRule`` and ``parse_address``.

A leaf: it imports nothing else of ``chash.gateway``, so that every other
module of the package (and the ``chash gateway`` command) can read the
settings without pulling in the proxy.  Everything here is checked when it
is built and raises ValueError with the reason.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

# KeyRule and parse_address live in chash.routing, shared with the sticky
# clients; re-exported here, where the gateway's users import them.
from chash.routing.keys import KEY_SOURCES, KeyedRequest, KeyRule, parse_address

__all__ = ["KEY_SOURCES", "GatewayConfig", "KeyRule", "KeyedRequest", "parse_address"]


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
    tracing: bool | None = None
    """OpenTelemetry spans per attempt (``chash.gateway.tracing``): None
    (the default) when opentelemetry-api is installed and a tracer
    provider is given or set globally when the gateway is built, True
    requires opentelemetry-api (the ``otel`` extra), False never."""
    slow_start: float = 0.0
    """Seconds over which a backend coming back up ramps its weight to its
    full weight (``chash.gateway.slow_start``); 0 (the default): off.  On
    the gateway's own ring (one process, or the workers of ``chash gateway
    --workers N``, driven by worker 0), not with a shared membership."""
    zone: str | None = None
    """The gateway's own zone: each key goes to the first node of this zone
    clockwise from it, and fails over within the zone before leaving it
    (``chash.zones.LocalFirst``; the nodes' zones are given to ``Gateway``).
    None (the default): every node alike."""
    tunnel_idle_timeout: float = 3600.0
    """Seconds a WebSocket tunnel may pass no byte either way before the
    gateway closes it."""
    max_tunnels: int = 10000
    """WebSocket tunnels open at once (0: no limit); a handshake past the
    cap is answered 503 with ``Retry-After``."""
    on_ring_change: str = "keep"
    """``"keep"`` (the default): a tunnel stays on its node whatever the
    ring does; ``"close"``: a tunnel whose key's owner changed is closed
    with WebSocket close code 1012 (Service Restart), so that its client
    reconnects to the key's new owner."""
    tunnel_close_grace: float = 5.0
    """Seconds a tunnel the gateway closes (a ring change, a stop) may take
    to reach a frame boundary for its close frame; closed without it after."""
    tls_cert: str | None = None
    """PEM file of the certificate the listener serves over TLS, its chain
    after it; None (the default): plain HTTP (``chash.gateway.tls``)."""
    tls_key: str | None = None
    """PEM file of ``tls_cert``'s private key; None: it is in ``tls_cert``."""
    tls_ciphers: str | None = None
    """An OpenSSL cipher list for TLS 1.2; None: OpenSSL's secure defaults
    (TLS 1.3's suites are always OpenSSL's own)."""
    tls_min_version: str = "1.2"
    """The oldest TLS version offered: ``"1.2"`` or ``"1.3"``."""
    tls_client_ca: str | None = None
    """PEM bundle of the CAs client certificates must chain to; a client
    without a valid certificate is refused.  None: no client certificates."""
    tls_handshake_timeout: float = 10.0
    """Seconds a client may take over its TLS handshake."""
    backend_ca: str | None = None
    """PEM bundle of the CAs that ``https://`` backends' certificates must
    chain to (only those); None: the system's CAs."""
    backend_insecure: bool = False
    """Verify nothing of ``https://`` backends' certificates (neither chain
    nor host name): for test benches only."""
    affinity: str | None = None
    """``"prefix"``: completions (``POST /v1/chat/completions`` and
    ``/v1/completions``) are routed by their prompt's cached prefix, or by
    an ``x-session-id`` header (``chash.gateway.llm``); None (the default):
    every request by its key."""
    shared_loads: str | None = None
    """With ``affinity``: the Redis URL through which gateway replicas share
    their per-backend loads and queued work (``chash.gateway.shared_loads``,
    every half second); None (the default): each routes on its own."""
    shared_loads_key: str = "chash:loads"
    """The prefix of the Redis keys of ``shared_loads`` (one per ring)."""

    def __post_init__(self) -> None:
        if not isinstance(self.key, KeyRule):
            object.__setattr__(self, "key", KeyRule.parse(self.key))
        if self.missing_key not in ("remote", "reject"):
            raise ValueError(f"missing_key must be 'remote' or 'reject', not "
                             f"{self.missing_key!r}")
        _count("attempts", self.attempts, 1)
        for name in ("connect_timeout", "read_timeout", "deadline", "health_interval",
                     "health_timeout", "header_timeout", "idle_timeout", "body_timeout",
                     "tunnel_idle_timeout", "tunnel_close_grace", "tls_handshake_timeout"):
            _positive(name, getattr(self, name))
        if self.on_ring_change not in ("keep", "close"):
            raise ValueError(f"on_ring_change must be 'keep' or 'close', not "
                             f"{self.on_ring_change!r}")
        for name in ("pool_size", "max_body", "buffer_body", "max_tunnels"):
            _count(name, getattr(self, name), 0)
        _count("max_header_size", self.max_header_size, 256)
        _count("fall", self.fall, 1)
        _count("rise", self.rise, 1)
        if self.slow_start != 0:
            _positive("slow_start", self.slow_start)
        if self.zone is not None and (not isinstance(self.zone, str) or not self.zone):
            raise ValueError(f"zone must be a non-empty str or None, not {self.zone!r}")
        object.__setattr__(self, "retry_statuses", frozenset(self.retry_statuses))
        object.__setattr__(self, "fail_on_status", frozenset(self.fail_on_status))
        self._check_tls()
        if self.affinity not in (None, "prefix"):
            raise ValueError(f"affinity must be 'prefix' or None, not {self.affinity!r}")
        if self.shared_loads is not None and self.affinity is None:
            raise ValueError("shared_loads shares the loads affinity routes on: it needs "
                             "affinity='prefix'")
        for name in ("status_path", "metrics_path", "health_path"):
            if not getattr(self, name).startswith("/"):
                raise ValueError(f"{name} must start with '/', not {getattr(self, name)!r}")

    def _check_tls(self) -> None:
        for name in ("tls_cert", "tls_key", "tls_ciphers", "tls_client_ca"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a non-empty str or None, not {value!r}")
        if self.tls_min_version not in ("1.2", "1.3"):
            raise ValueError(f"tls_min_version must be '1.2' or '1.3', not "
                             f"{self.tls_min_version!r}")
        if self.tls_cert is None:
            given = [name for name in ("tls_key", "tls_ciphers", "tls_client_ca")
                     if getattr(self, name) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} without tls_cert: TLS needs a "
                                 f"certificate")
        if self.backend_ca is not None and (not isinstance(self.backend_ca, str)
                                            or not self.backend_ca):
            raise ValueError(f"backend_ca must be a non-empty str or None, not "
                             f"{self.backend_ca!r}")
        if not isinstance(self.backend_insecure, bool):
            raise TypeError(f"backend_insecure must be a bool, not "
                            f"{type(self.backend_insecure).__name__}")
        if self.backend_insecure and self.backend_ca is not None:
            raise ValueError("backend_ca and backend_insecure: give one (a CA to verify "
                             "against, or no verification)")
        if self.key_rule.source == "tls-subject" and self.tls_client_ca is None:
            raise ValueError("key tls-subject is the verified client certificate's subject: "
                             "it needs tls_client_ca (and tls_cert)")

    @property
    def tls(self) -> bool:
        """Whether the listener serves TLS (``tls_cert`` is set)."""
        return self.tls_cert is not None

    @property
    def key_rule(self) -> KeyRule:
        """``key`` as a ``KeyRule``."""
        assert isinstance(self.key, KeyRule)
        return self.key

    def replace(self, **changes: Any) -> GatewayConfig:
        """A copy with ``changes`` applied (and checked)."""
        return dataclasses.replace(self, **changes)
