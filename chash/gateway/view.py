"""What the admin app reads of a running gateway: the ``GatewayView`` protocol.

``chash.gateway.admin`` serves the status page and the metrics from a
``GatewayView`` rather than from the ``Gateway`` class, so that the admin
app never imports the gateway (the gateway imports the admin app to start
it).  ``Gateway`` satisfies the protocol; a test may pass any object that
does.  This module imports nothing of the gateway but its configuration,
and that only for type checking; of the ring, ``chash.routers``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from chash.routers import MutableRouter

if TYPE_CHECKING:
    from chash.gateway.config import GatewayConfig
    from chash.gateway.reload import Reloads
    from chash.gateway.tunnel import TunnelCounts
    from chash.health import AsyncHealthChecker
    from chash.metrics import RouteCounters

__all__ = ["GatewayRouter", "GatewayView"]

#: What a gateway routes through (``chash.routers.MutableRouter``; the old
#: name, kept): the ring (any of its layouts), Maglev or rendezvous.  (Not
#: jump: a gateway must drop a backend from the middle of its list, which
#: a jump router cannot; ``Gateway`` refuses one.)
GatewayRouter = MutableRouter


class GatewayView(Protocol):
    """The state of a gateway the admin app shows; each read is a snapshot."""

    @property
    def config(self) -> GatewayConfig:
        """The settings (key rule, paths, ``missing_key``...)."""

    @property
    def router(self) -> MutableRouter:
        """The router requests are routed through."""

    @property
    def addresses(self) -> dict[str, str]:
        """``{node: host:port}`` of every configured backend."""

    def address_of(self, node: str) -> str:
        """The ``host:port`` that ``node`` is reached at."""

    @property
    def zones(self) -> dict[str, str]:
        """``{node: zone}`` of every node with a zone (``config.zone`` is
        the gateway's own)."""

    @property
    def health(self) -> AsyncHealthChecker | None:
        """The health checker, or None if health checks are off."""

    @property
    def membership(self) -> object | None:
        """The membership sharing the ring, or None; its ``name``,
        ``version``, ``connected`` and ``reporter`` are shown when it has
        them."""

    @property
    def counters(self) -> RouteCounters:
        """Requests, lookups, retries and health transitions counted so far."""

    @property
    def loads(self) -> dict[str, int]:
        """``{node: requests in flight}``."""

    @property
    def tunnel_counts(self) -> TunnelCounts:
        """The WebSocket tunnels: open, opened, closed, bytes relayed."""

    @property
    def hints(self) -> dict[str, str]:
        """Advice for the operator, by node."""

    @property
    def started_at(self) -> float | None:
        """When the gateway started listening (``time.time()``), or None."""

    @property
    def registry(self) -> Any:
        """The Prometheus registry served at the metrics path, or None."""

    @property
    def metrics_off(self) -> str | None:
        """Why metrics are not served (None when they are)."""

    @property
    def reloads(self) -> Reloads | None:
        """What reloads the gateway's configuration, or None."""
