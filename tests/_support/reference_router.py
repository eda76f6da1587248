"""The documented pure-Python ConsistentHashRouter, the oracle chash must match.

``DocumentedRouter`` is kept as the design document gives it (MD5 of the
UTF-8 key, mod 2**32; virtual keys "{node}_virtual_{i}"; first point >= the
key's hash, wrapping).  ``ModelRouter`` is the same algorithm over a set of
nodes, plus weights (``round(vnodes * weight)`` points, at least one) and
the smallest-id owner for points several nodes share, the two places where
chash deliberately extends the documented class; with ``layout`` and
``hash`` it models every other scheme too, over the oracles of
``_support.hashes``.
"""
from __future__ import annotations

import bisect
import hashlib
import math
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from _support.hashes import digest

if TYPE_CHECKING:
    from chash import ConsistentHashRouter

HashArg = str | Callable[[bytes], int]


def md5_point(key: str | bytes) -> int:
    data = key.encode("utf-8") if isinstance(key, str) else key
    return int(hashlib.md5(data).hexdigest(), 16) % (2**32)


def as_bytes(key: str | bytes) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else key


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


def _f32(value: float) -> float:
    """value rounded to single precision, as a C float holds it."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


class ModelRouter:
    """The documented algorithm as a set of nodes, for state-machine tests.

    ``weights`` is the whole state (tests may change it directly). The ring
    is rebuilt from scratch whenever ``weights`` differs from the last ring
    built, so it cannot share a bug with an incremental implementation.

    ``layout`` "python" (``{node}_virtual_{i}``, the last 4 digest bytes),
    "node" (``{node}#vnode{i}``, the first 4) or "ketama" (``{node}-{i//4}``,
    4 little-endian points an MD5 digest); ``hash`` a name of
    ``chash.HASHES`` or a callable whose int result counts mod 2**32.  MD5
    with the python layout is the documented formula, ``md5_point``.
    """

    def __init__(self, virtual_node_count: int = 100, layout: str = "python",
                 hash: HashArg = "md5") -> None:
        self.virtual_node_count = virtual_node_count
        self.layout = layout
        self.hash = hash
        self.weights: dict[str, float] = {}
        self._ring: list[tuple[int, bytes, str]] = []
        self._ring_of: tuple[tuple[str, float], ...] = ()
        self._vpoints: dict[tuple[str, int], int] = {}

    def point_count(self, node: str) -> int:
        if self.layout == "ketama":
            # libketama: floorf(pct * base / 4 * n) * 4, each step a C float.
            total = _f32(float(sum(self.weights.values())))
            pct = _f32(_f32(self.weights[node]) / total)
            groups = _f32(_f32(_f32(pct * _f32(self.virtual_node_count)) / 4)
                          * _f32(len(self.weights)))
            return math.floor(groups) * 4
        return max(1, round(self.virtual_node_count * self.weights[node]))

    def key_point(self, key: str | bytes) -> int:
        """The ring position of ``key``."""
        data = as_bytes(key)
        if callable(self.hash):
            return int(self.hash(data)) % 2**32
        if self.layout == "python":
            if self.hash == "md5":
                return md5_point(data)
            return int.from_bytes(digest(self.hash, data)[-4:], "big")
        if self.layout in ("node", "nghttpx"):  # nghttpx: affinity=ip's SHA-256 cut
            return int.from_bytes(digest(self.hash, data)[:4], "big")
        if self.layout == "varnish":  # VRT_HashStrands32: the last 4 bytes, little-endian
            return int.from_bytes(digest(self.hash, data)[-4:], "little")
        if self.layout in ("nginx", "libmemcached", "haproxy") and self.hash != "md5":
            return int.from_bytes(digest(self.hash, data), "big")  # crc32, one_at_a_time, haproxy's
        return int.from_bytes(digest(self.hash, data)[:4], "little")  # ketama, libmemcached md5

    def vpoint(self, node: str, index: int) -> int:
        """The position of point ``index`` of ``node``."""
        cached = self._vpoints.get((node, index))
        if cached is not None:
            return cached
        if self.layout == "python":
            value = self.key_point(f"{node}_virtual_{index}")
        elif self.layout == "node":
            value = self.key_point(f"{node}#vnode{index}")
        else:
            group = digest("md5", f"{node}-{index // 4}".encode())
            value = int.from_bytes(group[4 * (index % 4):4 * (index % 4) + 4], "little")
        self._vpoints[(node, index)] = value
        return value

    def points(self) -> list[tuple[int, bytes, str]]:
        """Every point as (position, node id as UTF-8, node), sorted."""
        state = tuple(self.weights.items())
        if state != self._ring_of or not self._ring:
            # Ties: the smallest id, or the node added first for ketama.
            rank = {node: (i if self.layout == "ketama" else 0) for i, node in enumerate(self.weights)}
            ring = [(self.vpoint(node, index), rank[node], node.encode("utf-8"), node)
                    for node in self.weights for index in range(self.point_count(node))]
            ring.sort()
            ring = [(value, raw, node) for value, _, raw, node in ring]
            self._ring, self._ring_of = ring, state
        return self._ring

    def successor(self, key: str | bytes) -> int:
        """The index of the first point >= the key's position, wrapping to 0."""
        ring = self.points()
        return bisect.bisect_left(ring, (self.key_point(key),)) % len(ring)

    def get_target_node(self, key: str | bytes) -> str | None:
        ring = self.points()
        return ring[self.successor(key)][2] if ring else None

    def preference(self, key: str | bytes, n: int) -> list[str]:
        """The first ``n`` distinct nodes clockwise from ``key``."""
        ring = self.points()
        if not ring:
            return []
        start = self.successor(key)
        out: list[str] = []
        for step in range(len(ring)):
            if len(out) >= n:
                break
            node = ring[(start + step) % len(ring)][2]
            if node not in out:
                out.append(node)
        return out

    def node_map(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for value, _, node in self.points():
            out.setdefault(value, node)  # the smallest id comes first
        return out

    def ownership(self) -> dict[str, float]:
        ring = self.points()
        share = {node: 0.0 for node in self.weights}
        for i, (value, _, node) in enumerate(ring):
            prev = ring[i - 1][0] if i else ring[-1][0] - 2**32
            share[node] += (value - prev) / 2**32
        return share


def assert_same_ring(router: ConsistentHashRouter, model: ModelRouter) -> None:
    """``router`` holds exactly ``model``'s nodes, weights and points, in
    the model's order, and its invariant checker passes."""
    router._check()
    assert router.nodes == list(model.weights)
    assert list(router) == list(model.weights)
    assert len(router) == len(model.weights)
    assert router.weights == model.weights
    assert router.points == {node: model.point_count(node) for node in model.weights}
    assert router.hash_ring == [value for value, _, _ in model.points()]
    assert router.node_map == model.node_map()
    for node in model.weights:
        assert node in router


def snapshot(router: ConsistentHashRouter) -> tuple[object, ...]:
    """Everything observable about ``router``'s ring, for "nothing changed"
    checks: equal snapshots route every key alike.  The node list comes first."""
    return (router.nodes, router.weights, router.points, router.hash_ring, router.node_map,
            router.fingerprint(), len(router), router.get_target_nodes(["a", "b", "c", "d", "e"]))
