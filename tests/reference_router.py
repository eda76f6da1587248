"""The documented pure-Python ConsistentHashRouter, the oracle chash must match.

Kept as the design document gives it (MD5 of the UTF-8 key, mod 2**32;
virtual keys "{node}_virtual_{i}"; first point >= the key's hash, wrapping),
plus weights (``round(vnodes * weight)`` points, at least one) and the
smallest-id owner for points several nodes share, the two places where
chash deliberately extends the documented class.
"""
from __future__ import annotations

import bisect
import hashlib


def md5_point(key: str | bytes) -> int:
    data = key.encode("utf-8") if isinstance(key, str) else key
    return int(hashlib.md5(data).hexdigest(), 16) % (2**32)


class DocumentedRouter:
    """The class from the design document, unchanged in behaviour."""

    def __init__(self, virtual_node_count: int = 100) -> None:
        self.virtual_node_count = virtual_node_count
        self.hash_ring: list[int] = []
        self.node_map: dict[int, str] = {}

    def _calculate_hash(self, key: str) -> int:
        md5_hash = hashlib.md5(key.encode(encoding="utf-8")).hexdigest()
        return int(md5_hash, 16) % (2**32)

    def add_service_node(self, real_node_id: str) -> None:
        for index in range(self.virtual_node_count):
            hash_val = self._calculate_hash(f"{real_node_id}_virtual_{index}")
            bisect.insort(self.hash_ring, hash_val)
            self.node_map[hash_val] = real_node_id

    def remove_service_node(self, real_node_id: str) -> None:
        for index in range(self.virtual_node_count):
            hash_val = self._calculate_hash(f"{real_node_id}_virtual_{index}")
            self.hash_ring.remove(hash_val)
            del self.node_map[hash_val]

    def get_target_node(self, request_key: str) -> str | None:
        if not self.hash_ring:
            return None
        request_hash = self._calculate_hash(request_key)
        pos = bisect.bisect_left(self.hash_ring, request_hash)
        if pos == len(self.hash_ring):
            pos = 0
        return self.node_map[self.hash_ring[pos]]


class ModelRouter:
    """The documented algorithm as a set of nodes, for state-machine tests.

    Rebuilt from scratch on every query, so it cannot share a bug with an
    incremental implementation.
    """

    def __init__(self, virtual_node_count: int = 100) -> None:
        self.virtual_node_count = virtual_node_count
        self.weights: dict[str, float] = {}

    def point_count(self, node: str) -> int:
        return max(1, round(self.virtual_node_count * self.weights[node]))

    def points(self) -> list[tuple[int, bytes, str]]:
        out = []
        for node in self.weights:
            for index in range(self.point_count(node)):
                out.append((md5_point(f"{node}_virtual_{index}"), node.encode("utf-8"), node))
        out.sort()
        return out

    def get_target_node(self, key: str | bytes) -> str | None:
        ring = self.points()
        if not ring:
            return None
        pos = bisect.bisect_left(ring, (md5_point(key),))
        return ring[pos % len(ring)][2]
