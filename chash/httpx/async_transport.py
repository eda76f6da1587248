"""``AsyncStickyTransport``: ``StickyTransport`` for ``httpx.AsyncClient``."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING

from chash.httpx.exchange import Attempts, KeySpec, Library, default_library, library_of, reader_for
from chash.routers import Lookup
from chash.routing.sticky import NodePool, StickyRoutes

if TYPE_CHECKING:
    import httpx
    from httpx import AsyncBaseTransport as _Base
else:
    _Base = default_library().AsyncBaseTransport

__all__ = ["AsyncStickyTransport"]


class AsyncStickyTransport(_Base):
    """``StickyTransport`` for ``httpx.AsyncClient`` (or ``httpx2.AsyncClient``):
    the same arguments and the same routing, failover and health reports;
    the inner transports are ``AsyncHTTPTransport``s.  For one event loop."""

    def __init__(self, router: Lookup, addresses: Mapping[str, str] | None = None, *,
                 key: KeySpec, retries: int = 2, health: object = None,
                 balance: float | None = None, transport: httpx.AsyncBaseTransport | None = None
                 ) -> None:
        self._routes = StickyRoutes(router, addresses, retries=retries, health=health,
                                    balance=balance)
        self._read_key = reader_for(key)
        self._given = transport
        self._lib: Library | None = None
        self._pools: NodePool[httpx.AsyncBaseTransport] = NodePool(router, self._open)

    @property
    def routes(self) -> StickyRoutes:
        """The routing core: the router, addresses and bounded loads."""
        return self._routes

    @property
    def pooled_nodes(self) -> list[str]:
        """The nodes that have an inner transport open."""
        return self._pools.nodes

    def _open(self, node: str) -> httpx.AsyncBaseTransport:
        assert self._lib is not None
        opened: httpx.AsyncBaseTransport = self._lib.module.AsyncHTTPTransport()
        return opened

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` to its key's node, or the next ones; see the class."""
        lib = self._lib = library_of(request)
        key = self._read_key(request)
        for gone in self._pools.left():
            await gone.aclose()
        nodes, held = self._routes.route(key)
        try:
            response = await self._send(request, lib, nodes)
        except BaseException:
            self._routes.release(held)
            raise
        if held is not None:
            lib.hold(response, lambda: self._routes.release(held))
        return response

    async def _send(self, request: httpx.Request, lib: Library, nodes: list[str]) -> httpx.Response:
        attempts = Attempts(self._routes, lib, request, nodes)
        try:
            while True:
                inner = self._given or self._pools.get(attempts.node)
                try:
                    response = await inner.handle_async_request(request)
                except lib.transport_error as exc:
                    if attempts.retry(exc):
                        continue
                    raise
                attempts.answered()
                return response
        finally:
            attempts.close()

    async def aclose(self) -> None:
        """Close every inner transport (the given one included)."""
        for inner in self._pools.drain():
            await inner.aclose()
        if self._given is not None:
            await self._given.aclose()

    async def __aenter__(self) -> AsyncStickyTransport:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None = None,
                 exc_value: BaseException | None = None,
                 traceback: TracebackType | None = None) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncStickyTransport(nodes={len(self._routes.router)}, retries={self._routes.retries})"


