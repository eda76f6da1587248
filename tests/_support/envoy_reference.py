"""Envoy's ring hash and Maglev, and gRPC's ring_hash, in plain Python from
their sources' rules (envoy ring_hash_lb.cc, maglev_lb.cc,
thread_aware_lb_impl.cc; grpc ring_hash.cc): the oracles the 64-bit ring
layouts and MaglevRouter are compared with.  XXH64 comes from the xxhash
package; murmur2_64 is passed in (the g++ reference program is its oracle).
"""
from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence

import xxhash

Hash64 = Callable[[bytes], int]


def xxh64(data: bytes) -> int:
    return xxhash.xxh64_intdigest(data, 0)


def ring_counts(weights: Sequence[int], min_ring: int, max_ring: int) -> list[int]:
    """Points a host: normalised weights, the lightest's whole share of
    min_ring, capped by max_ring, assigned by running sums."""
    total = sum(weights)
    normalised = [w / total for w in weights]
    lightest = min([*normalised, 1.0])
    scale = min(math.ceil(lightest * min_ring) / lightest, float(max_ring))
    counts, current, target = [], 0.0, 0.0
    for w in normalised:
        target += scale * w
        count = 0
        while current < target:
            count += 1
            current += 1.0
        counts.append(count)
    return counts


def ring(hosts: Sequence[str], weights: Sequence[int], min_ring: int, max_ring: int,
         point_hash: Hash64 = xxh64) -> list[tuple[int, int]]:
    """The sorted ring: (point, host index); equal points by host index."""
    points = []
    for k, (host, count) in enumerate(zip(hosts, ring_counts(weights, min_ring, max_ring), strict=False)):
        points += [(point_hash(f"{host}_{i}".encode()), k) for i in range(count)]
    return sorted(points)


def ring_lookup(points: list[tuple[int, int]], h: int) -> int:
    """The host of the first point >= h, wrapping."""
    i = bisect.bisect_left(points, (h, -1))
    return points[i % len(points)][1]


def grpc_sizes(min_ring: int, max_ring: int, cap: int = 4096) -> tuple[int, int]:
    return min(min_ring, cap), min(max_ring, cap)


def maglev(hosts: Sequence[str], weights: Sequence[int], size: int) -> list[int]:
    """Envoy's Maglev table of host indices (hosts sorted by key)."""
    order = sorted(range(len(hosts)), key=lambda k: hosts[k].encode())
    total = sum(weights)
    norm = [weights[k] / total for k in order]
    top = max(norm)
    offset = [xxhash.xxh64_intdigest(hosts[k].encode(), 0) % size for k in order]
    skip = [xxhash.xxh64_intdigest(hosts[k].encode(), 1) % (size - 1) + 1 for k in order]
    target = [0.0] * len(order)
    nxt = [0] * len(order)
    table: list[int | None] = [None] * size
    filled, iteration = 0, 1
    while filled < size:
        for i in range(len(order)):
            if filled == size:
                break
            if iteration * norm[i] < target[i]:
                continue
            target[i] += top
            c = (offset[i] + skip[i] * nxt[i]) % size
            while table[c] is not None:
                nxt[i] += 1
                c = (offset[i] + skip[i] * nxt[i]) % size
            table[c] = order[i]
            nxt[i] += 1
            filled += 1
        iteration += 1
    return [k for k in table if k is not None]
