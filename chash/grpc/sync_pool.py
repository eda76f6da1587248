"""``ChannelPool``: gRPC channels by key, one per node, failing over on UNAVAILABLE."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any

from chash.grpc.calls import Failover, Method, NodeChannel, Serializer, grpc, target_of
from chash.routers import Lookup
from chash.routing.sticky import NodePool, StickyRoutes

__all__ = ["ChannelPool"]

Call = Callable[..., Any]


class ChannelPool:
    """gRPC channels to the nodes of a ring, picked by key.

    * ``router``: a ``chash.ConsistentHashRouter``, read on every call.
    * ``addresses``: node -> ``host:port``; by default a node's id is its
      address.
    * ``channel_factory``: makes a node's channel from its ``host:port``
      (``grpc.secure_channel`` with credentials bound, say); one channel per
      node, opened on first use and closed once the node has left the ring.
    * ``retries``: further nodes tried, along ``get_preference_list``, when
      a call fails with UNAVAILABLE (the node could not be reached).  A
      request stream is sent again only when given as a sequence, and a
      response stream fails over only before its first message.
    * ``health``: a ``HealthChecker`` or a membership, told of every
      UNAVAILABLE (``report_failure``; a membership's ``mark_down``) and of
      every answer (a checker's ``report_success``).

    ``unary_unary(method, request_serializer, response_deserializer)`` and
    the other three call kinds return callables taking ``(request, *, key,
    timeout=None, metadata=None)``; ``timeout`` bounds the call, all its
    attempts together.  Thread-safe.
    """

    def __init__(self, router: Lookup, addresses: Mapping[str, str] | None = None, *,
                 channel_factory: Callable[[str], Any] = grpc.insecure_channel,
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

    def _prune(self) -> None:
        for gone in self._pool.left():
            gone.channel.close()

    def channel_for(self, key: str | bytes) -> Any:
        """The channel of ``key``'s owner (LookupError on an empty ring)."""
        self._prune()
        nodes, _ = self._routes.route(key)
        return self._pool.get(nodes[0]).channel

    def unary_unary(self, method: str, request_serializer: Serializer = None,
                    response_deserializer: Callable[[bytes], Any] | None = None) -> Call:
        """``call(request, *, key, timeout=None, metadata=None)`` -> the response."""
        return self._single(Method("unary_unary", method, request_serializer,
                                   response_deserializer))

    def stream_unary(self, method: str, request_serializer: Serializer = None,
                     response_deserializer: Callable[[bytes], Any] | None = None) -> Call:
        """``call(requests, *, key, timeout=None, metadata=None)`` -> the response."""
        return self._single(Method("stream_unary", method, request_serializer,
                                   response_deserializer))

    def unary_stream(self, method: str, request_serializer: Serializer = None,
                     response_deserializer: Callable[[bytes], Any] | None = None) -> Call:
        """``call(request, *, key, timeout=None, metadata=None)`` -> an iterator
        of the responses."""
        return self._streaming(Method("unary_stream", method, request_serializer,
                                      response_deserializer))

    def stream_stream(self, method: str, request_serializer: Serializer = None,
                      response_deserializer: Callable[[bytes], Any] | None = None) -> Call:
        """``call(requests, *, key, timeout=None, metadata=None)`` -> an iterator
        of the responses."""
        return self._streaming(Method("stream_stream", method, request_serializer,
                                      response_deserializer))

    def _failover(self, method: Method, request: Any, key: str | bytes,
                  timeout: float | None) -> Failover:
        self._prune()
        nodes, _ = self._routes.route(key)
        return Failover(self._routes, nodes, method, request, timeout)

    def _single(self, method: Method) -> Call:
        def call(request: Any, *, key: str | bytes, timeout: float | None = None,
                 metadata: Any = None) -> Any:
            step = self._failover(method, request, key, timeout)
            while True:
                send = self._pool.get(step.node).callable(method)
                try:
                    response = send(step.request(request), timeout=step.timeout(), metadata=metadata)
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
                 metadata: Any = None) -> Iterator[Any]:
            step = self._failover(method, request, key, timeout)
            return self._responses(step, method, request, metadata)

        call.__name__ = call.__qualname__ = method.kind
        return call

    def _responses(self, step: Failover, method: Method, request: Any,
                   metadata: Any) -> Iterator[Any]:
        while True:
            responses = self._pool.get(step.node).callable(method)(
                step.request(request), timeout=step.timeout(), metadata=metadata)
            try:
                first = next(responses)
            except StopIteration:
                step.answered()
                return
            except grpc.RpcError as exc:
                if step.failed(exc):
                    continue
                raise
            step.answered()
            yield first
            yield from responses
            return

    def close(self) -> None:
        """Close every channel."""
        for entry in self._pool.drain():
            entry.channel.close()

    def __enter__(self) -> ChannelPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc_value: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ChannelPool(nodes={len(self._routes.router)}, open={len(self._pool.nodes)})"
