"""``AsyncChannelPool``: ``ChannelPool`` over grpc.aio channels."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import Any

from chash.grpc.calls import Failover, Method, NodeChannel, Serializer, grpc, target_of
from chash.routers import Lookup
from chash.routing.sticky import NodePool, StickyRoutes

__all__ = ["AsyncChannelPool"]

Call = Callable[..., Any]


class AsyncChannelPool:
    """``ChannelPool`` for asyncio: channels from ``grpc.aio.insecure_channel``
    (or ``channel_factory``), the same routing, failover and health reports.

    The unary-response callables are coroutine functions; the
    stream-response ones return async iterators.  For one event loop.
    """

    def __init__(self, router: Lookup, addresses: Mapping[str, str] | None = None, *,
                 channel_factory: Callable[[str], Any] = grpc.aio.insecure_channel,
                 retries: int = 2, health: object = None) -> None:
        self._routes = StickyRoutes(router, addresses, retries=retries, health=health)
        self._factory = channel_factory
        self._pool: NodePool[NodeChannel] = NodePool(router, self._open)

    @property
    def routes(self) -> StickyRoutes:
        """The routing core: the router and the addresses."""
        return self._routes

    @property
    def nodes(self) -> list[str]:
        """The nodes that have a channel open."""
        return self._pool.nodes

    def _open(self, node: str) -> NodeChannel:
        return NodeChannel(node, self._factory(target_of(self._routes.address(node))))

    async def _prune(self) -> None:
        for gone in self._pool.left():
            await gone.channel.close()

    def _start(self, method: Method, request: Any, key: str | bytes,
               timeout: float | None) -> Failover | None:
        """The call's failover, or None when channels must be closed first
        (a node left the ring): the caller then awaits ``_failover``."""
        if self._pool.left_pending():
            return None
        nodes, _ = self._routes.route(key)
        return Failover(self._routes, nodes, method, request, timeout)

    async def channel_for(self, key: str | bytes) -> Any:
        """The channel of ``key``'s owner (LookupError on an empty ring)."""
        await self._prune()
        nodes, _ = self._routes.route(key)
        return self._pool.get(nodes[0]).channel

    def unary_unary(self, method: str, request_serializer: Serializer = None,
                    response_deserializer: Callable[[bytes], Any] | None = None) -> Call:
        """``await call(request, *, key, timeout=None, metadata=None)`` -> the response."""
        return self._single(Method("unary_unary", method, request_serializer,
                                   response_deserializer))

    def stream_unary(self, method: str, request_serializer: Serializer = None,
                     response_deserializer: Callable[[bytes], Any] | None = None) -> Call:
        """``await call(requests, *, key, timeout=None, metadata=None)`` -> the response."""
        return self._single(Method("stream_unary", method, request_serializer,
                                   response_deserializer))

    def unary_stream(self, method: str, request_serializer: Serializer = None,
                     response_deserializer: Callable[[bytes], Any] | None = None) -> Call:
        """``call(request, *, key, timeout=None, metadata=None)`` -> an async
        iterator of the responses."""
        return self._streaming(Method("unary_stream", method, request_serializer,
                                      response_deserializer))

    def stream_stream(self, method: str, request_serializer: Serializer = None,
                      response_deserializer: Callable[[bytes], Any] | None = None) -> Call:
        """``call(requests, *, key, timeout=None, metadata=None)`` -> an async
        iterator of the responses."""
        return self._streaming(Method("stream_stream", method, request_serializer,
                                      response_deserializer))

    async def _failover(self, method: Method, request: Any, key: str | bytes,
                        timeout: float | None) -> Failover:
        await self._prune()
        nodes, _ = self._routes.route(key)
        return Failover(self._routes, nodes, method, request, timeout)

    def _single(self, method: Method) -> Call:
        async def call(request: Any, *, key: str | bytes, timeout: float | None = None,
                       metadata: Any = None) -> Any:
            # Without an await when no node has left: a coroutine less a call.
            step = self._start(method, request, key, timeout) or \
                await self._failover(method, request, key, timeout)
            while True:
                send = self._pool.get(step.node).callable(method)
                try:
                    response = await send(step.request(request), timeout=step.timeout(), metadata=metadata)
                except grpc.RpcError as exc:
                    if step.failed(exc):
                        continue
                    raise
                step.answered()
                return response

        call.__name__ = call.__qualname__ = method.kind
        return call

    def _streaming(self, method: Method) -> Call:
        def call(request: Any, *, key: str | bytes, timeout: float | None = None,
                 metadata: Any = None) -> AsyncIterator[Any]:
            return self._responses(method, request, key, timeout, metadata)

        call.__name__ = call.__qualname__ = method.kind
        return call

    async def _responses(self, method: Method, request: Any, key: str | bytes,
                         timeout: float | None, metadata: Any) -> AsyncIterator[Any]:
        step = await self._failover(method, request, key, timeout)
        while True:
            responses = self._pool.get(step.node).callable(method)(
                step.request(request), timeout=step.timeout(), metadata=metadata).__aiter__()
            try:
                first = await responses.__anext__()
            except StopAsyncIteration:
                step.answered()
                return
            except grpc.RpcError as exc:
                if step.failed(exc):
                    continue
                raise
            step.answered()
            yield first
            async for response in responses:
                yield response
            return

    async def aclose(self) -> None:
        """Close every channel."""
        for entry in self._pool.drain():
            await entry.channel.close()

    async def __aenter__(self) -> AsyncChannelPool:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc_value: BaseException | None, traceback: TracebackType | None) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncChannelPool(nodes={len(self._routes.router)}, open={len(self._pool.nodes)})"
