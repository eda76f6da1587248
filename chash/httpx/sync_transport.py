"""``StickyTransport``: an httpx transport sending each request to its key's node."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING

from chash.httpx.exchange import Attempts, KeySpec, Library, default_library, library_of, reader_for
from chash.routers import Lookup
from chash.routing.sticky import NodePool, StickyRoutes

if TYPE_CHECKING:
    import httpx
    from httpx import BaseTransport as _Base
else:
    _Base = default_library().BaseTransport

__all__ = ["StickyTransport"]


class StickyTransport(_Base):
    """Route every request of an ``httpx.Client`` (or ``httpx2.Client``) to the
    node owning its key, failing over along the ring.

    ``httpx.Client(transport=StickyTransport(router, key="header:X-User-Id"),
    base_url="http://users")``: the URL keeps its scheme, path and query;
    its host and port become the owner's address.

    * ``router``: a ``chash.ConsistentHashRouter`` (read on every request,
      so changes to it, a membership's or a health checker's, apply at once).
    * ``addresses``: node -> ``host:port``; by default a node's id is its
      address.
    * ``key``: a key spec as the gateway reads it (``"header:NAME"``,
      ``"cookie:NAME"``, ``"query:NAME"``, ``"path"``, ``"path:N"``) or a
      callable taking the request and returning str or bytes.  A request's
      ``extensions={"chash.key": ...}`` overrides it.  A request without a
      key raises ValueError.
    * ``retries``: further nodes tried after the owner, along
      ``get_preference_list``: after a connect error or timeout (nothing
      was sent) always; after an error once the request was sent only for
      idempotent methods and bodies held in memory (a streamed body is
      never sent twice).  The gateway's policy,
      ``chash.routing.retry.next_attempt``.
    * ``health``: a ``HealthChecker`` or a membership: every connection
      failure is reported (``report_failure``; a membership's
      ``mark_down``) and every answer a checker's ``report_success``, so
      that a dead node leaves the ring for every caller.
    * ``balance``: a balance factor (>= 1) for bounded loads over this
      transport's own in-flight requests (``chash.BoundedLoadRouter``): a
      request's first node is the first one of its list below the bound; a
      request is in flight until its body is closed.
    * ``transport``: the inner transport for every node (its pool keeps
      connections per host and port); by default one ``HTTPTransport`` per
      node, opened on first use and closed once the node leaves the ring.

    Thread-safe: one transport serves a client shared by many threads.
    """

    def __init__(self, router: Lookup, addresses: Mapping[str, str] | None = None, *,
                 key: KeySpec, retries: int = 2, health: object = None,
                 balance: float | None = None, transport: httpx.BaseTransport | None = None
                 ) -> None:
        self._routes = StickyRoutes(router, addresses, retries=retries, health=health,
                                    balance=balance)
        self._read_key = reader_for(key)
        self._given = transport
        self._lib: Library | None = None
        self._pools: NodePool[httpx.BaseTransport] = NodePool(router, self._open)

    @property
    def routes(self) -> StickyRoutes:
        """The routing core: the router, addresses and bounded loads."""
        return self._routes

    @property
    def pooled_nodes(self) -> list[str]:
        """The nodes that have an inner transport open."""
        return self._pools.nodes

    def _open(self, node: str) -> httpx.BaseTransport:
        assert self._lib is not None
        opened: httpx.BaseTransport = self._lib.module.HTTPTransport()
        return opened

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` to its key's node, or the next ones; see the class."""
        lib = self._lib = library_of(request)
        key = self._read_key(request)
        for gone in self._pools.left():
            gone.close()
        nodes, held = self._routes.route(key)
        try:
            response = self._send(request, lib, nodes)
        except BaseException:
            self._routes.release(held)
            raise
        if held is not None:
            lib.hold(response, lambda: self._routes.release(held))
        return response

    def _send(self, request: httpx.Request, lib: Library, nodes: list[str]) -> httpx.Response:
        attempts = Attempts(self._routes, lib, request, nodes)
        try:
            while True:
                inner = self._given or self._pools.get(attempts.node)
                try:
                    response = inner.handle_request(request)
                except lib.transport_error as exc:
                    if attempts.retry(exc):
                        continue
                    raise
                attempts.answered()
                return response
        finally:
            attempts.close()

    def close(self) -> None:
        """Close every inner transport (the given one included)."""
        for inner in self._pools.drain():
            inner.close()
        if self._given is not None:
            self._given.close()

    def __enter__(self) -> StickyTransport:
        return self

    def __exit__(self, exc_type: type[BaseException] | None = None,
                 exc_value: BaseException | None = None,
                 traceback: TracebackType | None = None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StickyTransport(nodes={len(self._routes.router)}, retries={self._routes.retries})"


