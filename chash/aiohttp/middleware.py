"""``StickyMiddleware``: an aiohttp client middleware sending each request to
its key's node.

aiohttp (3.12 and later) runs a session's middlewares around the connect
and send of every request, and the connection is chosen from the request's
``url`` at that moment; so a middleware can point the request at a node,
call the handler, and call it again with the next node after a failure.
The response keeps the URL the caller asked for (its ``url``, the cookies
it sets), and the ``Host`` header stays the one the caller's URL gave.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Union

from chash._optional import require
from chash.routers import Lookup
from chash.routing.keys import request_rule
from chash.routing.retry import Outcome, next_attempt
from chash.routing.sticky import StickyRoutes, key_of, missing_key

if TYPE_CHECKING:
    import aiohttp
    import aiohttp.payload
else:
    aiohttp = require("aiohttp", user="chash.aiohttp", extra="aiohttp")
    require("aiohttp.payload", user="chash.aiohttp", extra="aiohttp")

if tuple(int(part) for part in aiohttp.__version__.split(".")[:2]) < (3, 12):
    raise ImportError(f"chash.aiohttp needs aiohttp >= 3.12 (client middlewares), not "
                      f"{aiohttp.__version__}: pip install 'chash-router[aiohttp]'")

__all__ = ["StickyMiddleware"]

Handler = Callable[["aiohttp.ClientRequest"], Awaitable["aiohttp.ClientResponse"]]
KeySpec = Union[str, Callable[["aiohttp.ClientRequest"], "str | bytes | None"]]  # noqa: UP007

# Nothing was sent: always tried on the next node.
_NOT_SENT = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
# The node failed once the request was (maybe) sent.
_FAILED = (aiohttp.ServerConnectionError, aiohttp.ClientOSError)
# Bodies held in memory, which can be sent again.
_REPLAYABLE = (aiohttp.payload.BytesPayload,)


class _Head:
    """A ClientRequest seen as ``chash.routing.keys.KeyedRequest``."""

    __slots__ = ("_request",)

    def __init__(self, request: aiohttp.ClientRequest) -> None:
        self._request = request

    @property
    def target(self) -> bytes:
        return self._request.url.raw_path_qs.encode("ascii", "surrogateescape")

    @property
    def fields(self) -> list[tuple[bytes, bytes]]:
        return [(name.lower().encode("latin-1"), value.encode("latin-1", "replace"))
                for name, value in self._request.headers.items()]

    def get(self, name: bytes) -> bytes | None:
        value = self._request.headers.get(name.decode("latin-1"))
        return None if value is None else value.encode("latin-1", "replace")


class StickyMiddleware:
    """Route every request of an ``aiohttp.ClientSession`` to the node owning
    its key, failing over along the ring:
    ``aiohttp.ClientSession("http://users", middlewares=[StickyMiddleware(router,
    key="header:X-User-Id")])``.

    The arguments mean what they mean for ``chash.httpx.StickyTransport``:
    ``addresses`` (node -> ``host:port``; by default the node id), ``key`` (a
    key spec or a callable taking the ``aiohttp.ClientRequest``), ``retries``
    (further nodes after a connect failure, and after a failure once sent
    for idempotent methods with a body in memory; a streamed body is never
    sent twice) and ``health`` (a health checker or a membership, told of
    every connection failure).  The connector's pool keeps connections per
    node (``limit_per_host``).  A request with no key raises ValueError.
    """

    def __init__(self, router: Lookup, addresses: Mapping[str, str] | None = None, *,
                 key: KeySpec, retries: int = 2, health: object = None) -> None:
        self._routes = StickyRoutes(router, addresses, retries=retries, health=health)
        if isinstance(key, str):
            rule = request_rule(key, "chash.aiohttp")
            self._extract: Callable[[Any], str | bytes | None] = \
                lambda request: rule.extract(_Head(request))
            self._what = f"{rule} is absent or empty"
        elif callable(key):
            self._extract = key
            self._what = f"{getattr(key, '__name__', 'the key function')} returned none"
        else:
            raise TypeError(f"key must be a key spec such as 'header:X-User-Id' or a callable "
                            f"taking the request, not {type(key).__name__}")

    @property
    def routes(self) -> StickyRoutes:
        """The routing core: the router and the addresses."""
        return self._routes

    async def __call__(self, request: aiohttp.ClientRequest, handler: Handler
                       ) -> aiohttp.ClientResponse:
        key = key_of(self._extract(request))
        if key is None:
            raise missing_key(self._what)
        nodes, _ = self._routes.route(key)
        url = request.url
        index = 0
        while True:
            node = nodes[index]
            host, port = self._routes.address(node)
            request.url = url.with_host(host).with_port(port)
            try:
                response = await handler(request)
            except (*_NOT_SENT, *_FAILED) as exc:
                outcome = Outcome.NOT_DELIVERED if isinstance(exc, _NOT_SENT) else Outcome.FAILED
                self._routes.failed(node, f"{type(exc).__name__}: {exc}")
                following = next_attempt(nodes, index, request.method, outcome,
                                         replayable=isinstance(request.body, _REPLAYABLE)
                                         or request.body == b"")
                if following is None:
                    raise
                index = following
                continue
            self._routes.answered(node)
            return response

    def __repr__(self) -> str:
        return f"StickyMiddleware(nodes={len(self._routes.router)}, retries={self._routes.retries})"
