"""Where a health checker learns which nodes to watch and applies verdicts.

``Membership`` is the protocol every checker talks to: the gateway types
against it, and the Redis memberships of ``chash.membership`` implement it.
``LocalMembership``, the default, edits a router in this process.
"""

from __future__ import annotations

import threading
from typing import Protocol

from chash.routers import MutableRouter

__all__ = ["EditableRouter", "LocalMembership", "Membership"]


#: The routers LocalMembership edits (``chash.routers.MutableRouter``; the
#: old name, kept).
EditableRouter = MutableRouter


class Membership(Protocol):
    """Where the checker learns which nodes to watch and applies verdicts.

    ``mark_down`` and ``mark_up`` must be idempotent and must ignore nodes
    they do not know: the checker re-applies its verdicts after every round
    (so a failed or overridden update is repaired), and a verdict may race
    with the operator removing the node.  The checker never calls
    ``mark_up`` for a node absent from ``watched_nodes()``, so a node the
    operator removed is never re-added.
    """

    def watched_nodes(self) -> dict[str, float]:
        """Every node the operator wants in service, with its weight: those
        in the ring and those currently taken out by health checks."""
        ...

    def mark_down(self, node: str, reason: str) -> None:
        """Take ``node`` out of service (no-op if it already is, or unknown)."""
        ...

    def mark_up(self, node: str) -> None:
        """Put ``node`` back in service with the weight it had (no-op if it
        is in service, or unknown)."""
        ...


class LocalMembership:
    """Applies verdicts to a router in this process.

    The operator manages nodes on the router itself: a node added there is
    watched from the next round on, and a node removed from it while in
    service is no longer watched.  A node that health checks took out is
    not in the router, so the operator removes it with ``forget()`` (which
    works in every state); until then it is watched and comes back when it
    recovers.  If the operator adds a taken-out node to the router again,
    the router's weight wins and the checker takes it out again at its next
    round if it is still down.
    """

    def __init__(self, router: MutableRouter) -> None:
        """Manage ``router`` (a ``chash.ConsistentHashRouter`` or alike)."""
        self._router = router
        self._lock = threading.Lock()
        self._down: dict[str, float] = {}
        # The zones of the nodes taken out (a router drops a node's zone
        # with the node): they come back with it.
        self._zones: dict[str, str] = {}

    @property
    def router(self) -> MutableRouter:
        """The router this membership edits."""
        return self._router

    def watched_nodes(self) -> dict[str, float]:
        """The router's nodes and weights, plus the nodes taken out."""
        with self._lock:
            watched = dict(self._down)
            watched.update(self._router.weights)
        return watched

    def taken_out(self) -> dict[str, float]:
        """The nodes health checks took out, with the weights they will get
        back."""
        with self._lock:
            return dict(self._down)

    def mark_down(self, node: str, reason: str) -> None:
        """Remove ``node`` from the router, remembering its weight.

        A node not in the router is left alone: either it is already out,
        or the operator removed it, and then it must stay unwatched.
        """
        with self._lock:
            if node not in self._router:
                return
            weight = self._router.weights.get(node)
            if weight is None:
                return
            zone = getattr(self._router, "zones", {}).get(node)
            try:
                self._router.remove_service_node(node)
            except KeyError:  # the operator removed it meanwhile
                return
            self._down[node] = weight
            if zone is not None:
                self._zones[node] = zone

    def mark_up(self, node: str) -> None:
        """Re-add ``node`` with its remembered weight (and zone), if this membership
        took it out; if the operator has put it back already, leave it."""
        with self._lock:
            weight = self._down.pop(node, None)
            zone = self._zones.pop(node, None)
            if weight is None:
                return
            if node in self._router:
                return
            try:
                if zone is None:
                    self._router.add_service_node(node, weight)
                else:  # a ConsistentHashRouter, which gave the zone
                    self._router.add_service_node(node, weight, zone=zone)  # type: ignore[call-arg]
            except BaseException:
                self._down[node] = weight
                if zone is not None:
                    self._zones[node] = zone
                raise

    def reweigh(self, node: str, weight: float) -> bool:
        """Give ``node``, taken out by health checks, the weight it will come
        back with; False (nothing done) if this membership did not take it out."""
        with self._lock:
            if node not in self._down:
                return False
            self._down[node] = float(weight)
            return True

    def forget(self, node: str) -> bool:
        """Stop serving and watching ``node``, whatever its health.

        Removes it from the router if it is there and drops it if health
        checks took it out, so it is never re-added.  Returns whether the
        node was known.
        """
        with self._lock:
            known = self._down.pop(node, None) is not None
            self._zones.pop(node, None)
            if node in self._router:
                try:
                    self._router.remove_service_node(node)
                    known = True
                except KeyError:
                    pass
        return known
