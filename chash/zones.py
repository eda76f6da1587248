"""Local-zone-first routing: ``ZonedRouter``.

A router's nodes may carry zones (``add_service_node(node, zone=...)``:
datacentres, racks).  ``ZonedRouter(router, zone)`` routes every key to a
node of its own zone, over a ring of that zone's nodes alone (one ring per
datacentre, so calls stay local and keys still spread consistently within
the zone), and falls back to the whole ring when the zone has no node in
service: none configured, or all marked down.

Lookups are one call into a ring, as fast as the router's own.  The rings
are copies of the router made by :meth:`ZonedRouter.refresh`, which the
caller runs after changing the router; each copy is swapped in whole, so
lookups in other threads see the old rings or the new ones.

``LocalFirst(router, zone, zones)`` answers the same question without
copies, for a router that others change all the time (health verdicts,
weight ramps, a shared membership): each lookup walks the router as it is
and keeps the zone's nodes first.  A key's local node is the first node of
the zone in the router's preference list for the key.  That is its owner on
a ring of the zone's nodes alone (``ZonedRouter``'s answer) on the layouts
whose lookups take the next point clockwise and whose points depend on
their node alone: python, node, nginx, ketama, libmemcached.  On haproxy
(the nearest point, either way) and envoy and grpc (points that depend on
every weight) the two may differ for some keys; ``LocalFirst`` still keeps
each key on one node of the zone while the ring stands.
"""
from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Mapping

from chash._chash import ConsistentHashRouter

__all__ = ["LocalFirst", "ZonedRouter"]

Key = str | bytes


class _ZoneRouting:
    """What both zone routers hold: the whole router and the zone preferred."""

    def __init__(self, router: ConsistentHashRouter, zone: str) -> None:
        if not isinstance(zone, str) or not zone:
            raise ValueError(f"zone must be a non-empty str, not {zone!r}")
        self._router = router
        self._zone = zone

    @property
    def zone(self) -> str:
        """The zone this router prefers."""
        return self._zone

    @property
    def router(self) -> ConsistentHashRouter:
        """The ring of every node."""
        return self._router


class ZonedRouter(_ZoneRouting):
    """Routes keys to nodes of ``zone`` first, falling back to every zone.

    ``router`` is the ring of every node (zones given at
    ``add_service_node``); it is read, never changed.  ``mark_down`` and
    ``mark_up`` take nodes out of (and back into) service for this router
    alone.
    """

    def __init__(self, router: ConsistentHashRouter, zone: str) -> None:
        super().__init__(router, zone)
        self._down: set[str] = set()
        self._lock = threading.Lock()
        self._local = router
        self._everywhere = router
        self.refresh()

    @property
    def local_nodes(self) -> list[str]:
        """The nodes of the zone in service, in add order."""
        return list(self._local.nodes) if self._local is not self._everywhere else []

    def refresh(self) -> None:
        """Rebuilds the rings from the router: after adding, removing or
        re-zoning its nodes."""
        with self._lock:
            zones = self._router.zones
            everywhere = copy.copy(self._router)
            for node in self._down:
                everywhere.discard_service_node(node)
            local = copy.copy(everywhere)
            for node in list(local.nodes):
                if zones.get(node) != self._zone:
                    local.remove_service_node(node)
            self._everywhere = everywhere
            # No node of the zone in service: the whole ring answers.
            self._local = local if len(local) else everywhere

    def mark_down(self, node: str) -> None:
        """Takes ``node`` out of service here (its keys go to the next node
        of the zone, or elsewhere when the zone empties)."""
        with self._lock:
            self._down.add(node)
        self.refresh()

    def mark_up(self, node: str) -> None:
        """Puts ``node`` back in service here."""
        with self._lock:
            self._down.discard(node)
        self.refresh()

    def get_target_node(self, key: Key) -> str | None:
        """The key's node in the zone, or in the whole ring when the zone
        has none in service; None when no node is in service."""
        return self._local.get_target_node(key)

    def get_target_nodes(self, keys: Iterable[Key]) -> list[str | None]:
        """``get_target_node`` of each key, in one call."""
        return self._local.get_target_nodes(keys)

    def get_preference_list(self, key: Key, n: int) -> list[str]:
        """Up to ``n`` nodes in service to try in turn: the zone's own, from
        the key's owner clockwise, then the other zones' in the whole
        ring's order from the key."""
        local = self._local
        first = local.get_preference_list(key, n)
        if len(first) >= n or local is self._everywhere:
            return first
        rest = self._everywhere.get_preference_list(key, len(self._everywhere))
        taken = set(first)
        return first + [node for node in rest if node not in taken][:n - len(first)]


class LocalFirst(_ZoneRouting):
    """Local-zone-first lookups on ``router`` as it is, with no copy.

    ``zones`` maps nodes to their zones (a node it does not name is in no
    zone); it is read at each lookup, so the caller may keep it up to
    date, and is never changed here.  Nodes out of ``router`` (taken out
    by health checks, say) are simply not met: nothing to refresh.  Each
    lookup walks the ring until every node is met, so it costs more than a
    plain lookup as the node count grows (tens of microseconds at a few
    hundred nodes).
    """

    def __init__(self, router: ConsistentHashRouter, zone: str,
                 zones: Mapping[str, str]) -> None:
        super().__init__(router, zone)
        self._zones = zones

    @property
    def local_nodes(self) -> list[str]:
        """The nodes of the zone in the router, in add order."""
        zones, zone = self._zones, self._zone
        return [node for node in self._router.nodes if zones.get(node) == zone]

    def get_preference_list(self, key: Key, n: int) -> list[str]:
        """Up to ``n`` nodes to try in turn: the zone's own, clockwise from
        the key, then the other zones' in the same order.  With no node of
        the zone in the router, the router's own preference list."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an int >= 0, not {n!r}")
        router = self._router
        every = router.get_preference_list(key, len(router))
        zones, zone = self._zones, self._zone
        local = [node for node in every if zones.get(node) == zone]
        if len(local) >= n:
            return local[:n]
        return (local + [node for node in every if zones.get(node) != zone])[:n]

    def get_target_node(self, key: Key) -> str | None:
        """The key's node in the zone, or in the whole ring when the zone
        has none in the router; None when the router is empty."""
        first = self.get_preference_list(key, 1)
        return first[0] if first else None
