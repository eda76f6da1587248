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
"""
from __future__ import annotations

import copy
import threading
from collections.abc import Iterable

from chash._chash import ConsistentHashRouter

__all__ = ["ZonedRouter"]

Key = str | bytes


class ZonedRouter:
    """Routes keys to nodes of ``zone`` first, falling back to every zone.

    ``router`` is the ring of every node (zones given at
    ``add_service_node``); it is read, never changed.  ``mark_down`` and
    ``mark_up`` take nodes out of (and back into) service for this router
    alone.
    """

    def __init__(self, router: ConsistentHashRouter, zone: str) -> None:
        if not isinstance(zone, str) or not zone:
            raise ValueError(f"zone must be a non-empty str, not {zone!r}")
        self._router = router
        self._zone = zone
        self._down: set[str] = set()
        self._lock = threading.Lock()
        self._local = router
        self._everywhere = router
        self.refresh()

    @property
    def zone(self) -> str:
        """The zone this router prefers."""
        return self._zone

    @property
    def router(self) -> ConsistentHashRouter:
        """The ring of every node."""
        return self._router

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
