"""The core of the sticky clients: which nodes a request tries, in which
order, where they are, and what their failures tell the health checks.

No I/O: ``chash.httpx``, ``chash.grpc`` and ``chash.aiohttp`` each add only
their library's calls, in a sync and an asyncio face over this one core.

* ``StickyRoutes.route(key)``: the owner of ``key`` and the nodes after it
  on the ring (``get_preference_list``), as many as ``retries`` allows; with
  ``balance`` the first is chosen by bounded loads from the client's own
  in-flight requests, and its load is held until ``release``.
* ``failed`` / ``answered``: passive health, as the gateway reports it: to
  a checker's ``report_failure``/``report_success``, or a membership's
  ``mark_down``, so that the ring drops a dead node for every caller.
* ``NodePool``: one resource (an HTTP transport, a gRPC channel) per node,
  opened on first use and handed back for closing once the node has left
  the ring.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from chash.bounded import BoundedLoadRouter
from chash.routers import Lookup
from chash.routing.keys import parse_address

__all__ = ["NodePool", "Ring", "StickyRoutes", "host_port", "key_of", "missing_key"]

T = TypeVar("T")


#: What the sticky clients use of a router (``chash.routers.Lookup``; the
#: old name, kept).
Ring = Lookup


def host_port(address: str) -> tuple[str, int]:
    """``("host", port)`` of a ``host:port`` address (IPv6 without brackets)."""
    host, _, port = parse_address(address).rpartition(":")
    return host.strip("[]"), int(port)


def missing_key(what: str) -> ValueError:
    """The error for a request that carries no routing key."""
    return ValueError(f"the request has no routing key ({what}): set it, or pass the key "
                      "in the request's extensions as {'chash.key': ...}")


def _feedback(health: object) -> tuple[Callable[[str, str], None] | None,
                                       Callable[[str], None] | None]:
    """The calls that report a failure and a success to ``health``: a health
    checker's ``report_failure``/``report_success``, or a membership's
    ``mark_down`` (a membership has no notion of one success)."""
    if health is None:
        return None, None
    failure = getattr(health, "report_failure", None)
    success = getattr(health, "report_success", None)
    if callable(failure) and callable(success):
        return failure, success
    mark_down = getattr(health, "mark_down", None)
    if callable(mark_down):
        return mark_down, None
    raise TypeError(f"health must be a HealthChecker, an AsyncHealthChecker or a membership "
                    f"(with mark_down), not {type(health).__name__}")


class StickyRoutes:
    """Routes keys to nodes for a sticky client; see the module docstring.

    ``addresses`` maps node -> ``host:port`` (by default a node's id is its
    address); ``retries`` is how many further nodes a request may try after
    its first.  Thread-safe.
    """

    def __init__(self, router: Lookup, addresses: Mapping[str, str] | None = None, *,
                 retries: int = 2, health: object = None, balance: float | None = None) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an integer >= 0, not {retries!r}")
        for method in ("get_preference_list", "get_target_node", "nodes"):
            if not hasattr(router, method):
                raise TypeError(f"router must be a chash.ConsistentHashRouter, not "
                                f"{type(router).__name__}")
        self.router = router
        self.retries = retries
        self._count = retries + 1
        self._addresses: dict[str, tuple[str, int]] = {}
        if addresses is not None:
            for node, address in addresses.items():
                self._addresses[node] = host_port(address)
        self._explicit = addresses is not None
        self._failure, self._success = _feedback(health)
        self._bounded = None if balance is None else BoundedLoadRouter(router, balance)
        self._lock = threading.Lock()

    @property
    def bounded(self) -> BoundedLoadRouter | None:
        """The bounded-load router choosing first nodes (None without ``balance``)."""
        return self._bounded

    def route(self, key: str | bytes) -> tuple[list[str], str | None]:
        """The nodes to try for ``key``, in order, and the node whose load was
        taken (None without ``balance``), to be given to ``release`` once the
        request is over.  LookupError when the ring is empty."""
        bounded = self._bounded
        if bounded is None:
            nodes = self.router.get_preference_list(key, self._count)
            if not nodes:
                raise LookupError("cannot route: the ring has no nodes")
            return nodes, None
        first = bounded.acquire(key)
        rest = self.router.get_preference_list(key, self._count + 1)
        return [first, *[node for node in rest if node != first][:self.retries]], first

    def release(self, held: str | None) -> None:
        """End the request whose ``route`` took ``held``'s load (None: nothing)."""
        if held is not None and self._bounded is not None:
            self._bounded.release(held)

    def address(self, node: str) -> tuple[str, int]:
        """``(host, port)`` of ``node``; KeyError naming it when ``addresses``
        was given without it, ValueError when its id is no address."""
        found = self._addresses.get(node)
        if found is not None:
            return found
        if self._explicit:
            raise KeyError(f"node {node!r} is in the ring but not in addresses")
        found = host_port(node)
        with self._lock:
            self._addresses[node] = found
        return found

    def failed(self, node: str, reason: str) -> None:
        """Report a connection failure to ``node`` as passive health."""
        if self._failure is not None:
            self._failure(node, reason)

    def answered(self, node: str) -> None:
        """Report that ``node`` answered."""
        if self._success is not None:
            self._success(node)


class NodePool(Generic[T]):
    """One resource per node, opened once by ``open(node)``; thread-safe.

    ``left()`` hands back (and forgets) the resources of nodes that are no
    longer in the ring, for the caller to close (sync or asyncio alike); it
    costs one read of ``router.nodes`` when nothing changed.
    """

    def __init__(self, router: Lookup, open: Callable[[str], T]) -> None:
        self._router = router
        self._open = open
        self._items: dict[str, T] = {}
        self._seen: Sequence[str] = ()
        self._lock = threading.Lock()

    def get(self, node: str) -> T:
        """``node``'s resource, opened now if it has none yet."""
        item = self._items.get(node)
        if item is None:
            with self._lock:
                item = self._items.get(node)
                if item is None:
                    item = self._items[node] = self._open(node)
        return item

    def left(self) -> list[T]:
        """The resources of nodes that have left the ring since the last call."""
        nodes = self._router.nodes
        if nodes == self._seen:
            return []
        with self._lock:
            self._seen = nodes
            keep = set(nodes)
            gone = [node for node in self._items if node not in keep]
            return [self._items.pop(node) for node in gone]

    def left_pending(self) -> bool:
        """Whether ``left()`` would hand anything back (the ring changed)."""
        return self._router.nodes != self._seen

    def drain(self) -> list[T]:
        """Every resource, forgotten: the caller closes them all."""
        with self._lock:
            items = list(self._items.values())
            self._items.clear()
            return items

    @property
    def nodes(self) -> list[str]:
        """The nodes that have a resource open."""
        with self._lock:
            return list(self._items)


def key_of(value: Any) -> str | bytes | None:
    """A key a callable or an extension gave: str or bytes, "" counting as none."""
    if value is None or isinstance(value, (str, bytes)):
        return value or None
    raise TypeError(f"a routing key must be str or bytes, not {type(value).__name__}")
