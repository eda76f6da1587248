"""What both channel pools share: grpcio itself, the four call kinds, the
per-node channel and its cached multi-callables, and what counts as a node
failing.

grpcio ships no type information, so it is ``Any`` here, at the boundary.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chash._optional import require
from chash.routing.sticky import StickyRoutes

__all__ = ["KINDS", "Failover", "Method", "NodeChannel", "Serializer", "deadline_of", "grpc",
           "remaining", "replayable", "target_of", "unavailable"]

#: grpcio (``pip install 'chash-router[grpc]'``).
grpc: Any = require("grpc", user="chash.grpc", extra="grpc", package="grpcio")
require("grpc.aio", user="chash.grpc", extra="grpc", package="grpcio")

#: The call kinds, as grpcio's channels name their factories.
KINDS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")

Serializer = Callable[[Any], bytes] | None


@dataclass(frozen=True)
class Method:
    """One method of a service, as a channel's factory takes it."""

    kind: str
    """One of ``KINDS``."""
    name: str
    """The full method name, ``/package.Service/Method``."""
    request_serializer: Serializer = None
    response_deserializer: Callable[[bytes], Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown call kind {self.kind!r}: one of {', '.join(KINDS)}")
        if not isinstance(self.name, str) or not self.name.startswith("/"):
            raise ValueError(f"method must be a full name such as '/pkg.Service/Method', "
                             f"not {self.name!r}")

    @property
    def streams_requests(self) -> bool:
        return self.kind.startswith("stream_")


class NodeChannel:
    """A node's channel and the multi-callables made on it, one per method."""

    __slots__ = ("_calls", "channel", "node")

    def __init__(self, node: str, channel: Any) -> None:
        self.node = node
        self.channel = channel
        self._calls: dict[Method, Any] = {}

    def callable(self, method: Method) -> Any:
        """The channel's multi-callable for ``method`` (made once)."""
        found = self._calls.get(method)
        if found is None:
            factory = getattr(self.channel, method.kind)
            found = self._calls[method] = factory(
                method.name, request_serializer=method.request_serializer,
                response_deserializer=method.response_deserializer)
        return found


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the node could not be reached (UNAVAILABLE)."""
    code = getattr(exc, "code", None)
    return callable(code) and code() == grpc.StatusCode.UNAVAILABLE


def replayable(method: Method, request: Any) -> bool:
    """Whether the request can be sent to another node: a single message,
    or a stream given as a sequence (an iterator is consumed once)."""
    return not method.streams_requests or isinstance(request, Sequence)


def remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (``time.monotonic()``), at least a
    millisecond, so a late attempt fails as DEADLINE_EXCEEDED."""
    if deadline is None:
        return None
    return max(deadline - time.monotonic(), 0.001)


def deadline_of(timeout: float | None) -> float | None:
    """The monotonic deadline of a call given ``timeout`` seconds in all."""
    return None if timeout is None else time.monotonic() + timeout


class Failover:
    """One call's way along its nodes: both pools loop over it.

    ``node`` is the node to call now; ``failed(exc)`` judges a failed
    attempt and says whether to call ``node`` again, now the next node: only
    after UNAVAILABLE (reported as passive health), and only when the
    request can be sent again.  ``timeout()`` is what is left of the call's
    own.
    """

    __slots__ = ("_again", "_deadline", "_index", "_nodes", "_routes", "_stream", "node")

    def __init__(self, routes: StickyRoutes, nodes: list[str], method: Method, request: Any,
                 timeout: float | None) -> None:
        self._routes = routes
        self._nodes = nodes
        self._again = replayable(method, request)
        self._stream = method.streams_requests
        self._deadline = deadline_of(timeout)
        self._index = 0
        self.node = nodes[0]

    def request(self, request: Any) -> Any:
        """What this attempt sends: a fresh iterator over a sequence of
        requests (grpcio takes an iterator), else ``request`` itself."""
        return iter(request) if self._stream and self._again else request

    def timeout(self) -> float | None:
        """Seconds this attempt may take (None: no deadline)."""
        return remaining(self._deadline)

    def failed(self, exc: BaseException) -> bool:
        """After ``exc``: True to call again (``node`` is the next node)."""
        if not unavailable(exc):
            return False
        details = getattr(exc, "details", None)
        self._routes.failed(self.node, f"UNAVAILABLE: {details() if callable(details) else exc}")
        if not self._again or self._index + 1 >= len(self._nodes):
            return False
        self._index += 1
        self.node = self._nodes[self._index]
        return True

    def answered(self) -> None:
        """The node answered."""
        self._routes.answered(self.node)


def target_of(address: tuple[str, int]) -> str:
    """A channel target from ``(host, port)`` (brackets around IPv6)."""
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
